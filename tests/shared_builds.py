"""A module fixture's costly files built once per test run, however many test workers run the module's tests.

pytest-xdist's work stealing splits a module's tests between workers, and each worker then builds the module's
fixtures itself: the ONNX exports (about 20 CPU-seconds each) were built by two or three workers in every
measured run. `build_once` builds into a directory every worker of the run sees, under a lock, and gives each
caller a copy of its own, so that a test that writes beside the files (optimize_onnx(overwrite=True)) cannot
disturb another worker's.
"""
import fcntl
import json
import os
import shutil
from typing import Callable, Dict

_DONE = "build_once.json"


def run_root(tmp_path_factory) -> str:
    """The temporary directory of this test run that every worker shares (one worker alone: its own)."""
    base = str(tmp_path_factory.getbasetemp())
    return os.path.dirname(base) if os.environ.get("PYTEST_XDIST_WORKER") else base


def _rebased(value, old: str, new: str):
    if isinstance(value, str) and (value == old or value.startswith(old + os.sep)):
        return new + value[len(old):]
    if isinstance(value, dict):
        return {key: _rebased(item, old, new) for key, item in value.items()}
    return value


def build_once(root: str, name: str, build: Callable[[str], Dict[str, object]], copy_to: str) -> Dict[str, object]:
    """What `build(directory)` returned (JSON values; paths inside the directory) for the first caller of `name`
    under `root`, with its directory copied to `copy_to` and the paths rebased onto the copy. A build that fails
    records nothing: the next caller builds again, from an empty directory."""
    shared = os.path.join(root, f"shared-{name}")
    with open(os.path.join(root, f"shared-{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = os.path.join(shared, _DONE)
        if not os.path.exists(done):
            shutil.rmtree(shared, ignore_errors=True)
            os.makedirs(shared)
            record = build(shared)
            with open(done, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
        with open(done, encoding="utf-8") as handle:
            record = json.load(handle)
    shutil.copytree(shared, copy_to, ignore=shutil.ignore_patterns(_DONE))
    return _rebased(record, shared, copy_to)
