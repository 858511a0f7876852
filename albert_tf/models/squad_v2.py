"""AlbertSquadV2: the encoder with the original's SQuAD 2.0 head."""

from albert_tf.layers.squad_v2_head import SquadV2Head
from albert_tf.models.task_model import AlbertTaskModel


class AlbertSquadV2(AlbertTaskModel):
    """Inputs: the encoder's three ids plus `p_mask` [B, S]; in training also `start_positions` [B].
    Outputs: see SquadV2Head. Built from a config or around an AlbertEncoder (`encoder=`), as
    AlbertTaskModel describes.

    Example:
    >>> import tensorflow as tf
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertSquadV2(config, start_n_top=2, end_n_top=2)
    >>> ids = tf.ones([1, 6], tf.int32)
    >>> model({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids,
    ...        "p_mask": tf.zeros([1, 6])})["cls_logits"].shape
    TensorShape([1])
    """

    def __init__(self, config=None, start_n_top=5, end_n_top=5, dropout_rate=0.1, recompute_blocks=None,
                 encoder=None, **kwargs):
        kwargs.setdefault("name", "albert_squad_v2")
        super().__init__(config, recompute_blocks=recompute_blocks, encoder=encoder, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        self.head = SquadV2Head(hidden_size=self.config.hidden_size, start_n_top=start_n_top, end_n_top=end_n_top,
                                dropout_rate=dropout_rate, initializer_range=self.config.initializer_range,
                                name="squad_v2_head", dtype=self.dtype_policy)
        self.head.build()
        self.built = True

    def call(self, inputs, training=False):
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        start_positions = inputs.get("start_positions") if training else None
        return self.head(sequence, inputs["p_mask"], start_positions=start_positions, training=training)

    def head_variable_map(self):
        return self.head.variable_map()

    def get_config(self):
        config = super().get_config()
        config.update(start_n_top=self.start_n_top, end_n_top=self.end_n_top, dropout_rate=self.dropout_rate)
        return config
