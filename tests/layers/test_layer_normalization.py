"""albert_tf/layers/layer_normalization.py: the fused LayerNorm and its gradient, against Keras's LayerNormalization."""
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.layer_normalization import (AlbertLayerNormalization, _gradients_from_inputs,
                                                  layer_normalization)


def _inputs(dtype=tf.float32):
    rng = np.random.default_rng(0)
    return tf.cast(tf.constant(rng.normal(size=(2, 5, 8)) * 3.0 + 1.5, tf.float32), dtype)


def _values_and_gradients(layer, inputs, upstream, **call_kwargs):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs, **call_kwargs)
    gradients = tape.gradient(outputs, [inputs, layer.gamma, layer.beta], output_gradients=upstream)
    return [outputs] + gradients


def _layer_pair(dtype_policy):
    rng = np.random.default_rng(1)
    ours = AlbertLayerNormalization(epsilon=1e-12, dtype=dtype_policy)
    reference = keras.layers.LayerNormalization(epsilon=1e-12, dtype=dtype_policy)
    for layer in (ours, reference):
        layer.build((None, None, 8))
    for name in ("gamma", "beta"):
        value = rng.normal(size=8).astype(np.float32)
        getattr(ours, name).assign(value)
        getattr(reference, name).assign(value)
    return ours, reference


@pytest.mark.parametrize("jit_compile", [False, True])
def test_values_and_gradients_are_keras_layer_normalizations(jit_compile):
    ours, reference = _layer_pair("float32")
    inputs = _inputs()
    upstream = tf.constant(np.random.default_rng(2).normal(size=inputs.shape), tf.float32)
    got = tf.function(lambda: _values_and_gradients(ours, inputs, upstream, training=True),
                      jit_compile=jit_compile)()
    expected = _values_and_gradients(reference, inputs, upstream)
    for name, got_value, expected_value in zip(("outputs", "inputs", "gamma", "beta"), got, expected):
        np.testing.assert_allclose(got_value, expected_value, rtol=2e-5, atol=2e-5, err_msg=name)


def test_bfloat16_inputs_are_normalized_in_float32_and_returned_in_bfloat16():
    ours, reference = _layer_pair("mixed_bfloat16")
    inputs = _inputs(tf.bfloat16)
    upstream = tf.cast(tf.constant(np.random.default_rng(3).normal(size=inputs.shape), tf.float32), tf.bfloat16)
    got = _values_and_gradients(ours, inputs, upstream, training=True)
    expected = _values_and_gradients(reference, inputs, upstream)
    assert got[0].dtype == got[1].dtype == tf.bfloat16 and got[2].dtype == got[3].dtype == tf.float32
    for name, got_value, expected_value in zip(("outputs", "inputs", "gamma", "beta"), got, expected):
        np.testing.assert_allclose(tf.cast(got_value, tf.float32), tf.cast(expected_value, tf.float32),
                                   rtol=1e-2, atol=2e-2, err_msg=name)


