"""The hidden activations, and GELU's hand-written gradient."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.activations import activation_with_derivative, gelu, get_activation


def _tanh_gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def test_gelu_is_the_original_tanh_formula():
    x = tf.constant(np.linspace(-8.0, 8.0, 401), tf.float64)
    # tf.nn.gelu writes sqrt(2/pi) to 10 digits.
    np.testing.assert_allclose(gelu(x), _tanh_gelu(x), rtol=0, atol=1e-8)


@pytest.mark.parametrize("dtype, tolerance", [(tf.float64, 1e-8), (tf.float32, 1e-5)])
def test_gelu_gradient_equals_autodiff_of_the_formula(dtype, tolerance):
    x = tf.constant(np.linspace(-8.0, 8.0, 401), dtype)
    upstream = tf.constant(np.random.default_rng(0).normal(size=401), dtype)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = gelu(x) * upstream
        reference = _tanh_gelu(x) * upstream
    np.testing.assert_allclose(tape.gradient(ours, x), tape.gradient(reference, x), rtol=tolerance,
                               atol=tolerance)


def test_gelu_keeps_bfloat16_and_works_under_xla():
    x = tf.constant(np.linspace(-3.0, 3.0, 13), tf.bfloat16)

    @tf.function(jit_compile=True)
    def value_and_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gelu(x)
            total = tf.reduce_sum(y)
        return y, tape.gradient(total, x)

    y, gradient = value_and_gradient(x)
    assert y.dtype == gradient.dtype == tf.bfloat16
    x64 = tf.cast(x, tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x64)
        expected = _tanh_gelu(x64)
    np.testing.assert_allclose(tf.cast(gradient, tf.float64), tape.gradient(expected, x64), atol=0.02)


def test_unknown_activation_names_the_value():
    with pytest.raises(ValueError, match="hidden_act='swish' is not supported"):
        get_activation("swish")


@pytest.mark.parametrize("name", ["gelu", "relu", "tanh", "linear"])
def test_value_and_derivative_are_the_activation_and_its_gradient(name):
    activation = get_activation(name)
    fused = activation_with_derivative(activation)
    x = tf.constant(np.linspace(-5.0, 5.0, 41), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        expected = activation(x)
    expected_derivative = tape.gradient(expected, x)
    value, derivative = fused.value_and_derivative(x)
    np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fused.value(x), value, rtol=0, atol=0)
    np.testing.assert_allclose(derivative, expected_derivative, rtol=1e-5, atol=1e-5)


def test_an_unknown_function_has_no_fused_derivative():
    assert activation_with_derivative(tf.nn.softplus) is None


@pytest.mark.parametrize("name", ["gelu", "relu", "tanh", "linear"])
def test_value_and_input_gradient_is_upstream_times_the_derivative(name):
    fused = activation_with_derivative(get_activation(name))
    x = tf.constant(np.linspace(-5.0, 5.0, 41), tf.float32)
    upstream = tf.constant(np.linspace(2.0, -3.0, 41), tf.float32)
    value, derivative = fused.value_and_derivative(x)
    got_value, input_gradient = fused.value_and_input_gradient(x, upstream)
    np.testing.assert_allclose(got_value, value, rtol=0, atol=0)
    np.testing.assert_allclose(input_gradient, upstream * derivative, rtol=1e-6, atol=1e-6)


def test_fused_gelu_computes_bfloat16_in_float32_and_rounds_once():
    """XLA:CPU rounds a bfloat16 chain after every operation (and is 4x slower so); the fused GELU computes the
    float32 formula and rounds its results once."""
    fused = activation_with_derivative(gelu)
    x32 = tf.constant(np.linspace(-6.0, 6.0, 301), tf.float32)
    x = tf.cast(x32, tf.bfloat16)
    upstream = tf.cast(tf.constant(np.linspace(1.5, -2.5, 301), tf.float32), tf.bfloat16)
    value32, derivative32 = fused.value_and_derivative(tf.cast(x, tf.float32))
    value, input_gradient = fused.value_and_input_gradient(x, upstream)
    assert value.dtype == input_gradient.dtype == tf.bfloat16
    np.testing.assert_array_equal(fused.value(x).numpy(), tf.cast(value32, tf.bfloat16).numpy())
    np.testing.assert_array_equal(value.numpy(), tf.cast(value32, tf.bfloat16).numpy())
    np.testing.assert_array_equal(
        input_gradient.numpy(), tf.cast(tf.cast(upstream, tf.float32) * derivative32, tf.bfloat16).numpy())
