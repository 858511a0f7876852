"""ClassificationHead: logits = pooled · output_weightsᵀ + output_bias, the original's head layout."""

import keras
import tensorflow as tf

from albert_tf.layers.initializers import truncated_normal


class ClassificationHead(keras.layers.Layer):
    """logits = pooled · output_weightsᵀ + output_bias, output_weights stored [num_classes, H] as in TF1.

    The original uses this layout for SOP/NSP (`cls/seq_relationship`, 2 classes), the GLUE
    classifier (`output_weights` [num_labels, H]; one output for STS-B regression) and RACE
    (`output_weights` [1, H], one score per choice). Logits come back in float32.

    Example:
    >>> head = ClassificationHead(hidden_size=32)
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
            initializer=truncated_normal(self.initializer_range))
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
