"""LAMB / AdamW against a numpy transcription of the original equations, exclusions, and the schedule."""
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import optimization

EXCLUDED = ("LayerNorm", "layer_norm", "bias")


def _scoped_variable(path, value):
    """A keras.Variable whose path is `path`, as a layer of that name would create it."""
    *scopes, name = path.split("/")
    if not scopes:
        return keras.Variable(value, name=name)
    with keras.name_scope(scopes[0]):
        return _scoped_variable("/".join(scopes[1:] + [name]), value)


def _make_variables(rng):
    values = {
        "albert_encoder/dense/kernel": rng.normal(size=(4, 3)),
        "albert_encoder/dense/bias": rng.normal(size=(3,)),
        "albert_encoder/embeddings/LayerNorm/gamma": rng.normal(size=(3,)),
        "mlm_head/layer_norm/beta": rng.normal(size=(3,)),
        "mlm_head/output_bias": rng.normal(size=(5,)),
        "classifier/zero_kernel": np.zeros((3, 2)),
    }
    return {path: _scoped_variable(path, value.astype("float32")) for path, value in values.items()}


def _reference_step(weights, grads, moments, learning_rate, use_lamb, weight_decay_rate=0.01):
    """The original apply_gradients (optimization.py / lamb_optimizer.py) in float64 numpy."""
    beta_1, beta_2, epsilon = 0.9, 0.999, 1e-6
    for path in weights:
        w, g = weights[path], grads[path]
        m, v = moments[path]
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        moments[path] = (m, v)
        update = m / (np.sqrt(v) + epsilon)
        excluded = any(re.search(pattern, path) for pattern in EXCLUDED)
        if not excluded:
            update = update + weight_decay_rate * w
        ratio = 1.0
        if use_lamb and not excluded:
            w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        weights[path] = w - ratio * learning_rate * update


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_several_steps_match_the_original_equations(name):
    rng = np.random.default_rng(0)
    variables = _make_variables(rng)
    optimizer = optimization.create_optimizer(name, init_lr=0.01, num_train_steps=10, num_warmup_steps=2)
    schedule = optimization.WarmupPolynomialDecay(0.01, num_train_steps=10, num_warmup_steps=2)
    weights = {path: v.numpy().astype("float64") for path, v in variables.items()}
    moments = {path: (np.zeros_like(w), np.zeros_like(w)) for path, w in weights.items()}

    apply = tf.function(lambda grads: optimizer.apply(grads, list(variables.values())))
    for step in range(5):
        grads = {path: rng.normal(size=w.shape) for path, w in weights.items()}
        grads["mlm_head/output_bias"][1:3] = 0.0  # given below as a sparse embedding-style gradient
        tensors = [tf.constant(g, tf.float32) for g in grads.values()]
        sparse_rows = [0, 3, 4]
        tensors[4] = tf.IndexedSlices(tf.gather(tensors[4], sparse_rows), tf.constant(sparse_rows), tf.constant([5]))
        apply(tensors)
        _reference_step(weights, grads, moments, float(schedule(step)), use_lamb=name == "lamb")

    assert int(optimizer.iterations.numpy()) == 5
    for path, variable in variables.items():
        np.testing.assert_allclose(variable.numpy(), weights[path], rtol=0, atol=1e-6, err_msg=path)
    # The zero weights moved, so that variable's trust ratio of 1 (||w|| = 0) was exercised.
    assert np.abs(variables["classifier/zero_kernel"].numpy()).max() > 1e-3


