"""Shared pytest setup: the test oracles on the path, quiet TensorFlow logs, a fresh jit_compile choice cache, a
fixed Keras dtype policy and absl logger level per test, the SentencePiece model and tokenizer that the tests share,
and a fresh ram:// directory per test."""
import json
import logging
import os
import resource
import sys
import tempfile
import time

# scipy and scikit-learn live outside site-packages (see requirements-test-oracles.txt), so that only this
# process imports them, not the training processes that tests start.
TEST_ORACLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv", "test-oracles")
if os.path.isdir(TEST_ORACLES):
    sys.path.append(TEST_ORACLES)
# The beam extra lives in .venv/beam (`make beam`, see requirements-beam.txt). Appended, so the environment's own
# packages keep precedence over the copies of them that Beam's dependencies put there: the tests frame records
# with its google-crc32c here, and start the Beam pipelines in processes that put it first.
BEAM_PACKAGES = os.path.join(os.path.dirname(TEST_ORACLES), "beam")
if os.path.isdir(BEAM_PACKAGES):
    sys.path.append(BEAM_PACKAGES)
# The onnx extra (tf2onnx, onnx, onnxruntime) lives in .venv/onnx (`make onnx`, see requirements-onnx.txt).
ONNX_PACKAGES = os.path.join(os.path.dirname(TEST_ORACLES), "onnx")
if os.path.isdir(ONNX_PACKAGES):
    sys.path.append(ONNX_PACKAGES)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# LLVM's optimisation of XLA's CPU code is most of a tiny model's compile time (about 15 of 20 s per
# training function) and changes no result: the tests, and the training runs they start, compile without it.
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                     "--xla_backend_optimization_level=0"]))

# jit_compile="auto" caches its measured choices: the tests and the runs they start share one fresh cache,
# never the user's (~/.cache/albert_tf).
os.environ["ALBERT_TF_CACHE_DIR"] = tempfile.mkdtemp(prefix="albert_tf_test_cache_")

from run_scripts import stderr_to_devnull

# TensorFlow's import prints its C++ start-up lines whatever the level (pytest-xdist's main process would show them).
with stderr_to_devnull():
    import keras
    import tensorflow as tf
import pytest

from albert_tf.benchmarking import child_process
from albert_tf.tokenization import AlbertTokenizer
from tests import forked_scripts
from tests.helpers import make_spm_model

# The library's child processes fork from the worker's script server too (tests/forked_scripts.py).
child_process.start_python = forked_scripts.start_library_child
# The tests, and the programs forked for them, trace without Grappler's remapper (its fusions change no result).
forked_scripts.trace_without_remapping()
# What the imports left is exempt from the garbage collector, whose collections come rarer (the forks' too).
forked_scripts.collect_garbage_rarely()

# `ALBERT_TF_TEST_CPU_PROFILE=FILE make test` appends a JSON line per test to FILE: its wall seconds, those of its
# fixtures' setup, the CPU seconds of its worker, the processes it started and the scripts forked for it, its worker
# and when it started (docs/layout.md, "The tests").
CPU_PROFILE = os.environ.get("ALBERT_TF_TEST_CPU_PROFILE")


def _cpu_seconds():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
            + forked_scripts.forked_cpu_seconds())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    if not CPU_PROFILE:
        yield
        return
    wall = time.monotonic()
    yield
    item.setup_wall_seconds = time.monotonic() - wall


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not CPU_PROFILE:
        yield
        return
    cpu, wall, started = _cpu_seconds(), time.monotonic(), time.time()
    yield
    line = json.dumps({"test": item.nodeid, "cpu_seconds": round(_cpu_seconds() - cpu, 2),
                       "wall_seconds": round(time.monotonic() - wall, 2),
                       "setup_wall_seconds": round(getattr(item, "setup_wall_seconds", 0.0), 2),
                       "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "started": round(started, 2)})
    with open(CPU_PROFILE, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@pytest.fixture(autouse=True)
def _float32_policy():
    """Every test starts (and ends) under float32 so a mixed-precision test cannot leak."""
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(autouse=True)
def _absl_logger_level():
    """absl's logger inherits the root logger's level in every test (what caplog.at_level sets): TensorFlow's
    SavedModel saving (AutoTrackable._trackable_children) pins it to the level it inherited, WARNING, which would
    hide absl's INFO lines from a later test."""
    absl_logger = logging.getLogger("absl")
    absl_logger.setLevel(logging.NOTSET)
    yield
    absl_logger.setLevel(logging.NOTSET)


@pytest.fixture(scope="session")
def spm_model_file(tmp_path_factory):
    """helpers.make_spm_model's SentencePiece model (vocabulary 120), trained once per session."""
    return make_spm_model(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture(scope="session")
def tokenizer(spm_model_file):
    """An uncased AlbertTokenizer of `spm_model_file`."""
    return AlbertTokenizer(spm_model_file=spm_model_file)


@pytest.fixture
def ram_root():
    """A fresh directory on tf.io.gfile's in-memory filesystem, standing in for gs://; removed after the test."""
    root = f"ram://test_{os.getpid()}_{time.time_ns()}"
    tf.io.gfile.makedirs(root)
    yield root
    tf.io.gfile.rmtree(root)
