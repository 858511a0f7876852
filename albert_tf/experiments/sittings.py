"""What an arm's training cost, sitting by sitting: wall time, steps/s, the machine, the compile path and what
else ran on the machine meanwhile.

A training may be stopped and resumed (SIGTERM saves a checkpoint; a rerun resumes from it), so it can run in
several sittings, on one machine or, when its checkpoints travel, on several. Each sitting appends one record to
the arm directory's `sittings.json` when it ends, however it ends; the arm's result keeps them all. The machine's
busy CPU time beside this process's own tells a slow sitting caused by other work (a test suite, a second
training) from a slow machine.

Example:
>>> import tempfile
>>> directory = tempfile.mkdtemp()
>>> with sitting(directory, steps_trained=lambda: 0, compile_path=lambda: None):
...     pass
>>> [record["steps"] for record in read_sittings(directory)]
[[0, 0]]
>>> sorted(machine())
['cores', 'cpu_bfloat16_units', 'cpu_model', 'tensorflow']
"""

import contextlib
import datetime
import os
import time
from typing import Callable, Dict, Iterator, List, Mapping, Optional

import tensorflow as tf

from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.training.bfloat16_support import cpu_bfloat16_units
from albert_tf.training.compile_choice import JitCompileChoice, cpu_model_name

SITTINGS_NAME = "sittings.json"
_PROC_STAT = "/proc/stat"


def machine() -> Dict[str, object]:
    """The CPU (model name with family and model), whether it has bfloat16 units, its core count and the
    TensorFlow version."""
    return {"cpu_model": cpu_model_name(), "cpu_bfloat16_units": cpu_bfloat16_units(), "cores": os.cpu_count(),
            "tensorflow": tf.__version__}


def machine_busy_seconds(path: str = _PROC_STAT) -> Optional[float]:
    """CPU seconds every process of the machine has used since boot (all cores, idle and I/O wait excluded), from
    /proc/stat; None where it is absent."""
    try:
        with open(path, encoding="ascii") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
    except OSError:
        return None
    idle, iowait = fields[3], fields[4]
    # guest and guest_nice (fields 8 and 9) are already counted in user and nice.
    return (sum(fields[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def _process_seconds() -> float:
    times = os.times()
    return times.user + times.system


def read_sittings(directory: str) -> List[Dict[str, object]]:
    path = os.path.join(directory, SITTINGS_NAME)
    return read_json(path) if os.path.exists(path) else []


@contextlib.contextmanager
def sitting(directory: str, steps_trained: Callable[[], int],
            compile_path: Callable[[], Optional[JitCompileChoice]]) -> Iterator[None]:
    """Measures the training inside as one sitting and appends its record to `directory`/sittings.json on the way
    out, whether the training finished or was stopped: the steps it started and ended at (`steps_trained()`, the
    step of the directory's last checkpoint), its wall seconds and steps/s, this process's CPU seconds and the
    other processes' (the machine's busy seconds less this process's), the compile path the training took
    (`compile_path()`) and the machine."""
    first_step = steps_trained()
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    wall, process, busy = time.time(), _process_seconds(), machine_busy_seconds()
    try:
        yield
    finally:
        seconds = time.time() - wall
        last_step = steps_trained()
        own = _process_seconds() - process
        busy_now = machine_busy_seconds()
        choice = compile_path()
        record = {"started_at": started_at, "steps": [first_step, last_step], "seconds": round(seconds, 1),
                  "steps_per_second": round((last_step - first_step) / seconds, 4) if seconds > 0 else None,
                  "process_cpu_seconds": round(own, 1),
                  "other_processes_cpu_seconds": (None if busy is None or busy_now is None
                                                  else round(max(0.0, busy_now - busy - own), 1)),
                  "compile_path": choice.describe() if choice is not None else None,
                  "machine": machine()}
        write_json(os.path.join(directory, SITTINGS_NAME), read_sittings(directory) + [record])


def training_record(sittings: List[Mapping[str, object]]) -> Dict[str, object]:
    """An arm's training over its sittings: their records, the total wall seconds, the steps trained and the
    steps/s over all of them.

    Example:
    >>> training_record([{"steps": [0, 600], "seconds": 200.0}, {"steps": [500, 2000], "seconds": 500.0}])
    {'sittings': [...], 'seconds': 700.0, 'steps_trained': 2100, 'steps_per_second': 3.0}
    """
    seconds = sum(float(record["seconds"]) for record in sittings)
    steps = sum(record["steps"][1] - record["steps"][0] for record in sittings)
    return {"sittings": list(sittings), "seconds": round(seconds, 1), "steps_trained": steps,
            "steps_per_second": round(steps / seconds, 4) if seconds > 0 else None}