def test_exclusions_are_matched_against_the_variable_path():
    variables = _make_variables(np.random.default_rng(1))
    lamb = optimization.LAMBOptimizer(learning_rate=0.5, weight_decay_rate=0.1, exclude_from_weight_decay=EXCLUDED,
                                      exclude_from_layer_adaptation=["dense/kernel"])
    before = {path: v.numpy() for path, v in variables.items()}
    # Zero gradients isolate the decay: the update is weight_decay_rate * w where decayed, else 0.
    lamb.apply([tf.zeros_like(v) for v in variables.values()], list(variables.values()))

    decayed = {path for path in variables if lamb.uses_weight_decay(path)}
    adapted = {path for path in variables if lamb.uses_layer_adaptation(path)}
    assert decayed == {"albert_encoder/dense/kernel", "classifier/zero_kernel"}
    assert adapted == {"albert_encoder/embeddings/LayerNorm/gamma", "mlm_head/layer_norm/beta",
                       "albert_encoder/dense/bias", "mlm_head/output_bias", "classifier/zero_kernel"}
    # dense/kernel: decayed, not adapted: w - lr * wd * w.
    np.testing.assert_allclose(variables["albert_encoder/dense/kernel"].numpy(),
                               before["albert_encoder/dense/kernel"] * (1 - 0.5 * 0.1), rtol=1e-6)
    # Excluded from decay with a zero gradient: the update is exactly 0, whatever the ratio.
    for path in ("albert_encoder/dense/bias", "albert_encoder/embeddings/LayerNorm/gamma", "mlm_head/output_bias"):
        np.testing.assert_array_equal(variables[path].numpy(), before[path])

    # Without exclude_from_layer_adaptation, the decay exclusions are also the adaptation exclusions; a decayed,
    # adapted variable with zero gradient has ratio ||w|| / ||wd * w|| = 1 / wd, so it moves by lr * w.
    variables = _make_variables(np.random.default_rng(1))
    default_lamb = optimization.LAMBOptimizer(learning_rate=0.5, weight_decay_rate=0.1,
                                              exclude_from_weight_decay=EXCLUDED)
    default_lamb.apply([tf.zeros_like(v) for v in variables.values()], list(variables.values()))
    assert default_lamb.exclude_from_layer_adaptation == list(EXCLUDED)
    np.testing.assert_allclose(variables["albert_encoder/dense/kernel"].numpy(),
                               before["albert_encoder/dense/kernel"] * (1 - 0.5), rtol=1e-6)


def test_schedule_warmup_discontinuity_and_decay():
    schedule = optimization.WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    values = {step: float(schedule(step)) for step in (0, 1, 9, 10, 50, 100, 150)}
    np.testing.assert_allclose(
        [values[s] for s in (0, 1, 9, 10, 50, 100, 150)],
        [0.0, 1e-4, 9e-4, 1e-3 * 0.9, 1e-3 * 0.5, 0.0, 0.0], rtol=1e-6, atol=1e-12)
    # The original's jump at the end of warmup: 9e-4 at step 9, then 9e-4 again at step 10 since decay
    # counted from 0; with a longer warmup the jump is visible downwards.
    long_warmup = optimization.WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=50)
    assert float(long_warmup(49)) == pytest.approx(0.98e-3, rel=1e-6)
    assert float(long_warmup(50)) == pytest.approx(0.5e-3, rel=1e-6)

    squared = optimization.WarmupPolynomialDecay(1e-3, num_train_steps=100, power=2.0)
    assert float(squared(0)) == pytest.approx(1e-3, rel=1e-6)
    assert float(squared(50)) == pytest.approx(0.25e-3, rel=1e-6)

    late = optimization.WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10, start_warmup_step=40)
    assert float(late(40)) == pytest.approx(0.0, abs=1e-12)
    assert float(late(45)) == pytest.approx(0.5e-3, rel=1e-6)
    assert float(late(50)) == pytest.approx(0.5e-3, rel=1e-6)  # decayed value: 1e-3 * (1 - 50/100)


def test_config_round_trip_and_unknown_name():
    optimizer = optimization.create_optimizer("lamb", init_lr=2e-3, num_train_steps=1000, num_warmup_steps=100,
                                              start_warmup_step=5, poly_power=2.0, weight_decay_rate=0.02)
    config = optimizer.get_config()
    restored = optimization.LAMBOptimizer.from_config(optimizer.get_config())
    assert restored.get_config() == config
    assert isinstance(restored.learning_rate, tf.Tensor)  # evaluated from the schedule at iterations 0
    assert restored._learning_rate.get_config() == {
        "initial_learning_rate": 2e-3, "num_train_steps": 1000, "num_warmup_steps": 100,
        "start_warmup_step": 5, "power": 2.0}
    serialized = keras.saving.serialize_keras_object(optimizer)
    assert type(keras.saving.deserialize_keras_object(serialized)) is optimization.LAMBOptimizer

    with pytest.raises(ValueError, match="Unknown optimizer 'sgd'; allowed: lamb, adamw"):
        optimization.create_optimizer("sgd", init_lr=1e-3, num_train_steps=10, num_warmup_steps=0)
    with pytest.raises(ValueError, match="global_clipnorm"):
        optimization.AdamWeightDecayOptimizer(global_clipnorm=1.0)


