"""jit_compile="auto": the rule, the measured choice, its cache, and a Trainer that trains as the path it chose."""
import json
import logging
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import bfloat16_support, compile_choice
from albert_tf.training.compile_choice import ChoiceCache, DeviceDescription, JitCompileChoice
from albert_tf.training.training_settings import set_mixed_precision
from tests import _toy_training as toy
from tests.helpers import xla_compiled_functions

CPU_WITH_UNITS = DeviceDescription("CPU", "CPU", "a CPU with AMX", True)
CPU_WITHOUT_UNITS = DeviceDescription("CPU", "CPU", "a CPU without bfloat16 units", False)
GPU = DeviceDescription("GPU", "NVIDIA H200", "a host CPU", True)
TPU = DeviceDescription("TPU", "TPU", "a host CPU", None)


@pytest.fixture
def trials_at_any_length(monkeypatch):
    """The toy runs' few steps would take TensorFlow's kernels by rule; these tests measure."""
    monkeypatch.setattr(compile_choice, "MIN_STEPS_FOR_TRIAL", 0)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv(compile_choice.CACHE_DIR_ENVIRONMENT_VARIABLE, str(directory))
    return directory


# ---- parsing ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("auto", "auto"), ("Auto", "auto"), ("true", True), ("false", False), ("1", True), ("0", False),
    ("yes", True), ("no", False), ("T", True), ("f", False), (True, True), (False, False), (1, True), (0, False)])
def test_jit_compile_values_parse(value, expected):
    assert compile_choice.parse_jit_compile(value) == expected


@pytest.mark.parametrize("value", ["maybe", "", 2, None, 1.5])
def test_a_bad_jit_compile_value_is_named(value):
    with pytest.raises(ValueError, match=rf"Trainer jit_compile must be auto, true or false \(or 1/0, yes/no\), "
                                         rf"got {value!r}"):
        compile_choice.parse_jit_compile(value, source="Trainer jit_compile")


# ---- the rule ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device, compute_dtype, xla_dot_dtype, expected", [
    (CPU_WITH_UNITS, "bfloat16", "f32", False),  # the one certain CPU rule: the units, not XLA's float32 dots
    (CPU_WITH_UNITS, "bfloat16", "bf16", None),  # an XLA that keeps bfloat16 dots: measure
    (CPU_WITH_UNITS, "float32", "f32", None),
    (CPU_WITHOUT_UNITS, "bfloat16", "f32", None),
    (CPU_WITHOUT_UNITS, "float32", "f32", None),
    (GPU, "bfloat16", "f32", None),
    (GPU, "float32", "f32", None),
    (TPU, "float32", "f32", True),
    (TPU, "bfloat16", "f32", True),
])
def test_the_rule_decides_only_where_it_is_certain(monkeypatch, device, compute_dtype, xla_dot_dtype, expected):
    monkeypatch.setattr(bfloat16_support, "xla_bfloat16_dot_dtype", lambda device=None: xla_dot_dtype)
    choice = compile_choice.rule_choice(device, compute_dtype)
    if expected is None:
        assert choice is None
    else:
        assert (choice.jit_compile, choice.decided_by) == (expected, "rule")
    inference = compile_choice.inference_choice(device, compute_dtype)
    assert inference.jit_compile == (True if expected is None else expected)


def test_the_device_description_names_this_cpu():
    device = compile_choice.describe_device(tf.distribute.OneDeviceStrategy("/cpu:0"))
    assert device.kind == "CPU"
    assert device.cpu_model == compile_choice.cpu_model_name() != ""
    assert device.cpu_bfloat16_units == bfloat16_support.cpu_bfloat16_units()


@pytest.mark.parametrize("cpuinfo, expected", [
    ("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: avx2\n\n"
     "processor\t: 1\ncpu family\t: 26\n", "AMD EPYC (family 25, model 1)"),
    ("cpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n",
     "Intel(R) Xeon(R) Platinum 8480+ (family 6, model 143)"),
    ("model name\t: Some CPU\n", "Some CPU"),
])
def test_the_cpu_is_named_with_its_family_and_model_numbers(tmp_path, cpuinfo, expected):
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    assert compile_choice.cpu_model_name(str(tmp_path / "cpuinfo")) == expected


# ---- the measurement -----------------------------------------------------------------------------------

