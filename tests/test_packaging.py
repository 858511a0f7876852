"""pyproject.toml: `pip install .` gives packages that run as `python -m run_scripts.<name>` from anywhere."""
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib

import pytest

from tests.helpers import REPO_ROOT

_SOURCE_FILES = ("pyproject.toml", "MANIFEST.in", "README.md", "requirements.txt", "requirements-beam.txt",
                 "albert_tf", "data_gen", "run_scripts")


def _run(*arguments, cwd):
    return subprocess.run(list(arguments), cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ""})


@pytest.mark.slow
def test_installed_package_runs_a_script_from_another_directory(tmp_path):
    environment = tmp_path / "venv"
    # Without its own pip and setuptools (ensurepip's are older than the pins): the lent ones build and install.
    created = _run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(environment),
                   cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    python = str(environment / "bin" / "python")
    # A venv made from a venv sees the base interpreter's site-packages, not this environment's: one .pth line
    # lends it this environment's packages (TensorFlow, absl, pip, setuptools), after its own.
    site_packages = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path)
    with open(os.path.join(site_packages.stdout.strip(), "albert_tf_test_dependencies.pth"), "w") as handle:
        handle.write(sysconfig.get_paths()["purelib"] + "\n")
    # From a copy of what an sdist holds, so that the build leaves nothing (build/, *.egg-info) in the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in _SOURCE_FILES:
        copy = shutil.copytree if os.path.isdir(os.path.join(REPO_ROOT, name)) else shutil.copy
        copy(os.path.join(REPO_ROOT, name), source / name)
    installed = _run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                     str(source), cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = _run(python, "-c", "import run_scripts, data_gen, albert_tf; print(run_scripts.__file__)", cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip().startswith(str(environment)), found.stdout
    for command in ([python, "-m", "run_scripts.create_pretraining_data"],
                    [str(environment / "bin" / "albert-create-pretraining-data")]):
        helped = _run(*command, "--help", cwd=elsewhere)
        # absl's --help prints the flags and exits with status 1.
        assert helped.returncode == 1, helped.stderr
        for flag in ("--input_file", "--output_file", "--spm_model_file", "--dupe_factor", "--beam_pipeline_options"):
            assert flag in helped.stdout, f"{flag} is missing from {command[-1]} --help:\n{helped.stdout}"
    without_flags = _run(str(environment / "bin" / "albert-create-pretraining-data"), cwd=elsewhere)
    # A usage error, as the module gives it: one line, status 2.
    assert without_flags.returncode == 2 and without_flags.stderr.startswith("error: flag --output_file"), (
        without_flags.stderr)


def test_every_script_has_its_console_command():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as handle:
        commands = tomllib.load(handle)["project"]["scripts"]
    scripts_directory = os.path.join(REPO_ROOT, "run_scripts")
    scripts = []
    for name in sorted(name for name in os.listdir(scripts_directory) if name.endswith(".py")):
        with open(os.path.join(scripts_directory, name), encoding="utf-8") as handle:
            source = handle.read()
        if '\nif __name__ == "__main__":\n' in source and source.endswith("\n    entry.run(main)\n"):
            scripts.append(name[:-len(".py")])
    assert "create_pretraining_data" in scripts
    assert commands == {f"albert-{name.replace('_', '-')}": "run_scripts.entry:run_console_script" for name in scripts}
