"""`jit_compile="auto"`: the faster of XLA and TensorFlow's own kernels for this device, precision and model.

Neither path wins everywhere: in float32 on AMD Zen 3, TensorFlow's kernels lead for ALBERT-base and XLA for
small models; TensorFlow's oneDNN kernels lead on an Intel Xeon with AMX; and XLA:CPU in this TensorFlow build
computes bfloat16 matmuls in float32 (albert_tf/training/bfloat16_support.py). So a rule decides where it is
certain, or where a measurement would cost more than it can save:
- a TPU compiles every step with XLA anyway;
- mixed_bfloat16 on a CPU with bfloat16 units, where XLA would compute the matmuls in float32, takes
  TensorFlow's kernels, which run them on the units;
- batches whose length varies (fine-tuning's dynamic padding) take TensorFlow's kernels: XLA compiles a program
  for every length;
- a run shorter than MIN_STEPS_FOR_TRIAL steps takes TensorFlow's kernels, which compile nothing.
Everywhere else a few training steps of each path are timed on the first batch, as cuDNN's autotuning times its
algorithms: one path, then the other, each compiled and warmed up before its timed rounds, and the first freed
before the second compiles, so the trial's memory peak is the larger path's, not the two paths' sum. A training
script has the trial run in a process of its own (`time_paths_in_child_process`): the script again, with the same
arguments, up to its first step, so the training process only ever holds the path it takes. The choice is cached
in a JSON file (`default_cache_path`) per device, CPU model, precision, model, batch shape and albert_tf's step
code, so a resumed or repeated run takes the same path without measuring.
"""

import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Union

import tensorflow as tf
from absl import logging

from albert_tf.training import bfloat16_support

AUTO = "auto"
CACHE_DIR_ENVIRONMENT_VARIABLE = "ALBERT_TF_CACHE_DIR"
CACHE_FILE_NAME = "jit_compile_choices.json"
CACHE_FORMAT_VERSION = 1
# Per path: one call of WARMUP_STEPS (compilation, then a warm step), then TIMED_ROUNDS calls of TIMED_STEPS.
WARMUP_STEPS = 2
TIMED_STEPS = 2
TIMED_ROUNDS = 2
# The paths in the order a trial times them: XLA last, so that when it wins it is kept as compiled; when
# TensorFlow's kernels win, they are traced again, which compiles nothing.
TRIAL_ORDER = (False, True)
# A trial runs 12 steps and compiles the step with XLA, which on a CPU takes as long as 10 to 20 ALBERT-base steps:
# a shorter run would spend more than a tenth of its time choosing, more than the faster path could save.
MIN_STEPS_FOR_TRIAL = 300
PATH_NAMES = {True: "XLA", False: "TensorFlow's own kernels"}

# Set in the process that a training script starts to time the paths for it: it measures, caches and exits.
TRIAL_CHILD_VARIABLE = "ALBERT_TF_COMPILE_PATH_TRIAL"
# The command of that process; None: the paths are timed in the training process.
_trial_command: Optional[List[str]] = None

_TRUE_WORDS = ("true", "t", "1", "yes", "y")
_FALSE_WORDS = ("false", "f", "0", "no", "n")
# Every spelling of a jit_compile setting (any case): the words a --jit_compile flag accepts.
JIT_COMPILE_WORDS = (AUTO,) + _TRUE_WORDS + _FALSE_WORDS


def parse_jit_compile(value: Union[bool, int, str], source: str = "jit_compile") -> Union[bool, str]:
    """True (XLA), False (TensorFlow's kernels) or "auto" from a bool or a word, as the flag accepts them.

    Example:
    >>> parse_jit_compile("AUTO"), parse_jit_compile("no"), parse_jit_compile("1"), parse_jit_compile(False)
    ('auto', False, True, False)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word == AUTO:
            return AUTO
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise ValueError(f"{source} must be auto, true or false (or 1/0, yes/no), got {value!r}.")


# ---- the device ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DeviceDescription:
    """What runs the steps: `kind` "CPU", "GPU" or "TPU", the accelerators' `name`, and the host CPU."""

    kind: str
    name: str
    cpu_model: str
    cpu_bfloat16_units: Optional[bool]


