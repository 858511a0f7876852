"""AlbertFeedForward: the feed-forward half of a block, with its post-LN (the original's LayerNorm_1)."""

import keras

from albert_tf.activations import get_activation
from albert_tf.embeddings import LAYER_NORM_EPSILON
from albert_tf.replica_dropout import ReplicaDropout


class AlbertFeedForward(keras.layers.Layer):
    """`LN(x + dropout(W2 · act(W1 · x)))`.

    Sublayer names follow the original's nesting: `intermediate` (W1) and `output` (W2, which the
    TF1 checkpoint stores under `ffn_1/intermediate/output/dense`).

    Example:
    >>> layer = AlbertFeedForward(hidden_size=16, intermediate_size=64)
    >>> layer(keras.ops.zeros([1, 3, 16])).shape
    TensorShape([1, 3, 16])
    """

    def __init__(self, hidden_size, intermediate_size, hidden_act="gelu", hidden_dropout_prob=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.intermediate = keras.layers.Dense(intermediate_size, activation=get_activation(hidden_act),
                                               kernel_initializer=initializer, name="intermediate",
                                               dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=initializer, name="output",
                                               dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="LayerNorm_1",
                                                          dtype=self.dtype_policy)
        self.dropout = ReplicaDropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, hidden_states, training=False):
        ffn_output = self.dropout(self.output_dense(self.intermediate(hidden_states)), training=training)
        return self.layer_norm(ffn_output + hidden_states)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                      hidden_act=self.hidden_act, hidden_dropout_prob=self.hidden_dropout_prob,
                      initializer_range=self.initializer_range)
        return config
