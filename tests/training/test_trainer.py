"""The shared training loop on a toy classifier: convergence, accumulation, clipping, precision, resume, eval."""
import contextlib
import glob
import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import bfloat16_support, optimization, train_step
from albert_tf.training import trainer as trainer_module
from albert_tf.training.checkpointing import NonFiniteLossError
from albert_tf.training.metric_names import returns_metrics
from albert_tf.training.trainer import Trainer
from albert_tf.training.training_settings import set_mixed_precision
from tests import _toy_training as toy
from tests import forked_scripts
from tests.helpers import TOY_SCRIPT, run_python, script_environment, xla_compiled_functions

TIMEOUT_S = 300  # bounded, with room for a loaded 2-core machine


def _one_device():
    return tf.distribute.OneDeviceStrategy("/cpu:0")


def _seeded_trainer(model_dir, seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    return toy.build(_one_device(), str(model_dir), **kwargs)


def _summary_tags(summary_dir):
    tags = set()
    for path in glob.glob(os.path.join(summary_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    return tags


def test_loss_falls_logs_summaries_and_checkpoints(tmp_path):
    trainer = _seeded_trainer(tmp_path / "model", num_train_steps=40, steps_per_loop=10, save_checkpoints_steps=20,
                              log_every_steps=10, summary_dir=str(tmp_path / "summaries"))
    first = trainer.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)
    results = trainer.train(toy.train_dataset_fn, num_train_steps=40, global_batch_size=16)
    last = trainer.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)

    assert results["step"] == trainer.step == 40
    assert last["loss"] < 0.5 * first["loss"]
    assert last["accuracy"] > 0.9
    assert sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "model" / "ckpt-*.index"))) == [
        "ckpt-20.index", "ckpt-40.index"]
    assert {"loss", "accuracy", "learning_rate", "examples_per_second", "steps_per_second"} <= _summary_tags(
        str(tmp_path / "summaries"))

    strategy = _one_device()
    with strategy.scope():
        fresh_model = toy.make_model()
    evaluator = Trainer(strategy, fresh_model, None, None, model_dir=str(tmp_path / "model"))
    assert evaluator.restore().endswith("ckpt-40")
    restored = evaluator.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)
    assert restored == pytest.approx(last, rel=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_evaluate_and_predict_keep_the_last_partial_batch_and_trace_once(tmp_path, jit_compile):
    trainer = _seeded_trainer(tmp_path, jit_compile=jit_compile)
    dataset_fn = toy.make_eval_dataset_fn(29)  # batches of 8, 8, 8 and 5
    traces = []

    def predict_fn(model, batch):
        traces.append("predict")
        return toy.predict_fn(model, batch)

    def metrics_fn(model, batch):
        traces.append("evaluate")
        return toy.metrics_fn(model, batch)

    predictions = trainer.predict(dataset_fn, predict_fn, global_batch_size=8)
    data = toy.examples(29)

    np.testing.assert_array_equal(predictions["example_id"], np.arange(29))
    np.testing.assert_allclose(predictions["logits"], trainer.model({"x": data["x"], "token": data["token"]}).numpy(),
                               rtol=1e-5, atol=1e-6)
    correct = predictions["logits"].argmax(-1) == data["label"]
    evaluation = trainer.evaluate(dataset_fn, metrics_fn, global_batch_size=8)
    assert evaluation["accuracy"] == pytest.approx(correct.mean(), abs=1e-9)  # sum/count, not a mean of means
    first_two_batches = trainer.evaluate(dataset_fn, metrics_fn, global_batch_size=8, max_steps=2)
    assert first_two_batches["accuracy"] == pytest.approx(correct[:16].mean(), abs=1e-9)
    # Traced for the dataset's element spec (any batch size), not again for the last partial batch.
    assert traces == ["predict", "evaluate"]
    function, = trainer._predict_functions.values()
    compiled = [bool(xla_compiled_functions(function)) for function in
                (function, *trainer._evaluate_functions.values())]
    assert compiled == [jit_compile, jit_compile]


def _trainer_counting_loss_traces(model_dir, traces, metric_names=None):
    def loss_fn(model, batch):
        traces.append(len(traces))
        return toy.loss_fn(model, batch)

    if metric_names is not None:
        loss_fn = returns_metrics(*metric_names)(loss_fn)
    return _seeded_trainer(model_dir, num_train_steps=4, steps_per_loop=2, training_loss_fn=loss_fn)


def test_a_loss_function_that_declares_its_metrics_is_traced_once_and_one_that_declares_others_is_named(tmp_path):
    undeclared, declared, wrong = [], [], []
    expected = _trainer_counting_loss_traces(tmp_path / "undeclared", undeclared).train(
        toy.train_dataset_fn, num_train_steps=4, global_batch_size=8)
    results = _trainer_counting_loss_traces(tmp_path / "declared", declared, ("accuracy",)).train(
        toy.train_dataset_fn, num_train_steps=4, global_batch_size=8)
    # Without the names, the model is traced once more to learn them; the same steps either way.
    assert (len(undeclared), len(declared)) == (2, 1)
    assert results == pytest.approx(expected, rel=1e-6)
    trainer = _trainer_counting_loss_traces(tmp_path / "wrong", wrong, ("accuracy", "loss_scale"))
    with pytest.raises(ValueError, match=r"^The loss function 'loss_fn' returned metrics \['accuracy'\] but "
                                         r"declares \['accuracy', 'loss_scale'\]\.$"):
        trainer.train(toy.train_dataset_fn, num_train_steps=4, global_batch_size=8)


def test_steps_per_loop_and_accumulation_give_the_plain_run_weights(tmp_path):
    plain = _seeded_trainer(tmp_path / "plain", num_train_steps=6)
    plain.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)
    looped = _seeded_trainer(tmp_path / "looped", num_train_steps=6, steps_per_loop=3, gradient_accumulation_steps=2)
    looped.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)

    assert looped.step == 6
    for plain_weight, looped_weight in zip(plain.model.weights, looped.model.weights):
        np.testing.assert_allclose(looped_weight.numpy(), plain_weight.numpy(), rtol=0, atol=1e-6)
    moved = max(np.abs(w.numpy() - v.numpy()).max() for w, v in zip(plain.model.weights,
                                                                     _seeded_trainer(tmp_path / "init").model.weights))
    assert moved > 1e-2