def cpu_model_name(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The CPU's model name with its family and model numbers, from `cpuinfo_path`.

    The numbers tell generations apart where the name does not: cloud machines report "AMD EPYC" for Zen 3 (family
    25) and Zen 5 (family 26) alike, whose vector units, and so which compile path wins, differ. Without the file,
    the platform's processor name, else "unknown CPU".

    Example:
    >>> cpu_model_name() != ""
    True
    """
    fields = bfloat16_support.first_cpu_fields(cpuinfo_path)
    if fields is None:
        return platform.processor() or "unknown CPU"
    numbers = ", ".join(f"{label} {fields[key]}" for key, label in (("cpu family", "family"), ("model", "model"))
                        if fields.get(key))
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    return f"{name} ({numbers})" if numbers else name


def describe_device(strategy: tf.distribute.Strategy) -> DeviceDescription:
    """The device `strategy` computes on: its TPU, its GPUs (by model name), or the CPU."""
    cpu = dict(cpu_model=cpu_model_name(), cpu_bfloat16_units=bfloat16_support.cpu_bfloat16_units())
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return DeviceDescription(kind="TPU", name="TPU", **cpu)
    device_types = {tf.DeviceSpec.from_string(device).device_type for device in strategy.extended.worker_devices}
    gpus = tf.config.list_physical_devices("GPU")
    if "GPU" in device_types and gpus:
        names = [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name) for gpu in gpus]
        return DeviceDescription(kind="GPU", name=", ".join(names), **cpu)
    return DeviceDescription(kind="CPU", name="CPU", **cpu)


# ---- the choice ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class JitCompileChoice:
    """The path taken (`jit_compile`), how it was decided (`decided_by`: "flag", "rule", "cache" or
    "measurement"), why in words (`reason`), and the measured steps/s of each path where there are some."""

    jit_compile: bool
    decided_by: str
    reason: str
    steps_per_second: Optional[Dict[str, float]] = None

    def describe(self) -> str:
        return f"{PATH_NAMES[self.jit_compile]} ({self.decided_by}: {self.reason})"


def forced_choice(jit_compile: bool) -> JitCompileChoice:
    """The path `jit_compile=True` or False forces."""
    return JitCompileChoice(jit_compile, "flag", f"jit_compile={jit_compile}")


def rule_choice(device: DeviceDescription, compute_dtype: str, lengths_vary: bool = False,
                steps: Optional[int] = None) -> Optional[JitCompileChoice]:
    """The path where a rule decides (see the module docstring); None where only a measurement can tell.

    `lengths_vary`: the batches' sequence length changes from batch to batch (`batch_lengths_vary`); `steps`: the
    training steps the run has left, where known.

    Example:
    >>> cpu = DeviceDescription("CPU", "CPU", "unknown CPU", False)
    >>> rule_choice(DeviceDescription("TPU", "TPU", "unknown CPU", None), "float32").jit_compile
    True
    >>> rule_choice(cpu, "bfloat16") is None, rule_choice(cpu, "float32", steps=25).jit_compile
    (True, False)
    """
    if device.kind == "TPU":
        return JitCompileChoice(True, "rule", "a TPU compiles every step with XLA")
    bfloat16_units_idle = (device.kind == "CPU" and compute_dtype == "bfloat16" and device.cpu_bfloat16_units
                           and bfloat16_support.xla_bfloat16_dot_dtype("/cpu:0") == "f32")
    if bfloat16_units_idle:
        return JitCompileChoice(False, "rule", "this CPU has bfloat16 units and XLA computes bfloat16 matmuls in "
                                               "float32 here; TensorFlow's kernels run them on the units")
    if lengths_vary:
        return JitCompileChoice(False, "rule", "the batches' length varies (dynamic padding) and XLA would compile "
                                               "a program for every length; TensorFlow's kernels compile none")
    if steps is not None and steps < MIN_STEPS_FOR_TRIAL:
        return JitCompileChoice(False, "rule", f"{steps} steps are too few for a trial of both paths (12 steps "
                                               f"and an XLA compilation) to pay for itself, under "
                                               f"{MIN_STEPS_FOR_TRIAL}; TensorFlow's kernels compile nothing")
    return None


def batch_lengths_vary(element_spec) -> bool:
    """Whether a batch of `element_spec` (a structure of tf.TensorSpec) has a dimension of unknown size besides
    the batch's own: its sequence length changes from batch to batch.

    Example:
    >>> batch_lengths_vary({"input_word_ids": tf.TensorSpec([32, None], tf.int32)})
    True
    >>> batch_lengths_vary({"input_word_ids": tf.TensorSpec([None, 128], tf.int32)})
    False
    """
    return any(None in spec.shape.as_list()[1:] for spec in tf.nest.flatten(element_spec)
               if isinstance(spec, tf.TensorSpec) and spec.shape.rank)


def inference_choice(device: DeviceDescription, compute_dtype: str) -> JitCompileChoice:
    """The path of an evaluation or prediction that no training choice precedes: the rule, else XLA (the
    forward pass alone gained most from XLA where it was measured, BUILD_NOTES.md "Speed and memory")."""
    return rule_choice(device, compute_dtype) or JitCompileChoice(
        True, "rule", "no training step measured; XLA for the forward pass")


def measure_paths(run_steps: Callable[[bool, int], None], free_path: Optional[Callable[[bool], None]] = None,
                  combine: Optional[Callable[[List[float]], List[float]]] = None,
                  clock: Callable[[], float] = time.perf_counter) -> Dict[bool, float]:
    """{jit_compile: steps per second} of each path, `run_steps(jit_compile, num_steps)` timed by `clock`.

    The paths are timed one after the other (TRIAL_ORDER), each keeping its fastest round; `free_path(jit_compile)`
    is called once a path is timed and before the next compiles, for every path but the last. `combine` turns
    this process's [XLA, TensorFlow] rates into the ones to decide on (the mean over the workers of a
    multi-worker run, so that every worker takes the same path).
    """
    rates = {}
    for index, jit_compile in enumerate(TRIAL_ORDER):
        run_steps(jit_compile, WARMUP_STEPS)
        seconds = []
        for _ in range(TIMED_ROUNDS):
            start = clock()
            run_steps(jit_compile, TIMED_STEPS)
            seconds.append(clock() - start)
        rates[jit_compile] = TIMED_STEPS / max(min(seconds), 1e-9)
        if free_path is not None and index < len(TRIAL_ORDER) - 1:
            free_path(jit_compile)
    ordered = [rates[True], rates[False]]
    if combine is not None:
        ordered = combine(ordered)
    return dict(zip((True, False), ordered))


def time_paths_in_child_process(command: Optional[Sequence[str]]) -> None:
    """Has a trial of both paths run `command` in a process of its own, with TRIAL_CHILD_VARIABLE set: the
    program again, which times the paths at its first training step, caches the faster and exits. The training
    process then reads the choice from the cache and never holds the other path. None: time them in-process.

    Example:
    >>> time_paths_in_child_process(["python", "-m", "run_scripts.run_pretraining", "--output_dir=/tmp/p"])
    >>> trial_command()[1:3]
    ['-m', 'run_scripts.run_pretraining']
    >>> time_paths_in_child_process(None)
    """
    global _trial_command
    _trial_command = list(command) if command else None


def trial_command() -> Optional[List[str]]:
    """The command that times the paths in a child process, or None (none set, or this is that child)."""
    return None if is_trial_child() else _trial_command


def is_trial_child() -> bool:
    """Whether this process was started to time the paths for a training process (`time_paths_in_child_process`)."""
    return os.environ.get(TRIAL_CHILD_VARIABLE) == "1"


def measured_choice(rates: Dict[bool, float]) -> JitCompileChoice:
    """The faster path of `measure_paths`' rates (XLA on a tie, the default before "auto")."""
    jit_compile = rates[True] >= rates[False]
    numbers = {"xla": round(rates[True], 4), "tensorflow": round(rates[False], 4)}
    return JitCompileChoice(jit_compile, "measurement", f"{rates[True]:.3g} steps/s with XLA, {rates[False]:.3g} "
                                                        "with TensorFlow's kernels on the first batch", numbers)