def test_jit_compiled_loss_scaled_update_equals_the_plain_update():
    rng = np.random.default_rng(2)
    grads = [tf.constant(rng.normal(size=(4, 3)), tf.float32), tf.constant(rng.normal(size=(3,)), tf.float32)]
    initial = [rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=(3,)).astype("float32")]

    plain_variables = [_scoped_variable("dense/kernel", initial[0]), _scoped_variable("dense/bias", initial[1])]
    plain = optimization.LAMBOptimizer(learning_rate=0.01)
    plain.apply(grads, plain_variables)

    scaled_variables = [_scoped_variable("dense/kernel", initial[0]), _scoped_variable("dense/bias", initial[1])]
    scaled = keras.optimizers.LossScaleOptimizer(optimization.LAMBOptimizer(learning_rate=0.01))
    scaled.build(scaled_variables)
    scale = float(scaled.dynamic_scale.numpy())
    tf.function(lambda g: scaled.apply(g, scaled_variables), jit_compile=True)([g * scale for g in grads])

    for plain_variable, scaled_variable in zip(plain_variables, scaled_variables):
        np.testing.assert_allclose(scaled_variable.numpy(), plain_variable.numpy(), rtol=1e-6)
    assert int(scaled.iterations.numpy()) == 1


def test_rejects_non_float32_variables():
    variable = keras.Variable(np.ones(3), dtype="bfloat16", name="kernel")
    with pytest.raises(ValueError, match=r"kernel \(bfloat16\)"):
        optimization.AdamWeightDecayOptimizer().build([variable])


def test_constructor_defaults_are_the_original_classes():
    # The original AdamWeightDecayOptimizer and LAMBOptimizer default to weight_decay_rate=0.0 and no exclusions;
    # only its create_optimizer passes 0.01 and the LayerNorm/bias exclusions.
    variables = _make_variables(np.random.default_rng(3))
    for optimizer_class in (optimization.AdamWeightDecayOptimizer, optimization.LAMBOptimizer):
        optimizer = optimizer_class(learning_rate=0.5)
        assert optimizer.weight_decay_rate == 0.0
        assert optimizer.exclude_from_weight_decay == []
        assert not any(optimizer.uses_weight_decay(path) for path in variables)
    lamb = optimization.LAMBOptimizer(learning_rate=0.5, weight_decay_rate=0.1)
    assert all(lamb.uses_weight_decay(path) for path in variables)
    assert all(lamb.uses_layer_adaptation(path) for path in variables)

    created = optimization.create_optimizer("adamw", init_lr=1e-3, num_train_steps=10, num_warmup_steps=0)
    assert created.weight_decay_rate == 0.01
    assert created.exclude_from_weight_decay == list(EXCLUDED)


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_each_variables_update_is_one_xla_compiled_call(name):
    """TensorFlow's kernels made about fifteen passes over each variable; the fused call makes one or two."""
    variables = list(_make_variables(np.random.default_rng(0)).values())
    optimizer = optimization.create_optimizer(name, init_lr=0.01, num_train_steps=10, num_warmup_steps=2)
    optimizer.build(variables)
    grads = [tf.ones_like(variable) for variable in variables]
    graph = tf.function(lambda: optimizer.apply(grads, variables)).get_concrete_function().graph
    op_types = [op.type for op in graph.get_operations()]
    compiled_calls = [op for op in graph.get_operations() if op.type in ("PartitionedCall", "StatefulPartitionedCall")
                      and op.get_attr("_XlaMustCompile")]
    assert len(compiled_calls) == len(variables)
    assert "Sqrt" not in op_types and "Square" not in op_types
