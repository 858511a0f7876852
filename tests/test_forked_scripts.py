"""tests/forked_scripts.py: which programs fork from the worker's server and which start fresh."""
import subprocess

from tests import forked_scripts
from tests.helpers import REPO_ROOT


def test_a_first_program_with_a_start_up_variable_of_its_own_leaves_the_server_to_the_others(monkeypatch):
    monkeypatch.setattr(forked_scripts, "_server", None)
    arguments = ["-m", "run_scripts.count_params", "--preset=albert-base"]
    first = forked_scripts.popen(arguments, env=forked_scripts.script_environment(PYTHONPATH=REPO_ROOT))
    second = forked_scripts.popen(arguments, env=forked_scripts.script_environment())
    try:
        outputs = [process.communicate(timeout=300) for process in (first, second)]
    finally:
        forked_scripts._server.close()
    assert isinstance(first, subprocess.Popen) and isinstance(second, forked_scripts.ForkedProcess)
    assert first.returncode == second.returncode == 0 and outputs[0][0] == outputs[1][0] != ""
