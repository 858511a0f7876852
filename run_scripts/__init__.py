"""absl entry points, one per job: `python -m run_scripts.<name> --flags` from the repository root.

Entry points only: TensorFlow's C++ start-up chatter (oneDNN, the CUDA probe on a machine without a GPU, absl's
"before InitializeLog" warning; six or seven lines) stays out of the user's terminal, so that the first line a user
reads is the run's own, or its one-line error. TensorFlow's own level variable does not reach the lines its
import prints, so while `tensorflow` is first imported its C++ side writes to /dev/null; afterwards
TF_CPP_MIN_LOG_LEVEL=3 keeps the CUDA probe quiet. A user who sets TF_CPP_MIN_LOG_LEVEL, or asks for
`--verbosity` (`-v`) on the command line, sees everything as before.
"""
import contextlib
import importlib.util
import os
import sys
import types

_VERBOSITY_FLAGS = ("--verbosity", "-v", "--v")


def _asks_for_logs(argv) -> bool:
    return "TF_CPP_MIN_LOG_LEVEL" in os.environ or any(
        argument == flag or argument.startswith(flag + "=") for argument in argv for flag in _VERBOSITY_FLAGS)


@contextlib.contextmanager
def stderr_to_devnull():
    """File descriptor 2 (what C++ writes to) points at /dev/null inside; Python's own sys.stderr is flushed first
    and sees the old descriptor again afterwards, so an import error's traceback still shows."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _find_tensorflow_quietly(name, path=None, target=None):
    """A meta-path finder's find_spec: finds `tensorflow` the usual way, once, and has its module run with
    stderr_to_devnull; scripts that never import TensorFlow never pay for it."""
    if name != "tensorflow":
        return None
    sys.meta_path.remove(_QUIET_TENSORFLOW_IMPORT)
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.loader is not None:
        exec_module = spec.loader.exec_module

        def exec_module_quietly(module):
            with stderr_to_devnull():
                exec_module(module)

        spec.loader.exec_module = exec_module_quietly
    return spec


_QUIET_TENSORFLOW_IMPORT = types.SimpleNamespace(find_spec=_find_tensorflow_quietly)

if not _asks_for_logs(sys.argv[1:]):
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if "tensorflow" not in sys.modules:
        sys.meta_path.insert(0, _QUIET_TENSORFLOW_IMPORT)