class _FakeClock:
    """Time that passes only in the stubbed steps: `seconds_per_step[jit_compile]` per step, compilation
    (the first call of a path) `compile_seconds` more."""

    def __init__(self, seconds_per_step, compile_seconds=100.0):
        self.now = 0.0
        self.calls = []
        self._seconds_per_step = seconds_per_step
        self._compile_seconds = compile_seconds

    def __call__(self):
        return self.now

    def run_steps(self, jit_compile, num_steps):
        first = jit_compile not in [path for path, _ in self.calls]
        self.calls.append((jit_compile, num_steps))
        self.now += num_steps * self._seconds_per_step[jit_compile] + (self._compile_seconds if first else 0.0)


@pytest.mark.parametrize("seconds_per_step, expected", [({True: 0.5, False: 1.0}, True),
                                                        ({True: 1.0, False: 0.25}, False)])
def test_the_measured_choice_is_the_faster_path(seconds_per_step, expected):
    clock = _FakeClock(seconds_per_step)
    freed = []

    def free_path(jit_compile):
        freed.append((jit_compile, len(clock.calls)))

    rates = compile_choice.measure_paths(clock.run_steps, free_path=free_path, clock=clock)
    choice = compile_choice.measured_choice(rates)

    assert rates == {path: pytest.approx(1.0 / seconds) for path, seconds in seconds_per_step.items()}
    assert (choice.jit_compile, choice.decided_by) == (expected, "measurement")
    assert choice.steps_per_second == {"xla": pytest.approx(1 / seconds_per_step[True], rel=1e-3),
                                       "tensorflow": pytest.approx(1 / seconds_per_step[False], rel=1e-3)}
    # One path compiles and is timed, and is freed before the other compiles: the two are never held at once.
    warmup = compile_choice.WARMUP_STEPS
    timed = compile_choice.TIMED_STEPS
    rounds = compile_choice.TIMED_ROUNDS
    one_path = 1 + rounds
    assert clock.calls == [(False, warmup)] + [(False, timed)] * rounds + [(True, warmup)] + [(True, timed)] * rounds
    assert freed == [(False, one_path)]


def test_every_worker_decides_on_the_combined_rates():
    clock = _FakeClock({True: 0.5, False: 1.0})
    rates = compile_choice.measure_paths(clock.run_steps, combine=lambda rates: [rates[0], 10 * rates[1]],
                                         clock=clock)
    assert compile_choice.measured_choice(rates).jit_compile is False


# ---- the cache -----------------------------------------------------------------------------------------

def test_the_cache_stores_and_reads_back_a_choice_per_key(cache_dir):
    cache = ChoiceCache()
    key = compile_choice.cache_key(CPU_WITHOUT_UNITS, "float32", "model-hash", {"x": "(8, 6) float32"}, replicas=1)
    choice = JitCompileChoice(False, "measurement", "2 steps/s with XLA, 3 with TensorFlow's kernels",
                              {"xla": 2.0, "tensorflow": 3.0})
    assert cache.path == str(cache_dir / compile_choice.CACHE_FILE_NAME)
    assert cache.lookup(key) is None
    cache.store(key, choice)

    cached = ChoiceCache().lookup(key)
    assert (cached.jit_compile, cached.decided_by, cached.steps_per_second) == (False, "cache", choice.steps_per_second)
    for other in (dict(key, precision="mixed_bfloat16"), dict(key, model="another-hash"),
                  dict(key, batch={"x": "(16, 6) float32"}), dict(key, cpu_model="another CPU"),
                  dict(key, code="another step")):
        assert cache.lookup(other) is None
    with open(cache.path, encoding="utf-8") as handle:
        (entry,) = json.load(handle)["choices"].values()
    assert entry["key"] == key and entry["jit_compile"] is False


def test_the_key_holds_a_fingerprint_of_the_step_code_that_changes_with_it(tmp_path, monkeypatch):
    key = compile_choice.cache_key(CPU_WITHOUT_UNITS, "float32", "model-hash", {}, replicas=1)
    assert key["code"] == compile_choice.step_code_fingerprint()
    package = tmp_path / "albert_tf"
    for name in compile_choice._STEP_PACKAGES:
        (package / name).mkdir(parents=True)
        (package / name / "module.py").write_text("STEP = 1\n")
    monkeypatch.setattr(compile_choice, "__file__", str(package / "training" / "compile_choice.py"))
    fingerprints = []
    for source in ("STEP = 1\n", "STEP = 2\n"):
        (package / "layers" / "module.py").write_text(source)
        compile_choice.step_code_fingerprint.cache_clear()
        fingerprints.append(compile_choice.step_code_fingerprint())
    compile_choice.step_code_fingerprint.cache_clear()
    assert fingerprints[0] != fingerprints[1] and key["code"] not in fingerprints


