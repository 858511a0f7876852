"""AlbertSquadV2: the encoder with the original's SQuAD 2.0 head."""

import keras

from albert_tf.layers.squad_v2_head import SquadV2Head
from albert_tf.models.encoder import AlbertEncoder, as_config


class AlbertSquadV2(keras.Model):
    """Inputs: the encoder's three ids plus `p_mask` [B, S]; in training also `start_positions` [B].
    Outputs: see SquadV2Head.

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

    def __init__(self, config, start_n_top=5, end_n_top=5, dropout_rate=0.1, recompute_blocks=False, **kwargs):
        kwargs.setdefault("name", "albert_squad_v2")
        super().__init__(**kwargs)
        self.config = as_config(config)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        self.recompute_blocks = recompute_blocks
        self.encoder = AlbertEncoder(self.config, recompute_blocks=recompute_blocks, dtype=self.dtype_policy)
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
        return {"config": self.config.to_dict(), "start_n_top": self.start_n_top, "end_n_top": self.end_n_top,
                "dropout_rate": self.dropout_rate, "recompute_blocks": self.recompute_blocks,
                "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
