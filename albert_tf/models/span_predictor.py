"""AlbertSpanPredictor: SQuAD v1.1 start/end logits from the sequence output."""

import tensorflow as tf

from albert_tf.layers.initializers import HEAD_INITIALIZER_STDDEV, truncated_normal
from albert_tf.models.task_model import AlbertTaskModel


class AlbertSpanPredictor(AlbertTaskModel):
    """The original's v1 head: `cls/squad/output_weights` [2, H] and `cls/squad/output_bias` [2],
    applied at every position. Returns float32 `start_logits` and `end_logits` [B, S].
    Built from a config or around an AlbertEncoder (`encoder=`), as AlbertTaskModel describes.

    Example:
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertSpanPredictor(config)
    >>> ids = tf.ones([2, 5], tf.int32)
    >>> model({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids})["start_logits"].shape
    TensorShape([2, 5])
    """

    def __init__(self, config=None, recompute_blocks=None, encoder=None, **kwargs):
        kwargs.setdefault("name", "albert_span_predictor")
        super().__init__(config, recompute_blocks=recompute_blocks, encoder=encoder, **kwargs)
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.config.hidden_size),
            initializer=truncated_normal(HEAD_INITIALIZER_STDDEV))
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, inputs, training=False):
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = tf.einsum("bsh,kh->kbs", sequence, tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)[:, None, None]
        return {"start_logits": logits[0], "end_logits": logits[1]}

    def head_variable_map(self):
        return {"cls/squad/output_weights": self.output_weights, "cls/squad/output_bias": self.output_bias}