def test_start_up_memory_is_released_around_the_compiling_first_call_only(tmp_path, monkeypatch):
    events = []

    @contextlib.contextmanager
    def recording_release():
        events.append(("enter", trainer.step))
        yield
        events.append(("exit", trainer.step))

    monkeypatch.setattr(train_step, "releasing_start_up_memory", recording_release)
    trainer = _seeded_trainer(tmp_path, num_train_steps=6, steps_per_loop=2)
    trainer.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)

    assert trainer.step == 6
    assert events == [("enter", 0), ("exit", 2)]


def test_the_update_reads_the_optimizer_state_only_after_the_gradients(tmp_path):
    """On TensorFlow's kernels, reads free to run at the step's start would compute beta_1 * m, beta_2 * v and the
    weight decay first and hold them through the backward pass."""
    trainer = _seeded_trainer(tmp_path, num_train_steps=2, jit_compile=False)
    trainer.train(toy.train_dataset_fn, num_train_steps=2, global_batch_size=8)
    (train_loop,) = trainer._train_step._train_loops.values()
    body_nodes = [node for concrete in train_loop._list_all_concrete_functions()
                  for function in concrete.graph.as_graph_def().library.function
                  if function.signature.name.startswith("while_body") for node in function.node_def]
    update_reads = [node for node in body_nodes
                    if node.op == "ReadVariableOp" and f"/{trainer.model.name}" not in node.name]
    unordered = {node.input[0] for node in update_reads if not any(name.startswith("^") for name in node.input)}
    assert len(update_reads) > 20
    assert len(unordered) == 1  # the step counter, which the learning rate reads


