"""Elementwise chains of a block compiled by XLA into one loop each, also in a step that TensorFlow's own kernels
run: there every op of a chain (a cast, a scale, the mask's add, softmax, GELU and its derivative) is a pass over
memory of its own (BUILD_NOTES.md, "Speed and memory"). Inside an XLA-compiled step they are inlined as any
other function.
"""

import tensorflow as tf


def xla_fused(function):
    """`function` as a tf.function that XLA compiles (its gradient too), traced once per dtype and rank.

    Example:
    >>> double = xla_fused(lambda x: 2.0 * x)
    >>> double(tf.constant([1.0, 2.0])).numpy().tolist()
    [2.0, 4.0]
    """
    return tf.function(function, jit_compile=True, autograph=False, reduce_retracing=True)


@xla_fused
def _attention_probabilities(scores, attention_bias, scale):
    probabilities = tf.nn.softmax(tf.cast(scores, tf.float32) * scale + attention_bias, axis=-1)
    return tf.cast(probabilities, scores.dtype)


def attention_probabilities(scores, attention_bias, scale):
    """`softmax(scores · scale + attention_bias)` over the last axis in float32, returned in the scores' dtype.

    `scores` are the raw query-key products in the compute dtype, `attention_bias` float32 (0 or -10000),
    broadcast against them. With a power-of-two `scale` (1/8 for 64-dimensional heads) scaling before or after
    the cast to float32 gives the same numbers.

    Example:
    >>> probabilities = attention_probabilities(tf.constant([[2.0, 2.0, 9.0]]), tf.constant([[0.0, 0.0, -10000.0]]), 0.5)
    >>> probabilities.numpy().tolist()
    [[0.5, 0.5, 0.0]]
    """
    return _attention_probabilities(scores, tf.cast(attention_bias, tf.float32), float(scale))
