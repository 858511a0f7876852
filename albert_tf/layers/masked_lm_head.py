"""AlbertMaskedLMHead: transform, LayerNorm and the decoder tied to the word-embedding table."""

import keras
import tensorflow as tf

from albert_tf.layers.activations import get_activation
from albert_tf.layers.initializers import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.layers.layer_normalization import AlbertLayerNormalization


def gather_positions(sequence_output, positions):
    """[B, S, H] gathered at int [B, P] positions -> [B, P, H]."""
    return tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)


class AlbertMaskedLMHead(keras.layers.Layer):
    """The original's `cls/predictions`: dense H -> E with hidden_act, LayerNorm, then logits
    `h · word_embeddingsᵀ + output_bias`.

    The decoder is not a variable of this layer: `call` takes the word-embedding table itself,
    so the pretrainer hands it the very tf.Variable the embeddings use (tied, never copied).
    Positions are gathered before the transform, so the V x E decoder runs on P positions only;
    `masked_lm_positions=None` takes `sequence_output` as already gathered ([B, P, H], as the
    encoder's `output_positions` return it). Logits come back in float32.

    Example:
    >>> head = AlbertMaskedLMHead(vocab_size=100, embedding_size=16)
    >>> table = tf.random.normal([100, 16])
    >>> head(tf.zeros([2, 8, 32]), tf.constant([[1, 2], [3, 4]]), table).shape
    TensorShape([2, 2, 100])
    """

    def __init__(self, vocab_size, embedding_size, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            embedding_size, activation=get_activation(hidden_act), name="dense", dtype=self.dtype_policy,
            kernel_initializer=truncated_normal(initializer_range))
        self.layer_norm = AlbertLayerNormalization(epsilon=LAYER_NORM_EPSILON, name="LayerNorm",
                                                   dtype=self.dtype_policy)

    def build(self, input_shape=None):
        hidden_size = input_shape[-1] if input_shape is not None else None
        self.dense.build((None, None, hidden_size))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table, training=False):
        if masked_lm_positions is not None:
            sequence_output = gather_positions(sequence_output, masked_lm_positions)
        hidden = self.layer_norm(self.dense(sequence_output), training=training)
        table = tf.cast(embedding_table, hidden.dtype)
        logits = tf.einsum("bpe,ve->bpv", hidden, table)
        return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range)
        return config
