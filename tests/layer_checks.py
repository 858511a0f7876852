"""check_layer / check_model: what every layer in albert_tf/layers and every model in albert_tf/models must do,
in the spirit of keras-hub's TestCase.run_layer_test and run_model_saving_test.

A case is a class, its constructor arguments and `make_inputs(length) -> (args, kwargs)`, the call's inputs with
one axis (the sequence, or the batch where there is none) of size `length`. The checks, each on the same weights:
- get_config / from_config round trip, and a Keras serialization round trip (serialize_keras_object /
  deserialize_keras_object): the same config and outputs equal to the original's;
- variable lengths: two lengths through one instance and one traced tf.function whose signature leaves the
  varying axes unknown, equal to eager at each length within GRAPH_TOLERANCE;
- jit_compile=True output equal to eager within JIT_TOLERANCE;
- a mixed_bfloat16 instance close to float32: float outputs within BFLOAT16_TOLERANCE of each output's scale
  (its largest magnitude, at least 1); integer outputs (top-k indices, which may swap near-ties) by shape and dtype;
- a tf.train.Checkpoint round trip: save, a new instance (other initial weights), restore, equal outputs.
"""
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

LENGTHS = (5, 8)
# A traced graph, and XLA more so, may pick other kernels (blockings, fusions) than eager for the same float32 math:
# differences of a few ulps of outputs of magnitude up to ~10. A wrong op is off by far more.
GRAPH_TOLERANCE = 1e-5
JIT_TOLERANCE = 1e-5
# bfloat16 keeps 8 significant bits (relative rounding 2^-8); a few blocks of matmuls, softmax and LayerNorm
# compound it to a few percent of the output's scale. A wrong cast or a float32 op in bfloat16 is off by O(1).
BFLOAT16_TOLERANCE = 0.05
MASKED_MAGNITUDE = 1e20


def check_layer(layer_class, init_kwargs, make_inputs):
    """Runs every check on `layer_class(**init_kwargs)` called on `make_inputs(length)`."""
    layer = layer_class(**init_kwargs)
    inputs = make_inputs(LENGTHS[0])
    expected = _call(layer, inputs)
    _check_config_round_trip(layer, inputs, expected)
    _check_serialization_round_trip(layer, inputs, expected)
    _check_variable_lengths(layer, make_inputs)
    _check_jit_compile(layer, inputs, expected)
    _check_mixed_bfloat16(layer, inputs, expected)
    _check_checkpoint_round_trip(layer, inputs, expected)


def check_model(model_class, init_kwargs, make_inputs):
    """check_layer's checks for a keras.Model: a model is a layer, and it must pass every one of them."""
    check_layer(model_class, init_kwargs, make_inputs)


def _call(layer, inputs):
    args, kwargs = inputs
    return layer(*args, **kwargs)


def _twin(layer, inputs, config=None):
    """A new instance from `config` (the layer's own by default), built by a call, with the layer's weights."""
    twin = type(layer).from_config(config or layer.get_config())
    _call(twin, inputs)
    twin.set_weights(layer.get_weights())
    return twin


def _flat(outputs):
    return [np.asarray(value) for value in tf.nest.flatten(outputs)]


def _assert_outputs_close(actual, expected, atol, what):
    assert tf.nest.map_structure(lambda _: 0, actual) == tf.nest.map_structure(lambda _: 0, expected), what
    for index, (got, want) in enumerate(zip(_flat(actual), _flat(expected))):
        message = f"{what}: output {index}"
        assert got.shape == want.shape and got.dtype == want.dtype, f"{message}: {got.shape} {got.dtype} " \
                                                                    f"!= {want.shape} {want.dtype}"
        if np.issubdtype(want.dtype, np.integer) or atol == 0:
            np.testing.assert_array_equal(got, want, err_msg=message)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=message)