def test_gradients_are_clipped_to_global_norm_one(tmp_path):
    strategy = _one_device()
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = toy.make_model()
        optimizer = keras.optimizers.SGD(learning_rate=1.0)

    def huge_loss_fn(model, batch):
        loss, metrics = toy.loss_fn(model, batch)
        return loss * 1e6, metrics

    trainer = Trainer(strategy, model, optimizer, huge_loss_fn, model_dir=str(tmp_path))
    before = [v.numpy() for v in model.trainable_variables]
    batch = toy.examples(8)
    with tf.GradientTape() as tape:
        loss, _ = huge_loss_fn(model, batch)
    unclipped = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, model.trainable_variables)]
    trainer.train(toy.train_dataset_fn, num_train_steps=1, global_batch_size=8)

    steps = [b - v.numpy() for b, v in zip(before, model.trainable_variables)]
    assert np.sqrt(sum(np.sum(s * s) for s in steps)) == pytest.approx(1.0, rel=1e-5)
    norm = np.sqrt(sum(np.sum(g * g) for g in unclipped))
    assert norm > 1e3
    for step, grad in zip(steps, unclipped):
        np.testing.assert_allclose(step, grad / norm, rtol=1e-4, atol=1e-7)


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_checkpoint(tmp_path):
    def poisoned_dataset_fn(input_context, batch_size, skip_batches):
        def poison(index, batch):  # NaN inputs from the third batch on, i.e. at step 3
            return dict(batch, x=batch["x"] + tf.where(index >= 2, np.float32(np.nan), np.float32(0.0)))

        return toy.train_dataset_fn(input_context, batch_size, skip_batches).enumerate().map(poison)

    trainer = _seeded_trainer(tmp_path, num_train_steps=8, steps_per_loop=4, save_checkpoints_steps=2)
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 3;.*ckpt-2") as error:
        trainer.train(poisoned_dataset_fn, num_train_steps=8, global_batch_size=8)
    assert error.value.step == 3
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")


@pytest.mark.slow
def test_bfloat16_with_jit_compile_trains(tmp_path):
    set_mixed_precision("mixed_bfloat16")
    trainer = _seeded_trainer(tmp_path, optimizer_name="adamw", learning_rate=0.02, num_train_steps=30,
                              jit_compile=True, steps_per_loop=10, gradient_accumulation_steps=2)
    first = trainer.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)
    trainer.train(toy.train_dataset_fn, num_train_steps=30, global_batch_size=16)
    last = trainer.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)

    assert trainer.model.compute_dtype == "bfloat16"
    assert {v.dtype for v in trainer.model.trainable_variables} == {"float32"}
    assert last["loss"] < 0.6 * first["loss"]


@pytest.mark.parametrize("units, xla_dtype, jit_compile, policy, warned", [
    (True, "f32", True, "mixed_bfloat16", True), (False, "f32", True, "mixed_bfloat16", False),
    (True, "bf16", True, "mixed_bfloat16", False), (True, "f32", False, "mixed_bfloat16", False),
    (True, "f32", True, "float32", False)])
def test_xla_that_leaves_the_cpus_bfloat16_units_idle_is_named(tmp_path, monkeypatch, caplog, units, xla_dtype,
                                                                 jit_compile, policy, warned):
    monkeypatch.setattr(bfloat16_support, "cpu_bfloat16_units", lambda: units)
    monkeypatch.setattr(bfloat16_support, "xla_bfloat16_dot_dtype", lambda device=None: xla_dtype)
    set_mixed_precision(policy)
    with caplog.at_level(logging.WARNING):
        _seeded_trainer(tmp_path, jit_compile=jit_compile)
    assert ("leaves them idle" in caplog.text) == warned


