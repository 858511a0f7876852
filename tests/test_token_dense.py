"""TokenDense and add_bias: Dense's outputs and gradients, with the bias gradient summed by a matrix product."""
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.token_dense import TokenDense, add_bias, sum_over_leading_axes


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


def _outputs_and_gradients(layer, inputs, weights):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs)
        loss = tf.reduce_sum(outputs * weights)
    return [outputs] + tape.gradient(loss, [inputs, layer.kernel, layer.bias])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_outputs_and_gradients_are_those_of_dense(jit_compile):
    rng = np.random.default_rng(2)
    inputs = tf.constant(rng.normal(size=(2, 5, 6)), tf.float32)
    weights = tf.constant(rng.normal(size=(2, 5, 4)), tf.float32)
    token_dense = TokenDense(4, activation="tanh", name="query")
    dense = keras.layers.Dense(4, activation="tanh", name="query")
    token_dense.build(inputs.shape)
    dense.build(inputs.shape)
    dense.set_weights([value + 0.1 * rng.normal(size=value.shape) for value in dense.get_weights()])
    token_dense.set_weights(dense.get_weights())
    got = tf.function(lambda x, w: _outputs_and_gradients(token_dense, x, w), jit_compile=jit_compile)(inputs, weights)
    for got_value, expected in zip(got, _outputs_and_gradients(dense, inputs, weights)):
        np.testing.assert_allclose(got_value, expected, rtol=1e-5, atol=1e-6)


def test_config_and_weight_names_are_those_of_dense():
    layer = TokenDense(3, use_bias=False, name="dense")
    restored = TokenDense.from_config(layer.get_config())
    restored.build((None, 2))
    assert restored.get_config() == layer.get_config()
    assert [weight.path for weight in restored.weights] == ["dense/kernel"]
    np.testing.assert_allclose(restored(tf.ones([1, 2])), tf.ones([1, 2]) @ restored.kernel)


def _optimized_bias_gradient_hlo(bias_add):
    inputs, bias, kernel = tf.ones([8, 128, 64]), tf.zeros([64]), tf.ones([64, 16])

    @tf.function(jit_compile=True)
    def bias_gradient(inputs, bias):
        with tf.GradientTape() as tape:
            tape.watch(bias)
            loss = tf.reduce_sum(tf.tensordot(tf.sin(bias_add(inputs, bias)), kernel, axes=1))
        return tape.gradient(loss, bias)

    return bias_gradient.experimental_get_compiler_ir(inputs, bias)(stage="optimized_hlo")


def test_xla_sums_the_bias_gradient_with_a_dot_not_a_reduce_window():
    """Summed by autodiff of `inputs + bias` (tf.reduce_sum over the leading axes), XLA:CPU emits a
    reduce-window (strided partial sums); the reason for add_bias is that its optimized gradient has none."""
    assert re.search(r"reduce-window\(", _optimized_bias_gradient_hlo(lambda inputs, bias: inputs + bias))
    hlo = _optimized_bias_gradient_hlo(add_bias)
    assert not re.search(r"reduce-window\(", hlo)
    assert re.search(r"= f32\[2,64\]\S* dot\(", hlo)
