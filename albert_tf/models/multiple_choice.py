"""AlbertMultipleChoice: one score per choice from the pooled output, softmax across choices (RACE)."""

import keras
import tensorflow as tf

from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.models.classifier import HEAD_INITIALIZER_STDDEV
from albert_tf.models.encoder import INPUT_NAMES, AlbertEncoder, as_config


class AlbertMultipleChoice(keras.Model):
    """Takes int32 [batch, num_choices, seq] inputs and returns logits [batch, num_choices].

    Each choice is encoded as its own sequence (`[CLS] article [SEP] qa_i [SEP]` for RACE);
    the original's race_utils scores it with `output_weights` [1, H] and `output_bias` [1].

    Example:
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertMultipleChoice(config, num_choices=4)
    >>> ids = tf.ones([2, 4, 5], tf.int32)
    >>> model({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids}).shape
    TensorShape([2, 4])
    """

    def __init__(self, config, num_choices=4, dropout_rate=0.1, recompute_blocks=False, **kwargs):
        kwargs.setdefault("name", "albert_multiple_choice")
        super().__init__(**kwargs)
        self.config = as_config(config)
        self.num_choices = num_choices
        self.dropout_rate = dropout_rate
        self.recompute_blocks = recompute_blocks
        self.encoder = AlbertEncoder(self.config, recompute_blocks=recompute_blocks, dtype=self.dtype_policy)
        self.dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy)
        self.head = ClassificationHead(hidden_size=self.config.hidden_size, num_classes=1,
                                       initializer_range=HEAD_INITIALIZER_STDDEV, name="output",
                                       dtype=self.dtype_policy)
        self.head.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        seq_length = tf.shape(inputs["input_word_ids"])[-1]
        flat = {name: tf.reshape(inputs[name], [-1, seq_length]) for name in INPUT_NAMES}
        pooled = self.encoder(flat, training=training)["pooled_output"]
        scores = self.head(self.dropout(pooled, training=training))
        return tf.reshape(scores, [-1, self.num_choices])

    def head_variable_map(self):
        """TF1 names of the head's variables, as run_race.py creates them."""
        return {"output_weights": self.head.output_weights, "output_bias": self.head.output_bias}

    def get_config(self):
        return {"config": self.config.to_dict(), "num_choices": self.num_choices,
                "dropout_rate": self.dropout_rate, "recompute_blocks": self.recompute_blocks,
                "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