def test_the_default_cache_is_under_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_choice.CACHE_DIR_ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_choice.default_cache_path() == str(tmp_path / "albert_tf" / compile_choice.CACHE_FILE_NAME)


@pytest.mark.parametrize("contents", ["{not json", json.dumps({"version": 99, "choices": {}}), json.dumps([1, 2]),
                                      json.dumps({"version": 1, "choices": []})])
def test_a_corrupt_cache_is_ignored_with_a_warning(cache_dir, caplog, contents):
    cache_dir.mkdir()
    (cache_dir / compile_choice.CACHE_FILE_NAME).write_text(contents, encoding="utf-8")
    key = {"device": "CPU"}
    with caplog.at_level(logging.WARNING):
        assert ChoiceCache().lookup(key) is None
    assert "Ignoring the jit_compile choice cache" in caplog.text

    ChoiceCache().store(key, JitCompileChoice(True, "measurement", "measured"))
    assert ChoiceCache().lookup(key).jit_compile is True


def test_an_unreadable_or_unwritable_cache_is_a_warning_not_an_error(tmp_path, caplog):
    directory_in_the_way = tmp_path / "choices.json"
    directory_in_the_way.mkdir()
    cache = ChoiceCache(str(directory_in_the_way))
    with caplog.at_level(logging.WARNING):
        assert cache.lookup({"device": "CPU"}) is None
        cache.store({"device": "CPU"}, JitCompileChoice(True, "measurement", "measured"))
    assert "Ignoring the jit_compile choice cache" in caplog.text
    assert "Could not write the jit_compile choice cache" in caplog.text


# ---- the Trainer ---------------------------------------------------------------------------------------

def _auto_trainer(model_dir, dropout_rate=0.0, jit_compile="auto", num_train_steps=6):
    keras.utils.set_random_seed(0)
    return toy.build(tf.distribute.OneDeviceStrategy("/cpu:0"), str(model_dir), jit_compile=jit_compile,
                     dropout_rate=dropout_rate, num_train_steps=num_train_steps)


def _stub_measurement(monkeypatch, rates):
    """measure_paths returns `rates` without running a step; returns the list of its calls."""
    calls = []

    def measure_paths(run_steps, free_path=None, combine=None, clock=None):
        calls.append(run_steps)
        return dict(rates)

    monkeypatch.setattr(compile_choice, "measure_paths", measure_paths)
    return calls


def test_auto_measures_once_then_reads_the_cache_keyed_by_precision_model_and_batch(tmp_path, cache_dir,
                                                                                     monkeypatch,
                                                                                     trials_at_any_length):
    monkeypatch.setattr(compile_choice, "describe_device", lambda strategy: CPU_WITHOUT_UNITS)
    calls = _stub_measurement(monkeypatch, {True: 1.0, False: 3.0})

    def train(name, global_batch_size=8, **kwargs):
        trainer = _auto_trainer(tmp_path / name, **kwargs)
        assert trainer.jit_compile_choice is None
        trainer.train(toy.train_dataset_fn, num_train_steps=2, global_batch_size=global_batch_size)
        return trainer.jit_compile_choice

    first = train("first")
    assert (first.jit_compile, first.decided_by, len(calls)) == (False, "measurement", 1)
    assert first.steps_per_second == {"xla": 1.0, "tensorflow": 3.0}
    assert os.path.exists(cache_dir / compile_choice.CACHE_FILE_NAME)

    again = train("again")
    assert (again.jit_compile, again.decided_by, len(calls)) == (False, "cache", 1)
    assert again.steps_per_second == first.steps_per_second

    assert train("bigger_batch", global_batch_size=16).decided_by == "measurement"
    assert train("other_config", dropout_rate=0.1).decided_by == "measurement"
    set_mixed_precision("mixed_bfloat16")
    assert train("bfloat16").decided_by == "measurement"
    assert len(calls) == 4
    assert train("bfloat16_again").decided_by == "cache"


