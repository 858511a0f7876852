"""activated_projection: the feed-forward output projection whose gradient recomputes the activation."""
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.activations import gelu
from albert_tf.feed_forward import activated_projection, sum_over_leading_axes


def _operands(batch=2, seq=5, intermediate=6, hidden=3):
    rng = np.random.default_rng(0)
    shapes = [(batch, seq, intermediate), (intermediate,), (intermediate, hidden), (hidden,), (batch, seq, hidden)]
    return [tf.constant(rng.normal(size=shape), tf.float32) for shape in shapes]


def _value_and_gradients(project, unbiased_pre_activation, pre_activation_bias, kernel, bias, weights):
    inputs = [unbiased_pre_activation, pre_activation_bias, kernel, bias]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        loss = tf.reduce_sum(project(*inputs) * weights)
    return [loss] + tape.gradient(loss, inputs)


def _plain(activation):
    return lambda x, x_bias, w, b: tf.tensordot(activation(x + x_bias), w, axes=1) + b


def _projection(activation):
    return lambda x, x_bias, w, b: activated_projection(x, x_bias, w, b, activation)


@pytest.mark.parametrize("activation", [gelu, tf.nn.relu, tf.tanh])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_output_and_gradients_are_those_of_the_plain_formula(activation, jit_compile):
    recomputing = tf.function(lambda *args: _value_and_gradients(_projection(activation), *args),
                              jit_compile=jit_compile)
    plain = _value_and_gradients(_plain(activation), *_operands())
    for got, expected in zip(recomputing(*_operands()), plain):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def _optimized_gradient_hlo(project, *operands):
    gradients = tf.function(lambda *args: _value_and_gradients(project, *args), jit_compile=True)
    return gradients.experimental_get_compiler_ir(*operands)(stage="optimized_hlo")


def test_xla_recomputes_the_activation_instead_of_keeping_it():
    """XLA would merge the backward pass's activation with the forward pass's (common subexpressions) and
    keep it after all. The optimized gradient computes tanh three times: the forward GELU, its recomputation,
    and GELU's own gradient (which recomputes tanh its own way); merged, there would be two."""

    hlo = _optimized_gradient_hlo(_projection(gelu), *_operands())
    assert len(re.findall(r"= \S+ tanh\(", hlo)) == 3


def test_xla_does_not_transpose_the_recomputed_activation():
    """W2's kernel gradient contracts the tokens of the recomputed activation in place (a matmul with
    transpose_a); a tensordot would write the [10 tokens, 6 features] activation out transposed, as [6,10]."""

    hlo = _optimized_gradient_hlo(_projection(gelu), *_operands())
    assert re.search(r"= f32\[6,3\]\S* dot\(", hlo)
    assert "f32[6,10]" not in hlo


def test_xla_sums_the_bias_gradients_with_dots_not_reduce_windows():
    """Over 8 x 128 tokens, autodiff's bias sums (tf.reduce_sum over the leading axes) become reduce-windows on
    XLA:CPU, strided partial sums; activated_projection's two bias gradients are [2, tokens] x [tokens, n] dots."""
    operands = _operands(batch=8, seq=128, intermediate=32, hidden=16)

    def gradient_reduce_windows(hlo):
        return re.findall(r"reduce-window\([^\n]*to_apply=%gradient_tape", hlo)

    assert len(gradient_reduce_windows(_optimized_gradient_hlo(_plain(gelu), *operands))) == 2
    hlo = _optimized_gradient_hlo(_projection(gelu), *operands)
    assert not gradient_reduce_windows(hlo)
    assert re.search(r"= f32\[2,32\]\S* dot\(", hlo) and re.search(r"= f32\[2,16\]\S* dot\(", hlo)


@pytest.mark.parametrize("shape", [(7,), (5, 3), (2, 5, 3), (2, 3, 4, 6)])
def test_sum_over_leading_axes_is_reduce_sum(shape):
    tensor = tf.constant(np.random.default_rng(0).normal(size=shape), tf.float32)
    expected = tf.reduce_sum(tensor, axis=list(range(len(shape) - 1))) if len(shape) > 1 else tensor
    np.testing.assert_allclose(sum_over_leading_axes(tensor), expected, rtol=1e-5, atol=1e-5)


def test_sum_over_leading_axes_takes_unknown_leading_dimensions():
    summed = tf.function(sum_over_leading_axes, input_signature=[tf.TensorSpec([None, None, 3], tf.float32)])
    np.testing.assert_allclose(summed(tf.ones([4, 5, 3])), [20.0, 20.0, 20.0])
    np.testing.assert_allclose(summed(tf.ones([1, 2, 3])), [2.0, 2.0, 2.0])


def test_sum_over_leading_axes_keeps_bfloat16_within_its_rounding():
    tensor = tf.constant(np.random.default_rng(1).uniform(size=(4, 64, 8)), tf.float32)
    summed = sum_over_leading_axes(tf.cast(tensor, tf.bfloat16))
    assert summed.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(summed, tf.float32), tf.reduce_sum(tensor, axis=[0, 1]), rtol=1e-2)
