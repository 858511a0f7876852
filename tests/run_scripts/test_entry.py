"""run_scripts.entry: a user error ends a script with one `error:` line, any other error with its traceback; every
script starts and prints its help."""
import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest
from absl import app

from albert_tf.config import load_config
from run_scripts import entry
from tests.helpers import REPO_ROOT, run_python, run_script, tiny_config_values, user_environment

GLUE_TASK_ERROR = ("error: Unknown GLUE task 'FOO'; allowed: cola, sst-2, mrpc, sts-b, qqp, qnli, rte, wnli, mnli, "
                   "ax.")


def _raised(source, filename):
    """The exception that `source`, compiled as if it were the file `filename`, raises."""
    with pytest.raises(Exception) as raised:
        exec(compile(source, filename, "exec"), {})
    return raised.value


def _assert_one_error_line(completed, line, status):
    assert completed.returncode == status, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr
    assert completed.stderr.splitlines()[-1] == line
    assert [text for text in completed.stderr.splitlines() if text.startswith("error:")] == [line]


def _assert_traceback(completed, last_line, status):
    assert completed.returncode == status, completed.stderr[-3000:]
    assert "Traceback (most recent call last):" in completed.stderr
    assert completed.stderr.splitlines()[-1] == last_line
    assert not [text for text in completed.stderr.splitlines() if text.startswith("error:")]


# ---- which errors are the user's ------------------------------------------------------------------------

def test_a_value_error_the_project_raises_is_a_user_error():
    with pytest.raises(ValueError) as raised:
        load_config()
    assert entry.is_user_error(raised.value)
    project_file = os.path.join(REPO_ROOT, "data_gen", "reader.py")
    assert entry.is_user_error(_raised("raise ValueError('Input file x is empty.')", project_file))
    assert entry.is_user_error(_raised("raise FileNotFoundError('No file matches x.')", project_file))
    assert entry.is_user_error(_raised("open('/nonexistent/albert_tf/x.txt')", project_file))


def test_usage_errors_are_the_users_wherever_they_are_raised():
    assert entry.is_user_error(app.UsageError("Give --x."))
    with pytest.raises(app.UsageError) as raised:
        exec(compile("raise UsageError('Give --x.')", "/elsewhere/script.py", "exec"), {"UsageError": app.UsageError})
    assert entry.is_user_error(raised.value)


def test_python_and_library_errors_are_not_user_errors():
    project_file = os.path.join(REPO_ROOT, "albert_tf", "module.py")
    # ValueErrors that Python's builtins raise in project code: a defect, or a sentence without the input's context.
    assert not entry.is_user_error(_raised("first, second = [1, 2, 3]", project_file))
    assert not entry.is_user_error(_raised("int('x')", project_file))
    # Raised outside the project (numpy, TensorFlow, the standard library).
    assert not entry.is_user_error(_raised("raise ValueError('bad shape')", "/site-packages/numpy/core/x.py"))
    assert not entry.is_user_error(_raised("import json; json.loads('{')", project_file))
    # Other types, even when the project raises them.
    assert not entry.is_user_error(_raised("raise KeyError('logits')", project_file))
    assert not entry.is_user_error(_raised("raise TypeError('Expected a tf.Variable')", project_file))
    assert not entry.is_user_error(ValueError("never raised"))


# ---- the scripts --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_run_glue_with_an_unknown_task_prints_one_line_or_the_traceback_on_request(tmp_path):
    flags = ("--task_name=FOO", f"--output_dir={tmp_path}")
    _assert_one_error_line(run_script("run_glue", *flags), GLUE_TASK_ERROR, 1)
    _assert_traceback(run_script("run_glue", *flags, ALBERT_TF_TRACEBACK="1"), "ValueError" + GLUE_TASK_ERROR[5:], 1)


def _run_without_log_settings(*arguments):
    """`python -m run_scripts.run_classifier *arguments` with the environment a user has: no TF_CPP_MIN_LOG_LEVEL."""
    return subprocess.run([sys.executable, "-m", "run_scripts.run_classifier", *arguments], cwd=REPO_ROOT,
                          env=user_environment(), capture_output=True, text=True, timeout=600)


def test_a_bad_input_after_tensorflow_starts_is_the_only_line_on_stderr(tmp_path):
    """TensorFlow's start-up lines (oneDNN, the CUDA probe, absl's InitializeLog warning) are not printed before a
    user's error, unless the user asks for logs (--verbosity, or TF_CPP_MIN_LOG_LEVEL set)."""
    flags = (f"--output_dir={tmp_path}", "--do_train", f"--train_file={tmp_path}/train.tsv", "--text_field=text",
             "--label_field=label", "--preset=albert-base", f"--spm_model_file={tmp_path}/absent.model")
    line = (f"error: Cannot read SentencePiece model '{tmp_path}/absent.model': [Errno 2] No such file or directory: "
            f"'{tmp_path}/absent.model'.")
    completed = _run_without_log_settings(*flags)
    assert completed.returncode == 1 and completed.stderr.splitlines() == [line], completed.stderr[-3000:]
    verbose = _run_without_log_settings(*flags, "--verbosity=0")
    assert verbose.stderr.splitlines()[-1] == line and len(verbose.stderr.splitlines()) > 1


