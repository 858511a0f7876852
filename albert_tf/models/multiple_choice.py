"""AlbertMultipleChoice: one score per choice from the pooled output, softmax across choices (RACE)."""

import tensorflow as tf

from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.initializers import HEAD_INITIALIZER_STDDEV
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.models.encoder import INPUT_NAMES, no_output_positions
from albert_tf.models.task_model import AlbertTaskModel


class AlbertMultipleChoice(AlbertTaskModel):
    """Takes int32 [batch, num_choices, seq] inputs and returns logits [batch, num_choices].

    Each choice is encoded as its own sequence (`[CLS] article [SEP] qa_i [SEP]` for RACE);
    the original's race_utils scores it with `output_weights` [1, H] and `output_bias` [1]. The
    encoder's last block runs on position 0 alone, the only row the pooler reads (`output_positions`).
    Built from a config or around an AlbertEncoder (`encoder=`), as AlbertTaskModel describes.

    Example:
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertMultipleChoice(config, num_choices=4)
    >>> ids = tf.ones([2, 4, 5], tf.int32)
    >>> model({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids}).shape
    TensorShape([2, 4])
    """

    def __init__(self, config=None, num_choices=4, dropout_rate=0.1, recompute_blocks=None, encoder=None, **kwargs):
        kwargs.setdefault("name", "albert_multiple_choice")
        super().__init__(config, recompute_blocks=recompute_blocks, encoder=encoder, **kwargs)
        self.num_choices = num_choices
        self.dropout_rate = dropout_rate
        self.dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy)
        self.head = ClassificationHead(hidden_size=self.config.hidden_size, num_classes=1,
                                       initializer_range=HEAD_INITIALIZER_STDDEV, name="output",
                                       dtype=self.dtype_policy)
        self.head.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        seq_length = tf.shape(inputs["input_word_ids"])[-1]
        flat = {name: tf.reshape(inputs[name], [-1, seq_length]) for name in INPUT_NAMES}
        pooled = self.encoder(flat, training=training,
                              output_positions=no_output_positions(flat["input_word_ids"]))["pooled_output"]
        scores = self.head(self.dropout(pooled, training=training))
        return tf.reshape(scores, [-1, self.num_choices])

    def head_variable_map(self):
        """TF1 names of the head's variables, as run_race.py creates them."""
        return {"output_weights": self.head.output_weights, "output_bias": self.head.output_bias}

    def get_config(self):
        config = super().get_config()
        config.update(num_choices=self.num_choices, dropout_rate=self.dropout_rate)
        return config