def _check_config_round_trip(layer, inputs, expected):
    config = layer.get_config()
    twin = _twin(layer, inputs)
    assert twin.get_config() == config
    _assert_outputs_close(_call(twin, inputs), expected, 0, "from_config(get_config())")


def _check_serialization_round_trip(layer, inputs, expected):
    layer_class = type(layer)
    serialized = keras.saving.serialize_keras_object(layer)
    restored = keras.saving.deserialize_keras_object(serialized,
                                                     custom_objects={layer_class.__name__: layer_class})
    assert type(restored) is layer_class
    assert restored.get_config() == layer.get_config()
    _call(restored, inputs)
    restored.set_weights(layer.get_weights())
    _assert_outputs_close(_call(restored, inputs), expected, 0, "deserialize_keras_object(serialize_keras_object())")


def _signature(first, second):
    """TensorSpecs with None on every axis where the two inputs' shapes differ."""
    def spec(a, b):
        shape = [size if size == other else None for size, other in zip(a.shape, b.shape)]
        return tf.TensorSpec(shape, a.dtype)

    return tf.nest.map_structure(spec, first, second)


def _check_variable_lengths(layer, make_inputs):
    all_inputs = [make_inputs(length) for length in LENGTHS]
    signature = _signature(*all_inputs)
    assert signature != tf.nest.map_structure(tf.TensorSpec.from_tensor, all_inputs[0]), \
        "make_inputs must vary an axis with its length"
    traced = tf.function(lambda inputs: _call(layer, inputs), input_signature=[signature])
    for inputs in all_inputs:
        eager = _call(layer, inputs)
        _assert_outputs_close(traced(inputs), eager, GRAPH_TOLERANCE, f"one tf.function for lengths {LENGTHS}")
    assert traced.experimental_get_tracing_count() == 1


def _check_jit_compile(layer, inputs, expected):
    compiled = tf.function(lambda inputs: _call(layer, inputs), jit_compile=True)
    _assert_outputs_close(compiled(inputs), expected, JIT_TOLERANCE, "jit_compile=True")


def _check_mixed_bfloat16(layer, inputs, expected):
    mixed = _twin(layer, inputs, dict(layer.get_config(), dtype="mixed_bfloat16"))
    assert mixed.compute_dtype == "bfloat16" and mixed.variable_dtype == "float32"
    assert all(variable.dtype == "float32" for variable in mixed.weights)
    # Float outputs compare as float32: a layer may hand back bfloat16 under mixed precision.
    outputs = tf.nest.map_structure(lambda value: tf.cast(value, tf.float32) if value.dtype.is_floating else value,
                                    _call(mixed, inputs))
    for index, (got, want) in enumerate(zip(_flat(outputs), _flat(expected))):
        message = f"mixed_bfloat16: output {index}"
        assert got.shape == want.shape and got.dtype == want.dtype, message
        if np.issubdtype(want.dtype, np.integer):
            # Top-k indices may swap near-ties under bfloat16; the log-probabilities beside them are compared.
            continue
        # Masked logits (-1e30) set no scale; rtol covers them.
        unmasked = np.abs(want)[np.abs(want) < MASKED_MAGNITUDE]
        scale = max(1.0, float(unmasked.max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=BFLOAT16_TOLERANCE, atol=BFLOAT16_TOLERANCE * scale,
                                   err_msg=message)


def _check_checkpoint_round_trip(layer, inputs, expected):
    with tempfile.TemporaryDirectory() as directory:
        path = tf.train.Checkpoint(layer=layer).write(os.path.join(directory, "ckpt"))
        fresh = type(layer).from_config(layer.get_config())
        before = _call(fresh, inputs)
        if layer.trainable_weights:
            assert any(not np.array_equal(got, want) for got, want in zip(_flat(before), _flat(expected)))
        tf.train.Checkpoint(layer=fresh).read(path).assert_consumed()
    _assert_outputs_close(_call(fresh, inputs), expected, 0, "tf.train.Checkpoint round trip")