def _consumers_of_the_inputs(dtype, jit_compile=False):
    gamma, beta = tf.Variable(tf.ones([8])), tf.Variable(tf.zeros([8]))

    @tf.function(jit_compile=jit_compile)
    def gradient(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = layer_normalization(inputs, gamma, beta, 1e-12)
        return tape.gradient(outputs, [inputs, gamma, beta])

    graph = gradient.get_concrete_function(tf.TensorSpec([2, 5, 8], dtype)).graph
    inputs = [op for op in graph.get_operations() if op.type == "Placeholder" and op.outputs[0].dtype == dtype][0]
    return sorted(consumer.type for consumer in inputs.outputs[0].consumers() if consumer.type != "IdentityN")


def test_the_float32_gradient_keeps_the_outputs_instead_of_the_inputs():
    # The forward call and the gather of the (here no) channels whose gamma is too small to divide by.
    assert _consumers_of_the_inputs(tf.float32) == ["GatherV2", "PartitionedCall"]


@pytest.mark.parametrize("dtype, jit_compile", [(tf.bfloat16, False), (tf.float32, True)])
def test_bfloat16_and_xla_gradients_keep_the_inputs(dtype, jit_compile):
    assert _consumers_of_the_inputs(dtype, jit_compile) == ["PartitionedCall", "PartitionedCall"]


def test_channels_whose_gamma_is_too_small_to_divide_by_keep_their_inputs():
    ours, reference = _layer_pair("float32")
    gamma = np.random.default_rng(4).normal(size=8).astype(np.float32)
    beta = np.full(8, 0.5, np.float32)
    gamma[[2, 5]] = [0.0, 1e-6]
    for layer in (ours, reference):
        layer.gamma.assign(gamma)
        layer.beta.assign(beta)
    inputs = _inputs()
    upstream = tf.constant(np.random.default_rng(5).normal(size=inputs.shape), tf.float32)
    got = tf.function(lambda: _values_and_gradients(ours, inputs, upstream, training=True))()
    expected = _values_and_gradients(reference, inputs, upstream)
    for name, got_value, expected_value in zip(("outputs", "inputs", "gamma", "beta"), got, expected):
        np.testing.assert_allclose(got_value, expected_value, rtol=2e-5, atol=2e-5, err_msg=name)
    assert np.all(np.isfinite(got[2]))


def test_the_normalized_inputs_recovered_from_the_outputs_are_those_computed_from_the_inputs():
    rng = np.random.default_rng(6)
    inputs = tf.constant(rng.normal(size=(64, 768)) * 4.0 + 20.0, tf.float32)
    gamma = tf.constant(rng.normal(size=768) * 0.5, tf.float32)
    beta = tf.constant(rng.normal(size=768) * 0.5 * tf.abs(gamma) * 8.0, tf.float32)
    upstream = tf.constant(rng.normal(size=(64, 768)), tf.float32)
    expected = np.asarray(inputs, np.float64)
    mean, std = expected.mean(-1, keepdims=True), expected.std(-1, keepdims=True)
    normalized = (expected - mean) / std
    scaled = np.asarray(upstream, np.float64) * np.asarray(gamma, np.float64)
    input_gradient = (scaled - scaled.mean(-1, keepdims=True)
                      - normalized * (scaled * normalized).mean(-1, keepdims=True)) / std
    with tf.GradientTape() as tape:
        tape.watch([inputs, gamma])
        outputs = layer_normalization(inputs, gamma, beta, 1e-12)
    got_input, got_gamma = tape.gradient(outputs, [inputs, gamma], output_gradients=upstream)
    np.testing.assert_allclose(got_input, input_gradient, rtol=0, atol=2e-6 * np.abs(input_gradient).max())
    gamma_gradient = (np.asarray(upstream, np.float64) * normalized).sum(0)
    np.testing.assert_allclose(got_gamma, gamma_gradient, rtol=0, atol=2e-6 * np.abs(gamma_gradient).max())


def test_inference_runs_kerass_own_ops():
    ours, reference = _layer_pair("float32")
    inputs = _inputs()
    graph = tf.function(lambda: ours(inputs)).get_concrete_function().graph
    assert not [op for op in graph.get_operations() if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
    np.testing.assert_array_equal(ours(inputs), reference(inputs))


@pytest.mark.filterwarnings("ignore:You passed `rms_scaling=True`")
@pytest.mark.parametrize("kwargs", [dict(axis=1), dict(center=False), dict(scale=False), dict(rms_scaling=True)])
def test_other_normalizations_are_refused(kwargs):
    with pytest.raises(ValueError, match="normalizes the last axis"):
        AlbertLayerNormalization(**kwargs)


def test_gamma_and_beta_gradients_are_products_with_ones_not_xlas_slow_row_reductions():
    """XLA:CPU rewrites a sum over the rows into reduce-window partial sums, twice the time of the whole product."""
    inputs, upstream = _inputs(), _inputs() * 0.5 + 1.0
    gamma, mean, reciprocal_std = tf.ones([8]) * 1.5, tf.zeros([2, 5, 1]), tf.ones([2, 5, 1])
    hlo = _gradients_from_inputs.experimental_get_compiler_ir(inputs, gamma, mean, reciprocal_std, upstream)(
        stage="optimized_hlo")
    assert "reduce-window" not in hlo
    assert len(re.findall(r"= f32\[2,8\]\{[0-9,]*\} dot\(", hlo)) == 2
    _, gamma_gradient, beta_gradient = _gradients_from_inputs(inputs, gamma, mean, reciprocal_std, upstream)
    np.testing.assert_allclose(beta_gradient, tf.reduce_sum(upstream, [0, 1]), rtol=1e-6)
    np.testing.assert_allclose(gamma_gradient, tf.reduce_sum(upstream * inputs, [0, 1]), rtol=1e-6)
