"""albert_tf/layers/layer_normalization.py: the fused LayerNorm and its gradient, against Keras's LayerNormalization."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.layer_normalization import AlbertLayerNormalization, layer_normalization


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


def test_the_gradient_keeps_the_inputs_and_two_numbers_a_row():
    inputs = _inputs()
    gamma, beta = tf.Variable(tf.ones([8])), tf.Variable(tf.zeros([8]))

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = layer_normalization(inputs, gamma, beta, 1e-12)
        return tape.gradient(outputs, [inputs, gamma, beta])

    forward, _ = [op for op in gradient.get_concrete_function().graph.get_operations()
                  if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
    assert [output.shape.as_list() for output in forward.outputs] == [[2, 5, 8], [2, 5, 1], [2, 5, 1]]


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
