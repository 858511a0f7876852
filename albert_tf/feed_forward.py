"""AlbertFeedForward: the feed-forward half of a block, with its post-LN (the original's LayerNorm_1)."""

import keras
import tensorflow as tf

from albert_tf.activations import get_activation
from albert_tf.embeddings import LAYER_NORM_EPSILON
from albert_tf.recomputation import input_for_recomputation
from albert_tf.replica_dropout import ReplicaDropout


def sum_over_leading_axes(tensor):
    """Sums a [..., features] tensor over every axis but the last, as a product with a ones matrix.

    XLA:CPU lowers a reduction over leading axes to strided partial sums (reduce-window) that run
    3-4x slower than reading the tensor once; a GEMM with a ones matrix reads it once, on every
    core. The ones matrix has two rows: with one, XLA treats the product as a vector product and
    leaves the GEMM path (BUILD_NOTES.md, "Speed and memory").

    Example:
    >>> sum_over_leading_axes(tf.reshape(tf.range(12.0), [2, 3, 2])).numpy().tolist()
    [30.0, 36.0]
    """
    rows = tf.reshape(tensor, [-1, tf.shape(tensor)[-1]])
    ones = tf.ones([2, tf.shape(rows)[0]], dtype=tensor.dtype)
    return tf.matmul(ones, rows)[0]


def activated_projection(unbiased_pre_activation, pre_activation_bias, kernel, bias, activation):
    """`activation(unbiased_pre_activation + pre_activation_bias) · kernel + bias`, over the last axis.

    The feed-forward half from W1's product on: W1's bias, the activation and W2. The gradient
    recomputes the activation: only W1's product is kept for the backward pass, not the activated
    [batch, seq, intermediate] tensor that W2's kernel gradient needs (151 MB less for XLA to hold
    across the 12 depths at ALBERT-base, batch 8 x 128). Both bias gradients sum over the tokens
    with `sum_over_leading_axes`, inside this one custom gradient (each tf.custom_gradient costs
    host memory of its own in a traced function). BUILD_NOTES.md, "Speed and memory".

    Example:
    >>> x = tf.constant([[-1.0, 2.0]])
    >>> kernel, bias = tf.constant([[1.0], [0.5]]), tf.constant([0.25])
    >>> activated_projection(x, tf.constant([0.0, -1.0]), kernel, bias, tf.nn.relu).numpy().tolist()
    [[0.75]]
    """

    @tf.custom_gradient
    def project(unbiased_pre_activation, pre_activation_bias, kernel, bias):
        output = tf.tensordot(activation(unbiased_pre_activation + pre_activation_bias), kernel, axes=1) + bias

        def gradient(upstream):
            recomputed_input = input_for_recomputation(unbiased_pre_activation, upstream) + pre_activation_bias
            with tf.GradientTape() as tape:
                tape.watch(recomputed_input)
                activated = activation(recomputed_input)
            # A matmul over [tokens, features] rows with transpose_a, not tensordot: tensordot transposes
            # the recomputed activation, which XLA then writes out column by column.
            kernel_grad = tf.matmul(tf.reshape(activated, [-1, activated.shape[-1]]),
                                    tf.reshape(upstream, [-1, upstream.shape[-1]]), transpose_a=True)
            activated_grad = tf.tensordot(upstream, kernel, axes=[[upstream.shape.rank - 1], [1]])
            pre_activation_grad = tape.gradient(activated, recomputed_input, output_gradients=activated_grad)
            return (pre_activation_grad, sum_over_leading_axes(pre_activation_grad), kernel_grad,
                    sum_over_leading_axes(upstream))

        return output, gradient

    return project(unbiased_pre_activation, pre_activation_bias, kernel, bias)


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
        self.activation = get_activation(hidden_act)
        # W1's weights; its bias and activation run inside `activated_projection` with W2.
        self.intermediate = keras.layers.Dense(intermediate_size, kernel_initializer=initializer, name="intermediate",
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
        compute_dtype = self.output_dense.compute_dtype

        def weight(variable):
            return keras.ops.cast(variable, compute_dtype)

        hidden_states = keras.ops.cast(hidden_states, compute_dtype)
        projected = activated_projection(
            tf.tensordot(hidden_states, weight(self.intermediate.kernel), axes=1), weight(self.intermediate.bias),
            weight(self.output_dense.kernel), weight(self.output_dense.bias), self.activation)
        ffn_output = self.dropout(projected, training=training)
        return self.layer_norm(ffn_output + hidden_states)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                      hidden_act=self.hidden_act, hidden_dropout_prob=self.hidden_dropout_prob,
                      initializer_range=self.initializer_range)
        return config
