"""pyproject.toml: `pip install .` gives packages that run as `python -m run_scripts.<name>` from anywhere, and
Beam's --setup_file stages them for its workers."""
import glob
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib

import pytest

from tests.helpers import REPO_ROOT, run_python

_SOURCE_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "requirements.txt",
                 "requirements-beam.txt", "requirements-onnx.txt", "requirements-hub.txt", "albert_tf", "data_gen",
                 "run_scripts", "peers")
# Where `make install` puts what the library's modules import outside site-packages (scipy for the report), and the
# extras, as tests/conftest.py lends them to the tests.
_EXTRA_PACKAGES = [os.path.join(REPO_ROOT, ".venv", name) for name in ("test-oracles", "report", "beam", "onnx")]
PEER_FRAMEWORKS = ("keras_hub", "transformers", "torch")
BEAM_PACKAGES = os.path.join(REPO_ROOT, ".venv", "beam")


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
    source = _copy_of_the_sources(tmp_path)
    installed = _run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                     str(source), cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = _run(python, "-c", "import run_scripts, data_gen, albert_tf; print(run_scripts.__file__)", cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip().startswith(str(environment)), found.stdout
    # Every subpackage is installed; the code that measures the peers (peers/) is not.
    subpackages = ("data_gen.pretraining", "data_gen.readers", "data_gen.evaluation", "albert_tf.experiments.datasets")
    specs = _run(python, "-c", "import importlib.util, json, sys\n"
                 "specs = [importlib.util.find_spec(name) for name in sys.argv[1:]]\n"
                 "print(json.dumps([spec and spec.origin for spec in specs]))", *subpackages, "peers", cwd=elsewhere)
    assert specs.returncode == 0, specs.stderr
    origins = json.loads(specs.stdout)
    assert all(origin.startswith(str(environment)) for origin in origins[:-1]) and origins[-1] is None, origins
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


def _copy_of_the_sources(tmp_path):
    """What an sdist holds, copied, so that a build leaves nothing (build/, *.egg-info) in the checkout."""
    source = tmp_path / "source"
    source.mkdir()
    for name in _SOURCE_FILES:
        copy = shutil.copytree if os.path.isdir(os.path.join(REPO_ROOT, name)) else shutil.copy
        copy(os.path.join(REPO_ROOT, name), source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                                               if copy is shutil.copytree else {}))
    return source


@pytest.mark.slow
def test_beams_setup_file_staging_builds_the_sdist_its_workers_install(tmp_path):
    """Beam's own staging code (what DataflowRunner runs for setup_file=.../setup.py), without the `build` package;
    the sdist installs and gives a worker what it imports, without TensorFlow."""
    if not os.path.isdir(os.path.join(BEAM_PACKAGES, "apache_beam")):
        pytest.skip("the beam extra is not installed: run `make beam`")
    source = _copy_of_the_sources(tmp_path)
    staging = tmp_path / "staging"
    staging.mkdir()
    stage = ("import sys\n"
             "from apache_beam.runners.portability.stager import Stager\n"
             "print(Stager._build_setup_package(sys.argv[1], sys.argv[2]))\n")
    staged = subprocess.run([sys.executable, "-c", stage, str(source / "setup.py"), str(staging)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": BEAM_PACKAGES})
    assert staged.returncode == 0, staged.stderr[-3000:]
    sdist = staged.stdout.strip().splitlines()[-1]
    assert glob.glob(str(staging / "*.tar.gz")) == [sdist]
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in ("setup.py", "pyproject.toml", "requirements.txt", "requirements-beam.txt", "requirements-onnx.txt",
                   "albert_tf/__init__.py",
                   "albert_tf/tokenization.py", "data_gen/file_io.py", "data_gen/pretraining/beam_pipeline.py",
                   "data_gen/pretraining/create_pretraining_data.py", "data_gen/pretraining/instances.py",
                   "data_gen/pretraining/tfrecord_framing.py", "data_gen/readers/glue.py",
                   "data_gen/evaluation/squad_evaluation.py", "albert_tf/experiments/datasets/sentence_pair_eval.py",
                   "run_scripts/create_pretraining_data.py"):
        assert needed in names, f"{needed} is missing from the sdist {sdist}"
    assert not [name for name in names if name.startswith(("tests/", "peers/"))]

    target = tmp_path / "worker"
    installed = _run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                     "--no-build-isolation", "--target", str(target), sdist, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    worker = ("import sys, data_gen.pretraining.beam_pipeline, data_gen.pretraining.tfrecord_framing\n"
              "print(data_gen.pretraining.beam_pipeline.__file__, 'tensorflow' in sys.modules)\n")
    worker_path = os.pathsep.join([str(target), BEAM_PACKAGES])
    imported = subprocess.run([sys.executable, "-c", worker], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": worker_path})
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert imported.stdout.split() == [str(target / "data_gen" / "pretraining" / "beam_pipeline.py"), "False"]


def test_the_hub_extra_installs_what_loading_a_tf_hub_module_needs_at_the_tested_versions():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as handle:
        extras = tomllib.load(handle)["tool"]["setuptools"]["dynamic"]["optional-dependencies"]
    assert extras["hub"] == {"file": ["requirements-hub.txt"]}

    def pins(name):
        with open(os.path.join(REPO_ROOT, name), encoding="utf-8") as handle:
            return {line.strip() for line in handle if line.strip() and not line.startswith("#")}

    assert pins("requirements-hub.txt") == {"tensorflow-hub==0.16.1", "tf-keras==2.21.0"}
    assert pins("requirements-hub.txt") <= pins("requirements-dev.txt")


@pytest.mark.slow
def test_the_installed_packages_import_no_peer_framework():
    """Every module of albert_tf and data_gen, imported in a fresh process, leaves keras-hub, transformers and PyTorch
    unimported: only peers/, which is not installed, measures them."""
    code = ("import importlib, json, pkgutil, sys\n"
            "sys.path.extend(json.loads(sys.argv[1]))\n"
            "import albert_tf, data_gen\n"
            "names = [module.name for package in (albert_tf, data_gen)\n"
            "         for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.')]\n"
            "for name in names:\n"
            "    importlib.import_module(name)\n"
            "peer_frameworks = sorted(set(json.loads(sys.argv[2])) & set(sys.modules))\n"
            "print(json.dumps({'modules': names, 'peer_frameworks': peer_frameworks}))\n")
    result = run_python("-c", code, json.dumps([path for path in _EXTRA_PACKAGES if os.path.isdir(path)]),
                        json.dumps(PEER_FRAMEWORKS), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    imported = json.loads(result.stdout.splitlines()[-1])
    assert {"data_gen.pretraining.beam_pipeline", "albert_tf.benchmarking.peer_comparison",
            "albert_tf.checkpoints.conversion", "albert_tf.checkpoints.hf_names"} <= set(imported["modules"])
    assert imported["peer_frameworks"] == []
