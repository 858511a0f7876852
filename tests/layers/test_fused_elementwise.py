"""albert_tf/layers/fused_elementwise.py: the XLA-fused attention probabilities, against the unfused formula."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.fused_elementwise import attention_probabilities


def _operands(dtype):
    rng = np.random.default_rng(0)
    scores = tf.cast(tf.constant(rng.normal(size=(2, 3, 4, 5)) * 8.0, tf.float32), dtype)
    mask = np.ones((2, 1, 1, 5), np.float32)
    mask[0, ..., 3:] = 0.0
    return scores, tf.constant((1.0 - mask) * -10000.0)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_probabilities_and_gradient_are_the_unfused_formulas(jit_compile):
    scores, bias = _operands(tf.float32)
    weights = tf.constant(np.random.default_rng(1).normal(size=scores.shape), tf.float32)

    def value_and_gradient(probabilities_fn):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            probabilities = probabilities_fn(scores, bias)
            loss = tf.reduce_sum(probabilities * weights)
        return probabilities, tape.gradient(loss, scores)

    fused = tf.function(lambda: value_and_gradient(lambda s, b: attention_probabilities(s, b, 0.125)),
                        jit_compile=jit_compile)()
    plain = value_and_gradient(lambda s, b: tf.nn.softmax(s * 0.125 + b, axis=-1))
    for got, expected in zip(fused, plain):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    assert float(tf.reduce_max(fused[0][0, ..., 3:])) == 0.0


def test_bfloat16_scores_give_bfloat16_probabilities_computed_in_float32():
    scores, bias = _operands(tf.bfloat16)
    probabilities = attention_probabilities(scores, bias, 0.125)
    assert probabilities.dtype == tf.bfloat16
    expected = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32) * 0.125 + bias, axis=-1), tf.bfloat16)
    np.testing.assert_allclose(tf.cast(probabilities, tf.float32), tf.cast(expected, tf.float32), atol=4e-3)


def _gradient_graph(dtype):
    scores, bias = _operands(dtype)

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = tf.reduce_sum(tf.cast(attention_probabilities(scores, bias, 0.125), tf.float32))
        return tape.gradient(loss, scores)

    return gradient.get_concrete_function().graph


@pytest.mark.parametrize("dtype, kept", [(tf.float32, 1), (tf.bfloat16, 2)])
def test_the_forward_pass_hands_the_gradient_only_the_float32_softmax(dtype, kept):
    # The fused function's own gradient would take the scores and, in float32, the probabilities twice.
    calls = [op for op in _gradient_graph(dtype).get_operations() if op.type in ("PartitionedCall",
                                                                               "StatefulPartitionedCall")]
    forward, backward = calls
    assert len(forward.outputs) == kept  # the probabilities (in the scores' dtype) and, below float32, the softmax
    assert forward.outputs[0].dtype == tf.float32 and backward.outputs[0].dtype == dtype


def test_the_bfloat16_gradient_is_softmaxs_from_the_float32_probabilities():
    scores, bias = _operands(tf.bfloat16)
    upstream = tf.constant(np.random.default_rng(2).normal(size=scores.shape), tf.bfloat16)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        probabilities = attention_probabilities(scores, bias, 0.125)
    gradient = tape.gradient(probabilities, scores, output_gradients=upstream)
    softmax = tf.nn.softmax(tf.cast(scores, tf.float32) * 0.125 + bias, axis=-1)
    upstream32 = tf.cast(upstream, tf.float32)
    expected = (upstream32 - tf.reduce_sum(upstream32 * softmax, -1, keepdims=True)) * softmax * 0.125
    assert gradient.dtype == tf.bfloat16
    # Within a bfloat16 rounding or two: XLA may contract the float32 products differently.
    np.testing.assert_allclose(tf.cast(gradient, tf.float32), expected, rtol=8e-3, atol=1e-6)