@pytest.mark.slow
def test_create_pretraining_data_with_a_pattern_that_matches_no_file(tmp_path, spm_model_file):
    pattern = str(tmp_path / "missing" / "*.txt")
    flags = (f"--input_file={pattern}", f"--output_file={tmp_path / 'out.tfrecord'}",
             f"--spm_model_file={spm_model_file}")
    line = f"error: --input_file: no file matches {pattern!r}."
    _assert_one_error_line(run_script("create_pretraining_data", *flags), line, 1)
    _assert_traceback(run_script("create_pretraining_data", *flags, "--verbosity=1"),
                      "FileNotFoundError" + line[5:], 1)


@pytest.mark.slow
def test_run_pretraining_with_a_misspelled_config_key(tmp_path):
    config_file = tmp_path / "albert_config.json"
    values = tiny_config_values()
    values["num_hiden_layers"] = values.pop("num_hidden_layers")
    config_file.write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"Unknown key\(s\) \['num_hiden_layers'\]") as raised:
        load_config(str(config_file))
    completed = run_script("run_pretraining", f"--input_file={tmp_path}/x", f"--output_dir={tmp_path / 'run'}",
                           f"--albert_config_file={config_file}")
    _assert_one_error_line(completed, f"error: {raised.value}", 1)
    missing = tmp_path / "missing_config.json"
    completed = run_script("run_pretraining", f"--input_file={tmp_path}/x", f"--output_dir={tmp_path / 'run'}",
                           f"--albert_config_file={missing}")
    _assert_one_error_line(completed, f"error: The config file {missing} does not exist.", 1)


@pytest.mark.slow
def test_usage_errors_and_bad_flag_values_exit_with_status_2(tmp_path):
    _assert_one_error_line(run_script("run_pretraining", "--input_file=x", f"--output_dir={tmp_path}", "--nodo_train"),
                           "error: At least one of --do_train or --do_eval must be set.", 2)
    _assert_one_error_line(run_script("run_glue", "--task_name=MRPC", f"--output_dir={tmp_path}",
                                      "--max_seq_length=abc"),
                           "error: flag --max_seq_length=abc: invalid literal for int() with base 10: 'abc'", 2)


@pytest.mark.slow
def test_an_error_that_is_not_the_users_keeps_its_traceback():
    completed = run_python("-c", "import numpy\nfrom run_scripts import entry\n"
                                 "entry.run(lambda argv: numpy.zeros(3).reshape(2))")
    _assert_traceback(completed, "ValueError: cannot reshape array of size 3 into shape (2,)", 1)


@pytest.mark.parametrize("command", ["albert-no-such-script", "albert-_private", "other-tool", "albert-"])
def test_console_command_that_names_no_script_is_refused(monkeypatch, command):
    monkeypatch.setattr("sys.argv", [f"/venv/bin/{command}"])
    with pytest.raises(SystemExit, match=f"error: the command '{command}' names no script of run_scripts"):
        entry.run_console_script()


# ---- every script starts ------------------------------------------------------------------------------------

SCRIPTS_DIR = pathlib.Path(REPO_ROOT) / "run_scripts"
SCRIPTS = sorted(path.stem for path in SCRIPTS_DIR.glob("*.py")
                 if '\nif __name__ == "__main__":' in path.read_text(encoding="utf-8"))


def _docstring_first_line(script):
    """The first line of the script's docstring, read without importing it (that would define its flags here)."""
    source = (SCRIPTS_DIR / f"{script}.py").read_text(encoding="utf-8")
    return ast.get_docstring(ast.parse(source)).splitlines()[0]


def test_every_entry_point_is_a_script():
    assert len(SCRIPTS) >= 20 and {"run_pretraining", "run_glue", "run_squad", "create_pretraining_data",
                                   "export_to_tfhub", "benchmark", "reproduce_paper"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_imports_defines_its_flags_and_prints_its_help(script):
    """Each script's flags are defined without a clash and its help is its docstring with its flags (absl's
    --helpshort exits 1): the one run of each script that `make test-fast` makes, a fork of under a second."""
    result = run_script(script, "--helpshort", timeout=120)
    assert result.returncode == 1, result.stderr[-3000:]
    assert _docstring_first_line(script) in result.stdout, result.stdout[:2000]
    assert "\n  --" in result.stdout, result.stdout[-2000:]
