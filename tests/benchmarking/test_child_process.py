"""The one child-process runner behind the isolated model workloads and create_pretraining_data's measurement."""
import builtins
import subprocess
import time

import psutil
import pytest

from albert_tf.benchmarking import child_process
from albert_tf.benchmarking.child_process import REPOSITORY_ROOT, run_python_child
from tests.helpers import REPO_ROOT

pytestmark = pytest.mark.slow  # every test but the last starts a child process


def test_the_last_marked_line_is_the_record_and_the_child_imports_this_checkout():
    code = ("import os, json, albert_tf\n"
            "print('RESULT {\"first\": 1}')\n"
            "print('unmarked')\n"
            "print('RESULT ' + json.dumps({'cwd': os.getcwd(), 'package': albert_tf.__file__}))\n")
    run = run_python_child(["-c", code], "RESULT ", "unused")
    assert str(REPO_ROOT) == REPOSITORY_ROOT
    assert run.record == {"cwd": REPOSITORY_ROOT, "package": f"{REPOSITORY_ROOT}/albert_tf/__init__.py"}
    assert run.peak_pss_bytes is None and run.peak_rss_bytes is None


def test_the_parent_hands_back_its_library_pages_before_the_child_starts(monkeypatch):
    events = []
    monkeypatch.setattr(child_process, "release_library_pages", lambda: events.append("released"))
    record = run_python_child(["-c", "print('RESULT {\"started\": true}')"], "RESULT ", "unused").record
    events.append(record)
    assert events == ["released", {"started": True}]


@pytest.mark.parametrize("code", ["import sys; print('RESULT {}'); sys.stderr.write('it broke'); sys.exit(3)",
                                  "import sys; sys.stderr.write('it broke')"])
def test_a_failed_child_or_one_without_a_record_names_the_failure_and_shows_its_stderr(code):
    exit_code = 3 if "exit" in code else 0
    with pytest.raises(RuntimeError, match=rf"^The measurement failed \(exit {exit_code}\):\nit broke$"):
        run_python_child(["-c", code], "RESULT ", "The measurement failed")


def test_a_child_a_signal_killed_names_the_signal_as_the_out_of_memory_killer_would_leave_it():
    code = "import os, signal, sys; sys.stderr.write('allocating'); sys.stderr.flush(); os.kill(os.getpid(), 9)"
    with pytest.raises(RuntimeError, match=r"^The measurement failed \(killed by SIGKILL\):\nallocating$"):
        run_python_child(["-c", code], "RESULT ", "The measurement failed")


def test_a_child_past_its_timeout_is_killed():
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_python_child(["-c", "import time; time.sleep(60)"], "RESULT ", "unused", timeout_seconds=1)
    assert time.monotonic() - start < 30


def test_sampled_memory_counts_the_child_and_its_descendants_and_a_talkative_child_does_not_block():
    # The child holds 150 MB and starts a grandchild holding 250 MB; both write more than a pipe buffer holds.
    code = ("import subprocess, sys, time\n"
            "held = b'x' * (150 * 10**6)\n"
            "grandchild = subprocess.Popen([sys.executable, '-c', "
            "\"import sys, time; held = b'y' * (250 * 10**6); sys.stderr.write('z' * 10**6); time.sleep(1.5)\"])\n"
            "sys.stdout.write('noise\\n' * 200000)\n"
            "time.sleep(1.5)\n"
            "grandchild.wait()\n"
            "print('RESULT {\"done\": true}')\n")
    run = run_python_child(["-c", code], "RESULT ", "unused", timeout_seconds=60, memory_poll_seconds=0.1)
    assert run.record == {"done": True}
    assert 150e6 < run.peak_rss_bytes < 250e6
    assert 250e6 < run.peak_descendant_rss_bytes < 350e6
    assert run.peak_pss_bytes > 350e6
    # The held bytes are anonymous pages, which no other process on the machine shares.
    assert 350e6 < run.peak_anonymous_bytes <= run.peak_pss_bytes


def test_one_reading_gives_a_process_rss_pss_and_anonymous_pss_of_the_same_moment(monkeypatch):
    process = psutil.Process()
    held = b"x" * (50 * 10**6)
    memory = child_process._memory(process)
    assert 50e6 < memory.anonymous <= memory.pss <= memory.rss
    del held
    # Where /proc/PID/smaps_rollup cannot be read: psutil's reading, without the anonymous size.
    real_open = builtins.open

    def open_without_rollup(path, *arguments, **keywords):
        if str(path).endswith("/smaps_rollup"):
            raise FileNotFoundError(path)
        return real_open(path, *arguments, **keywords)

    monkeypatch.setattr(builtins, "open", open_without_rollup)
    fallback = child_process._memory(process)
    assert fallback.anonymous is None and 0 < fallback.pss <= fallback.rss