def test_evaluation_and_prediction_follow_the_training_choice(tmp_path, cache_dir, monkeypatch,
                                                              trials_at_any_length):
    monkeypatch.setattr(compile_choice, "describe_device", lambda strategy: CPU_WITHOUT_UNITS)
    _stub_measurement(monkeypatch, {True: 1.0, False: 3.0})
    trainer = _auto_trainer(tmp_path)
    dataset_fn = toy.make_eval_dataset_fn(16)

    trainer.predict(dataset_fn, toy.predict_fn, global_batch_size=8)  # before training: no rule here, so XLA
    function, = trainer._predict_functions.values()
    assert xla_compiled_functions(function)
    trainer.train(toy.train_dataset_fn, num_train_steps=2, global_batch_size=8)
    trainer.predict(dataset_fn, toy.predict_fn, global_batch_size=8)
    trainer.evaluate(dataset_fn, toy.metrics_fn, global_batch_size=8)

    assert trainer.jit_compile_choice.jit_compile is False
    predict_function, = trainer._predict_functions.values()
    evaluate_function, = trainer._evaluate_functions.values()
    assert not xla_compiled_functions(predict_function)
    assert not xla_compiled_functions(evaluate_function)


def test_mixed_bfloat16_on_a_cpu_with_bfloat16_units_takes_tensorflows_kernels_without_measuring(
        tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(compile_choice, "describe_device", lambda strategy: CPU_WITH_UNITS)
    monkeypatch.setattr(bfloat16_support, "xla_bfloat16_dot_dtype", lambda device=None: "f32")
    calls = _stub_measurement(monkeypatch, {True: 9.0, False: 1.0})
    set_mixed_precision("mixed_bfloat16")
    trainer = _auto_trainer(tmp_path)
    trainer.train(toy.train_dataset_fn, num_train_steps=2, global_batch_size=8)

    assert (trainer.jit_compile_choice.jit_compile, trainer.jit_compile_choice.decided_by) == (False, "rule")
    assert calls == []
    assert not os.path.exists(cache_dir / compile_choice.CACHE_FILE_NAME)


@pytest.mark.parametrize("steps, batch_length, reason", [
    (25, 4, "25 steps are too few for a trial"),
    (None, None, "the batches' length varies"),
])
def test_a_short_run_or_varying_lengths_take_tensorflows_kernels_without_measuring(
        tmp_path, cache_dir, monkeypatch, steps, batch_length, reason):
    monkeypatch.setattr(compile_choice, "describe_device", lambda strategy: CPU_WITHOUT_UNITS)
    calls = _stub_measurement(monkeypatch, {True: 9.0, False: 1.0})
    trainer = _auto_trainer(tmp_path)
    dataset_fn = toy.train_dataset_fn
    if batch_length is None:
        def dataset_fn(input_context, batch_size, skip_batches):
            # A feature whose length is each batch's largest token id, as dynamic padding cuts a batch to its
            # longest member; the toy model does not read it.
            return toy.train_dataset_fn(input_context, batch_size, skip_batches).map(
                lambda batch: dict(batch, padding=tf.zeros([batch_size, tf.reduce_max(batch["token"])])))
    train_steps = trainer.make_train_function(dataset_fn, global_batch_size=8, steps_left=steps)
    train_steps(1)

    choice = trainer.jit_compile_choice
    assert (choice.jit_compile, choice.decided_by) == (False, "rule")
    assert reason in choice.reason
    assert calls == []
    assert not os.path.exists(cache_dir / compile_choice.CACHE_FILE_NAME)


def test_a_forced_path_neither_measures_nor_caches(tmp_path, cache_dir, monkeypatch):
    calls = _stub_measurement(monkeypatch, {True: 1.0, False: 3.0})
    for jit_compile in (True, False):
        trainer = _auto_trainer(tmp_path / str(jit_compile), jit_compile=jit_compile)
        assert (trainer.jit_compile_choice.jit_compile, trainer.jit_compile_choice.decided_by) == (jit_compile, "flag")
        trainer.train(toy.train_dataset_fn, num_train_steps=1, global_batch_size=8)
    assert calls == []
    assert not os.path.exists(cache_dir / compile_choice.CACHE_FILE_NAME)


def _toy_training_command(tmp_path, num_train_steps):
    """The toy training of tests/_toy_training.py as a program of its own, its functions under their module name
    (as the training scripts' are), so that its cache key is this process's."""
    arguments = [f"--model_dir={tmp_path / 'child'}", f"--num_train_steps={num_train_steps}", "--jit_compile=auto"]
    return [sys.executable, "-c", f"import sys; sys.argv[1:] = {arguments!r}; "
                                  "from tests import _toy_training; _toy_training.main()"]


@pytest.mark.slow
def test_a_script_times_the_paths_in_a_child_process_and_holds_only_the_path_it_takes(tmp_path, cache_dir,
                                                                                      monkeypatch, caplog):
    monkeypatch.setattr(compile_choice, "_trial_command", _toy_training_command(tmp_path, num_train_steps=400))
    trainer = _auto_trainer(tmp_path / "parent")
    monkeypatch.setattr(trainer._train_step, "trial_function", None)  # this process times nothing
    with caplog.at_level(logging.INFO):
        train_steps = trainer.make_train_function(toy.train_dataset_fn, global_batch_size=8)
    train_steps(2)

    choice = trainer.jit_compile_choice
    assert choice.decided_by == "measurement" and choice.reason.endswith(", in a child process")
    assert set(choice.steps_per_second) == {"xla", "tensorflow"}
    assert list(trainer._train_step._train_loops) == [choice.jit_compile]
    assert "times both paths in a child process" in caplog.text
    assert not (tmp_path / "child").exists() or not list((tmp_path / "child").glob("ckpt-*"))  # the child trained none


def test_a_failed_child_trial_is_a_warning_and_the_paths_are_timed_here(tmp_path, cache_dir, monkeypatch, caplog,
                                                                         trials_at_any_length):
    monkeypatch.setattr(compile_choice, "describe_device", lambda strategy: CPU_WITHOUT_UNITS)
    monkeypatch.setattr(compile_choice, "_trial_command", [sys.executable, "-c", "raise SystemExit('no memory')"])
    calls = _stub_measurement(monkeypatch, {True: 1.0, False: 3.0})
    trainer = _auto_trainer(tmp_path)
    trainer.train(toy.train_dataset_fn, num_train_steps=2, global_batch_size=8)

    assert (trainer.jit_compile_choice.jit_compile, trainer.jit_compile_choice.decided_by) == (False, "measurement")
    assert len(calls) == 1
    assert "The compile-path trial in a child process failed (exit status 1: no memory)" in caplog.text


def _state(trainer):
    return [variable.numpy() for variable in trainer.model.variables + trainer.optimizer.variables]


@pytest.mark.slow
@pytest.mark.parametrize("preferred", [True, False])
def test_auto_trains_bit_identically_to_the_path_it_chose(tmp_path, cache_dir, monkeypatch, trials_at_any_length,
                                                          preferred):
    measure_paths = compile_choice.measure_paths

    def measure_then_prefer(run_steps, free_path=None, combine=None):
        measure_paths(run_steps, free_path, combine)  # the real trial steps, on the real state
        return {preferred: 2.0, not preferred: 1.0}

    monkeypatch.setattr(compile_choice, "measure_paths", measure_then_prefer)
    monkeypatch.setattr(compile_choice, "describe_device", lambda strategy: CPU_WITHOUT_UNITS)
    auto = _auto_trainer(tmp_path / "auto", dropout_rate=0.2)
    auto.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)
    forced = _auto_trainer(tmp_path / "forced", dropout_rate=0.2, jit_compile=preferred)
    forced.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)

    assert (auto.jit_compile_choice.jit_compile, auto.jit_compile_choice.decided_by) == (preferred, "measurement")
    assert auto.step == forced.step == 6
    for auto_value, forced_value in zip(_state(auto), _state(forced)):  # weights, seeds, slots, step counter
        np.testing.assert_array_equal(auto_value, forced_value)
    # The path's training loop was traced once, for the trial steps, and the other path's was dropped.
    assert list(auto._train_step._train_loops) == [preferred]
    assert len(auto._train_step._train_loops[preferred]._list_all_concrete_functions()) == 1

    # A resumed run finds the choice in the cache and ends as the straight run did.
    monkeypatch.setattr(compile_choice, "measure_paths", None)  # measuring again would fail
    resumed = _auto_trainer(tmp_path / "resumed", dropout_rate=0.2)
    resumed.train(toy.train_dataset_fn, num_train_steps=3, global_batch_size=8)
    resumed = _auto_trainer(tmp_path / "resumed", dropout_rate=0.2)
    resumed.train(toy.train_dataset_fn, num_train_steps=6, global_batch_size=8)
    assert (resumed.jit_compile_choice.jit_compile, resumed.jit_compile_choice.decided_by) == (preferred, "cache")
    for resumed_value, forced_value in zip(_state(resumed), _state(forced)):
        np.testing.assert_allclose(resumed_value, forced_value, rtol=0, atol=1e-6)
