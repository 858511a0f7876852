"""activated_projection: the feed-forward output projection whose gradient recomputes the activation."""
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.activations import gelu
from albert_tf.layers.feed_forward import activated_projection, input_projection


def _operands():
    rng = np.random.default_rng(0)
    return (tf.constant(rng.normal(size=(2, 5, 6)), tf.float32), tf.constant(rng.normal(size=(6, 3)), tf.float32),
            tf.constant(rng.normal(size=(3,)), tf.float32), tf.constant(rng.normal(size=(2, 5, 3)), tf.float32))


def _value_and_gradients(project, pre_activation, kernel, bias, weights):
    with tf.GradientTape() as tape:
        tape.watch([pre_activation, kernel, bias])
        loss = tf.reduce_sum(project(pre_activation, kernel, bias) * weights)
    return [loss] + tape.gradient(loss, [pre_activation, kernel, bias])


@pytest.mark.parametrize("activation", [gelu, tf.nn.relu, tf.tanh])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_output_and_gradients_are_those_of_the_plain_formula(activation, jit_compile):
    recomputing = tf.function(
        lambda *args: _value_and_gradients(lambda x, w, b: activated_projection(x, w, b, activation), *args),
        jit_compile=jit_compile)
    plain = _value_and_gradients(lambda x, w, b: tf.tensordot(activation(x), w, axes=1) + b, *_operands())
    for got, expected in zip(recomputing(*_operands()), plain):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_xla_recomputes_the_activation_instead_of_keeping_it():
    """XLA would merge the backward pass's activation with the forward pass's (common subexpressions) and
    keep it after all. The optimized gradient computes tanh twice: the forward GELU, and the backward pass's
    recomputation (which gives GELU and its derivative from one tanh); merged, there would be one."""

    @tf.function(jit_compile=True)
    def gradients(pre_activation, kernel, bias, weights):
        return _value_and_gradients(lambda x, w, b: activated_projection(x, w, b, gelu),
                                    pre_activation, kernel, bias, weights)

    hlo = gradients.experimental_get_compiler_ir(*_operands())(stage="optimized_hlo")
    assert len(re.findall(r"= \S+ tanh\(", hlo)) == 2


def _gradient_graph_ops(jit_compile):
    gradients = tf.function(lambda *args: _value_and_gradients(
        lambda x, w, b: activated_projection(x, w, b, gelu), *args), jit_compile=jit_compile)
    graph = gradients.get_concrete_function(*_operands()).graph
    return [op for op in graph.get_operations()]


def test_recomputation_waits_for_the_upstream_gradient_without_a_copy_on_tensorflows_kernels():
    """Without XLA the recomputation calls another function than the forward pass, so nothing can merge them:
    a control dependency on the upstream gradient orders it, where the barrier and the added zero would be two
    passes over [tokens, intermediate]. Traced for XLA the barrier stays (the HLO test above)."""
    plain_ops = _gradient_graph_ops(jit_compile=False)
    assert not [op for op in plain_ops if op.type == "XlaOptimizationBarrier"]
    ordered = [op for op in plain_ops if op.type == "Identity" and op.control_inputs]
    assert ordered, [op.type for op in plain_ops]
    assert [op for op in _gradient_graph_ops(jit_compile=True) if op.type == "XlaOptimizationBarrier"]


def _input_projection_operands(dtype):
    rng = np.random.default_rng(1)
    return [tf.cast(tf.constant(rng.normal(size=shape), tf.float32), dtype)
            for shape in ((2, 5, 6), (6, 4), (4,), (2, 5, 4))]


@pytest.mark.parametrize("dtype, tolerance", [(tf.float32, 1e-5), (tf.bfloat16, 2e-2)])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_input_projection_is_keras_dense_and_its_gradient(dtype, tolerance, jit_compile):
    operands = _input_projection_operands(dtype)
    got = tf.function(lambda *args: _value_and_gradients(input_projection, *args), jit_compile=jit_compile)(*operands)
    expected = _value_and_gradients(lambda x, w, b: tf.tensordot(x, w, axes=1) + b, *operands)
    for got_value, expected_value in zip(got, expected):
        assert got_value.dtype == expected_value.dtype
        np.testing.assert_allclose(tf.cast(got_value, tf.float32), tf.cast(expected_value, tf.float32),
                                   rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype, copies", [(tf.float32, 1), (tf.bfloat16, 0)])
def test_the_float32_input_gradient_multiplies_by_a_transposed_copy(dtype, copies):
    operands = _input_projection_operands(dtype)
    graph = tf.function(lambda *args: _value_and_gradients(input_projection, *args)).get_concrete_function(
        *operands).graph
    calls = [op for op in graph.get_operations() if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
    assert len(calls) == copies
    if copies:
        (product,) = calls[0].outputs[0].consumers()
        assert product.type == "MatMul" and not product.get_attr("transpose_b")
        # Depending on the kernel alone, the copy would run at the step's start and every depth's copy
        # would be held through the forward pass.
        assert calls[0].control_inputs, "the transposed copy does not wait for the upstream gradient"
        upstream_gradient = product.inputs[0].op
        assert upstream_gradient.type == "Reshape"
        assert calls[0].control_inputs[0] in [upstream_gradient.inputs[0].op]
