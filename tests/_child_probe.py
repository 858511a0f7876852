"""A program that starts a child as the library does (albert_tf.benchmarking.child_process.run_python_child) and
prints what the child saw: run as a test program, it shows where the library's children come from.

`python -m tests._child_probe` prints `PROBE {...}` with its own pid and parent, and its child's parent, whether
TensorFlow was imported before the child's first line and, if it was, whether Grappler's remapper is on, the
garbage collector's thresholds and whether it has frozen objects;
`python -m tests._child_probe child SECONDS` is that child, which also spends SECONDS of CPU time.
"""
import gc
import json
import os
import sys
import time

MARKER = "PROBE "


def _child(cpu_seconds):
    tensorflow_preloaded = "tensorflow" in sys.modules
    started = time.process_time()
    while time.process_time() - started < cpu_seconds:
        pass
    record = {"child_ppid": os.getppid(), "tensorflow_preloaded": tensorflow_preloaded}
    if tensorflow_preloaded:
        record["grappler_remapping"] = sys.modules["tensorflow"].config.optimizer.get_experimental_options().get(
            "remapping")
        record["garbage_collection"] = {"thresholds": list(gc.get_threshold()), "frozen": gc.get_freeze_count() > 0}
    print(MARKER + json.dumps(record))


def _program(cpu_seconds):
    from albert_tf.benchmarking.child_process import run_python_child
    record = run_python_child(["-m", "tests._child_probe", "child", str(cpu_seconds)], MARKER,
                              "The probe's child failed").record
    print(MARKER + json.dumps(dict(record, pid=os.getpid(), ppid=os.getppid())))


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        _child(float(sys.argv[2]))
    else:
        _program(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