def test_the_xla_bfloat16_probe_reads_the_dot_of_the_optimized_hlo():
    # XLA:CPU keeps a bfloat16 dot only where oneDNN can run it on bfloat16 units.
    expected = {"f32"} if not bfloat16_support.cpu_bfloat16_units() else {"f32", "bf16"}
    assert bfloat16_support.xla_bfloat16_dot_dtype("/cpu:0") in expected


@pytest.mark.parametrize("optimizer_name", ["lamb", "adamw"])
def test_the_xla_compiled_update_gives_the_per_op_update_weights(tmp_path, monkeypatch, optimizer_name):
    compiled = []
    function = tf.function

    def recording_function(fn=None, **kwargs):
        if kwargs.get("jit_compile"):
            compiled.append(fn.__name__)
        return function(fn, **kwargs)

    per_op = _seeded_trainer(tmp_path / "per_op", optimizer_name=optimizer_name, num_train_steps=6)
    per_op.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)
    monkeypatch.setattr(tf, "function", recording_function)
    xla = _seeded_trainer(tmp_path / "xla", optimizer_name=optimizer_name, num_train_steps=6, jit_compile=True,
                          steps_per_loop=3)
    xla.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)

    assert compiled == ["_replica_gradients", "apply"]
    assert xla.step == 6
    for per_op_weight, xla_weight in zip(per_op.model.weights, xla.model.weights):
        np.testing.assert_allclose(xla_weight.numpy(), per_op_weight.numpy(), rtol=0, atol=2e-5)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_float16_scales_the_loss_and_skips_overflowing_steps(tmp_path, jit_compile):
    set_mixed_precision("mixed_float16")
    strategy = _one_device()
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = toy.make_model()
        # 2**24 overflows float16 gradients, so the first steps are skipped while the scale halves.
        optimizer = keras.optimizers.LossScaleOptimizer(
            optimization.create_optimizer("lamb", init_lr=0.05, num_train_steps=40, num_warmup_steps=0),
            initial_scale=2.0 ** 24, dynamic_growth_steps=5)
    trainer = Trainer(strategy, model, optimizer, toy.loss_fn, model_dir=str(tmp_path),
                      jit_compile=jit_compile)
    before = [v.numpy() for v in model.trainable_variables]
    trainer.train(toy.train_dataset_fn, num_train_steps=1, global_batch_size=16)
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 23
    for old, variable in zip(before, model.trainable_variables):
        np.testing.assert_array_equal(variable.numpy(), old)

    first = trainer.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)
    trainer.train(toy.train_dataset_fn, num_train_steps=40, global_batch_size=16)
    last = trainer.evaluate(toy.make_eval_dataset_fn(toy.NUM_EXAMPLES), toy.metrics_fn, global_batch_size=16)
    assert float(optimizer.dynamic_scale.numpy()) < 2.0 ** 20
    assert last["loss"] < 0.6 * first["loss"]
    assert any(np.abs(variable.numpy() - old).max() > 1e-3 for old, variable in zip(before, model.trainable_variables))


def test_a_float16_model_gets_a_loss_scale_optimizer(tmp_path):
    set_mixed_precision("mixed_float16")
    trainer = _seeded_trainer(tmp_path)
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(trainer.optimizer.inner_optimizer, optimization.LAMBOptimizer)


