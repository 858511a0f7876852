"""AlbertPretrainer: the encoder with the masked-LM and sentence-order heads."""

from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.masked_lm_head import AlbertMaskedLMHead
from albert_tf.models.task_model import AlbertTaskModel


class AlbertPretrainer(AlbertTaskModel):
    """Takes the encoder's input dict plus `masked_lm_positions` [B, P] and returns `mlm_logits`
    [B, P, V] and `sop_logits` [B, 2] (float32). The encoder is `.encoder`; `recompute_blocks`
    is its option (re-run blocks in the backward pass to save memory). Built from a config or
    around an AlbertEncoder (`encoder=`), as AlbertTaskModel describes. The encoder's last block
    runs on the masked positions and position 0 only, the rows the heads read (its
    `output_positions`).

    Example:
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertPretrainer(config)
    >>> import tensorflow as tf
    >>> outputs = model({"input_word_ids": tf.constant([[2, 4, 9, 3]]), "input_mask": tf.ones([1, 4], tf.int32),
    ...                  "input_type_ids": tf.zeros([1, 4], tf.int32), "masked_lm_positions": tf.constant([[1]])})
    >>> outputs["mlm_logits"].shape, outputs["sop_logits"].shape
    (TensorShape([1, 1, 100]), TensorShape([1, 2]))
    """

    def __init__(self, config=None, recompute_blocks=None, encoder=None, **kwargs):
        kwargs.setdefault("name", "albert_pretrainer")
        super().__init__(config, recompute_blocks=recompute_blocks, encoder=encoder, **kwargs)
        config = self.config
        self.masked_lm_head = AlbertMaskedLMHead(
            vocab_size=config.vocab_size, embedding_size=config.embedding_size, hidden_act=config.hidden_act,
            initializer_range=config.initializer_range, name="predictions", dtype=self.dtype_policy)
        self.sentence_order_head = ClassificationHead(
            hidden_size=config.hidden_size, initializer_range=config.initializer_range,
            name="seq_relationship", dtype=self.dtype_policy)
        self.build()

    def build(self, input_shape=None):
        self.masked_lm_head.build((None, None, self.config.hidden_size))
        self.sentence_order_head.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        encoder_outputs = self.encoder(inputs, training=training, output_positions=inputs["masked_lm_positions"])
        mlm_logits = self.masked_lm_head(encoder_outputs["sequence_output"], None,
                                         self.encoder.embeddings.word_embeddings, training=training)
        sop_logits = self.sentence_order_head(encoder_outputs["pooled_output"])
        return {"mlm_logits": mlm_logits, "sop_logits": sop_logits}
