"""tests/forked_scripts.py: which programs fork from the worker's server and which start fresh, and where the
library's own child processes come from."""
import json
import subprocess
import time

from albert_tf.benchmarking.child_process import run_python_child
from tests import forked_scripts
from tests._child_probe import MARKER
from tests.helpers import REPO_ROOT


def test_a_first_program_with_a_start_up_variable_of_its_own_leaves_the_server_to_the_others(monkeypatch, tmp_path):
    monkeypatch.setattr(forked_scripts, "_server", None)
    arguments = ["-m", "run_scripts.count_params", "--preset=albert-base"]
    first = forked_scripts.popen(arguments, env=forked_scripts.script_environment(PYTHONPATH=str(tmp_path)))
    second = forked_scripts.popen(arguments, env=forked_scripts.script_environment(PYTHONPATH=REPO_ROOT))
    try:
        outputs = [process.communicate(timeout=300) for process in (first, second)]
    finally:
        forked_scripts._server.close()
    assert isinstance(first, subprocess.Popen) and isinstance(second, forked_scripts.ForkedProcess)
    assert first.returncode == second.returncode == 0 and outputs[0][0] == outputs[1][0] != ""


def test_a_peer_program_and_a_code_string_start_fresh():
    server = forked_scripts._Server(None, forked_scripts.script_environment())
    environment = forked_scripts.script_environment()
    assert server.accepts(["-m", "run_scripts.benchmark"], environment)
    assert not server.accepts(["-m", "peers.serving", "run"], environment)
    assert not server.accepts(["-c", "print(1)"], environment)


def test_the_library_children_of_a_test_and_of_a_forked_program_fork_from_the_server():
    in_test = run_python_child(["-m", "tests._child_probe", "child", "0"], MARKER, "The probe failed").record
    server_pid = forked_scripts._server._process.pid
    from_server = {"child_ppid": server_pid, "tensorflow_preloaded": True, "grappler_remapping": False,
                   "garbage_collection": {"thresholds": list(forked_scripts.GARBAGE_COLLECTION_THRESHOLDS),
                                          "frozen": True}}
    assert in_test == from_server

    cpu_before = forked_scripts.forked_cpu_seconds()
    result = forked_scripts.run(["-m", "tests._child_probe", "0.5"], env=forked_scripts.script_environment(),
                                timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    in_program = json.loads(result.stdout.splitlines()[-1][len(MARKER):])
    assert in_program == dict(from_server, pid=in_program["pid"], ppid=server_pid)
    # The program's child is the server's: its CPU time reaches the worker's count all the same.
    deadline = time.monotonic() + 10
    while forked_scripts.forked_cpu_seconds() - cpu_before < 0.5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert forked_scripts.forked_cpu_seconds() - cpu_before >= 0.5