def _run_toy(model_dir, *flags):
    completed = run_python(TOY_SCRIPT, f"--model_dir={model_dir}", *flags, timeout=TIMEOUT_S)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def _result(completed):
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
def test_sigterm_saves_and_the_rerun_ends_like_an_uninterrupted_run(tmp_path):
    flags = ["--num_train_steps=12", "--deterministic", "--dropout_rate=0.2", "--save_checkpoints_steps=100"]
    interrupted_dir, straight_dir = tmp_path / "interrupted", tmp_path / "straight"
    straight = forked_scripts.popen([TOY_SCRIPT, f"--model_dir={straight_dir}", *flags], env=script_environment())
    try:
        preempted = _result(_run_toy(interrupted_dir, *flags, "--sigterm_at_step=5"))
        resumed = _run_toy(interrupted_dir, *flags)
        straight_stdout, straight_stderr = straight.communicate(timeout=TIMEOUT_S)
    finally:
        if straight.poll() is None:
            straight.kill()
    assert straight.returncode == 0, straight_stderr[-3000:]

    assert 5 <= preempted["preempted"] < 12
    assert os.path.exists(interrupted_dir / f"ckpt-{preempted['preempted']}.index")
    assert f"Training from step {preempted['preempted']} to 12" in resumed.stderr
    resumed, straight = _result(resumed), json.loads(straight_stdout.split("RESULT ")[-1])
    assert resumed["step"] == straight["step"] == 12
    for resumed_weight, straight_weight in zip(resumed["weights"], straight["weights"]):
        np.testing.assert_allclose(resumed_weight, straight_weight, rtol=0, atol=1e-6)


def test_bad_arguments_are_named(tmp_path):
    strategy = _one_device()
    with strategy.scope():
        unbuilt = keras.Sequential([keras.layers.Dense(2)])
        optimizer = optimization.create_optimizer("adamw", init_lr=1e-3, num_train_steps=10, num_warmup_steps=0)
    with pytest.raises(ValueError, match="needs a built model"):
        Trainer(strategy, unbuilt, optimizer, toy.loss_fn, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="steps_per_loop must be a positive integer, got 0"):
        toy.build(strategy, str(tmp_path), steps_per_loop=0)
    with pytest.raises(ValueError, match=r"keep_checkpoint_max must be a non-negative integer \(0 keeps every "
                                         r"checkpoint\), got -1"):
        toy.build(strategy, str(tmp_path), keep_checkpoint_max=-1)

    trainer = toy.build(strategy, str(tmp_path))
    with pytest.raises(ValueError, match="global batch size 10 must be divisible by 1 replica.*x 4 gradient"):
        Trainer(strategy, trainer.model, trainer.optimizer, toy.loss_fn, model_dir=str(tmp_path),
                gradient_accumulation_steps=4).train(toy.train_dataset_fn, 2, global_batch_size=10)

    def float16_loss_fn(model, batch):
        loss, metrics = toy.loss_fn(model, batch)
        return tf.cast(loss, tf.float16), metrics

    with pytest.raises(ValueError, match="float32 scalar loss"):
        Trainer(strategy, trainer.model, trainer.optimizer, float16_loss_fn,
                model_dir=str(tmp_path)).train(toy.train_dataset_fn, 2, global_batch_size=8)
    with pytest.raises(ValueError, match="Unknown mixed precision policy 'float16'; allowed: float32, "):
        set_mixed_precision("float16")


def test_one_cpu_reads_its_pipeline_without_autotuning_and_other_strategies_distribute_it():
    """Deleting an iterator over an autotuned pipeline waits for tf.data's autotuning thread to wake by itself
    (TensorFlow 2.21), up to a minute after a long run: on one CPU the Trainer iterates the pipeline itself, not
    autotuned, in the order a distributed dataset gives it."""
    def dataset_fn(input_context, batch_size, skip_batches):
        assert (input_context.num_input_pipelines, input_context.input_pipeline_id) == (1, 0)
        return tf.data.Dataset.range(12).batch(batch_size).skip(skip_batches)

    dataset, element_spec = trainer_module._distribute(_one_device(), dataset_fn, 4, skip_steps=1, micro_batches=1)
    assert isinstance(dataset, tf.data.Dataset) and dataset.options().autotune.enabled is False
    assert element_spec.shape.as_list() == [None]
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    distributed, _ = trainer_module._distribute(mirrored, dataset_fn, 4, skip_steps=1, micro_batches=1)
    assert not isinstance(distributed, tf.data.Dataset)
    read = [[int(value) for value in batch] for batch in dataset]
    assert read == [[int(value) for value in mirrored.experimental_local_results(batch)[0]] for batch in distributed]
    assert read == [[4, 5, 6, 7], [8, 9, 10, 11]]