# ---- the cache ----------------------------------------------------------------------------------------

def default_cache_path() -> str:
    """$ALBERT_TF_CACHE_DIR/jit_compile_choices.json, else under $XDG_CACHE_HOME (default ~/.cache)/albert_tf."""
    directory = os.environ.get(CACHE_DIR_ENVIRONMENT_VARIABLE)
    if not directory:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        directory = os.path.join(base, "albert_tf")
    return os.path.join(directory, CACHE_FILE_NAME)


def _fingerprint(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode("utf-8")).hexdigest()[:16]


def _without_unique_suffixes(value):
    """`value` with the "_1", "_2", ... that Keras appends to repeated names dropped, so that the same model
    built again (in this process or the next) has the same fingerprint."""
    if isinstance(value, str):
        return re.sub(r"_\d+(?=/|$)", "", value)
    if isinstance(value, dict):
        return {key: _without_unique_suffixes(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_unique_suffixes(item) for item in value]
    return value


def model_fingerprint(model, loss_fn=None) -> str:
    """A hash of the model's class, config and variable shapes (and the loss function's name)."""
    try:
        config = model.get_config()
    except NotImplementedError:
        config = None
    variables = [(variable.path, list(variable.shape), str(variable.dtype)) for variable in model.variables]
    loss = None if loss_fn is None else f"{getattr(loss_fn, '__module__', '')}.{getattr(loss_fn, '__qualname__', '')}"
    return _fingerprint(_without_unique_suffixes(
        {"class": type(model).__name__, "config": config, "variables": variables, "loss": loss}))


def batch_signature(element_spec):
    """One replica's batch with every tensor spec as "shape dtype", in the batch's structure."""
    return tf.nest.map_structure(lambda spec: f"{spec.shape} {spec.dtype.name}", element_spec)


# The packages whose code makes up a training step: a change to any of them can change which path is faster.
_STEP_PACKAGES = ("layers", "models", "training")


@functools.lru_cache(maxsize=None)
def step_code_fingerprint() -> str:
    """A hash of the source of albert_tf's layers, models and training packages (the code a step runs).

    Example:
    >>> len(step_code_fingerprint())
    16
    """
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for package in _STEP_PACKAGES:
        directory = os.path.join(package_root, package)
        for name in sorted(os.listdir(directory)):
            if name.endswith(".py"):
                with open(os.path.join(directory, name), "rb") as source:
                    digest.update(f"{package}/{name}\0".encode("utf-8") + source.read() + b"\0")
    return digest.hexdigest()[:16]


def cache_key(device: DeviceDescription, precision: str, model_hash: str, batch,
              **setup: Union[int, str]) -> Dict[str, object]:
    """What a cached choice holds for: TensorFlow's version, albert_tf's step code, the device and CPU, the
    precision policy, the model's fingerprint, the batch signature and any `setup` (replicas, accumulation
    steps, strategy). A new version of the step's code measures again: it may have changed which path wins."""
    return {"tensorflow": tf.__version__, "code": step_code_fingerprint(), "device": device.name,
            "device_kind": device.kind, "cpu_model": device.cpu_model, "precision": precision, "model": model_hash,
            "batch": batch, **setup}


class ChoiceCache:
    """The JSON file of measured choices; one that cannot be read or parsed is ignored with a warning.

    Example:
    >>> import tempfile
    >>> cache = ChoiceCache(os.path.join(tempfile.mkdtemp(), "choices.json"))
    >>> key = {"device": "CPU", "precision": "float32"}
    >>> cache.lookup(key) is None
    True
    >>> cache.store(key, JitCompileChoice(False, "measurement", "measured", {"xla": 1.0, "tensorflow": 1.2}))
    >>> cache.lookup(key).jit_compile
    False
    """

    def __init__(self, path: Optional[str] = None):
        self.path = path or default_cache_path()

    def _read(self) -> Dict[str, dict]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                contents = json.load(handle)
            if not isinstance(contents, dict) or contents.get("version") != CACHE_FORMAT_VERSION:
                raise ValueError(f"not a version {CACHE_FORMAT_VERSION} cache of jit_compile choices")
            choices = contents["choices"]
            if not isinstance(choices, dict):
                raise ValueError("its 'choices' is not an object")
            return choices
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as error:
            logging.warning("Ignoring the jit_compile choice cache %s, which cannot be read: %s", self.path, error)
            return {}

    def lookup(self, key: Dict[str, object]) -> Optional[JitCompileChoice]:
        """The choice cached for `key`, or None."""
        stored = self.measurement(key)
        if stored is None:
            return None
        return dataclasses.replace(stored, decided_by="cache", reason=f"{stored.reason}; cached in {self.path}")

    def measurement(self, key: Dict[str, object]) -> Optional[JitCompileChoice]:
        """The measured choice stored for `key`, as it was measured, or None."""
        entry = self._read().get(_fingerprint(key))
        if not isinstance(entry, dict) or not isinstance(entry.get("jit_compile"), bool):
            return None
        return JitCompileChoice(entry["jit_compile"], "measurement", entry.get("reason", "measured before"),
                                entry.get("steps_per_second"))

    def store(self, key: Dict[str, object], choice: JitCompileChoice) -> None:
        """Adds `choice` for `key` (atomically: a concurrent reader sees the old file or the new one)."""
        choices = self._read()
        choices[_fingerprint(key)] = {"key": key, "jit_compile": choice.jit_compile, "reason": choice.reason,
                                      "steps_per_second": choice.steps_per_second,
                                      "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        directory = os.path.dirname(self.path) or "."
        try:
            os.makedirs(directory, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".jit_compile_choices.", suffix=".tmp",
                                             delete=False, encoding="utf-8") as handle:
                json.dump({"version": CACHE_FORMAT_VERSION, "choices": choices}, handle, indent=1, sort_keys=True)
            os.replace(handle.name, self.path)
        except OSError as error:
            logging.warning("Could not write the jit_compile choice cache %s: %s", self.path, error)


# ---- the training state a measurement must leave as it found it ----------------------------------------

def snapshot_variables(variables) -> Callable[[], None]:
    """A function that assigns `variables` the values they hold now (bit for bit)."""
    unique = list({id(variable): variable for variable in variables}.values())
    values = [variable.numpy() for variable in unique]

    def restore():
        for variable, value in zip(unique, values):
            variable.assign(value)

    return restore
