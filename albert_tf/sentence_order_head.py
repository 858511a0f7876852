"""SentenceOrderHead: the original's `cls/seq_relationship` 2-way classifier on pooled_output."""

import keras
import tensorflow as tf


class SentenceOrderHead(keras.layers.Layer):
    """logits = pooled · output_weightsᵀ + output_bias, with output_weights stored [2, H] as in TF1.

    The same head serves SOP (ALBERT) and NSP (BERT); only the data's labels differ.

    Example:
    >>> head = SentenceOrderHead(hidden_size=32)
    >>> head(tf.zeros([4, 32])).shape
    TensorShape([4, 2])
    """

    def __init__(self, hidden_size, num_classes=2, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_classes = num_classes
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_classes, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_classes,), initializer="zeros")
        self.built = True

    def call(self, pooled_output):
        logits = tf.matmul(pooled_output, tf.cast(self.output_weights, pooled_output.dtype), transpose_b=True)
        return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_classes=self.num_classes,
                      initializer_range=self.initializer_range)
        return config
