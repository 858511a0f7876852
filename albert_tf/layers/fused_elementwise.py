"""Elementwise chains of a block compiled by XLA into one loop each, also in a step that TensorFlow's own kernels
run: there every op of a chain (a cast, a scale, the mask's add, softmax, GELU and its derivative) is a pass over
memory of its own (BUILD_NOTES.md, "Speed and memory"). Inside an XLA-compiled step they are inlined as any
other function.
"""

import tensorflow as tf
from tensorflow.python.ops import control_flow_util


def xla_fused(function):
    """`function` as a tf.function that XLA compiles (its gradient too), traced once per dtype and rank.

    Example:
    >>> double = xla_fused(lambda x: 2.0 * x)
    >>> double(tf.constant([1.0, 2.0])).numpy().tolist()
    [2.0, 4.0]
    """
    return tf.function(function, jit_compile=True, autograph=False, reduce_retracing=True)


def traced_for_xla() -> bool:
    """Whether the ops being traced now are compiled by XLA (a jit_compile function or one it inlines).

    Example:
    >>> traced_for_xla()
    False
    """
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


@xla_fused
def _softmax_and_probabilities(scores, attention_bias, scale):
    softmax = tf.nn.softmax(tf.cast(scores, tf.float32) * scale + attention_bias, axis=-1)
    return softmax, tf.cast(softmax, scores.dtype)


@xla_fused
def _probabilities_of_float32(scores, attention_bias, scale):
    return tf.nn.softmax(scores * scale + attention_bias, axis=-1)


@xla_fused
def _scores_gradient(softmax, upstream, scale):
    """The gradient to the scores, in the upstream gradient's dtype (the probabilities' and the scores')."""
    upstream_float32 = tf.cast(upstream, tf.float32)
    gradient = (upstream_float32 - tf.reduce_sum(upstream_float32 * softmax, axis=-1, keepdims=True)) * softmax
    return tf.cast(gradient * scale, upstream.dtype)


def attention_probabilities(scores, attention_bias, scale):
    """`softmax(scores · scale + attention_bias)` over the last axis in float32, returned in the scores' dtype.

    `scores` are the raw query-key products in the compute dtype, `attention_bias` float32 (0 or -10000),
    broadcast against them. With a power-of-two `scale` (1/8 for 64-dimensional heads) scaling before or after
    the cast to float32 gives the same numbers. The gradient (to `scores` only: the bias is the input mask's)
    is softmax's, from the float32 softmax alone: the fused function's own gradient would also keep the scores
    and, in float32, a second copy of the probabilities, 12 MiB a depth at ALBERT-base, batch 8 x 128, on
    TensorFlow's kernels (BUILD_NOTES.md, "Speed and memory").

    Example:
    >>> scores, mask_bias = tf.constant([[2.0, 2.0, 9.0]]), tf.constant([[0.0, 0.0, -10000.0]])
    >>> probabilities = attention_probabilities(scores, mask_bias, 0.5)
    >>> probabilities.numpy().tolist()
    [[0.5, 0.5, 0.0]]
    """
    attention_bias, scale = tf.cast(attention_bias, tf.float32), float(scale)

    @tf.custom_gradient
    def probabilities_of(scores):
        if scores.dtype == tf.float32:
            softmax = probabilities = _probabilities_of_float32(scores, attention_bias, scale)
        else:
            softmax, probabilities = _softmax_and_probabilities(scores, attention_bias, scale)

        def gradient(upstream):
            return _scores_gradient(softmax, upstream, scale)

        return probabilities, gradient

    return probabilities_of(scores)
