"""TokenDense: a Dense over token tensors whose bias gradient is one matrix product."""

import keras
import tensorflow as tf
from keras import ops


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


@tf.custom_gradient
def add_bias(inputs, bias):
    """`inputs + bias` over the last axis; the bias gradient comes from `sum_over_leading_axes`.

    Example:
    >>> add_bias(tf.zeros([1, 2, 3]), tf.constant([1.0, 2.0, 3.0])).numpy().tolist()
    [[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]]
    """

    def gradient(upstream):
        return upstream, sum_over_leading_axes(upstream)

    return inputs + bias, gradient


class TokenDense(keras.layers.Dense):
    """keras.layers.Dense whose bias gradient sums the tokens with `add_bias`.

    Weights, names, config and outputs are those of Dense; only the backward pass differs. The
    encoder's projections run on [batch, seq, features], so their bias gradients sum a thousand
    rows or more per step (ALBERT-base, batch 8 x 128).

    Example:
    >>> layer = TokenDense(4, name="query")
    >>> layer(tf.ones([2, 3, 8])).shape
    TensorShape([2, 3, 4])
    >>> [weight.path for weight in layer.weights]
    ['query/kernel', 'query/bias']
    """

    def call(self, inputs, training=None):
        outputs = ops.matmul(inputs, self.kernel)
        if self.bias is not None:
            outputs = add_bias(outputs, ops.cast(self.bias, outputs.dtype))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
