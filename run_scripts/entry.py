"""How every script starts: absl's app.run, with an error in the user's input reported as one line.

    if __name__ == "__main__":
        entry.run(main)

A user error ends the run with `error: <its message>` on stderr and exit status 1, or 2 for a usage error; every
other exception keeps Python's traceback (exit status 1). ALBERT_TF_TRACEBACK=1 in the environment, or
--verbosity=1 (or more), prints the traceback of user errors too, with the same exit status. `is_user_error` says
which errors count as the user's (BUILD_NOTES.md, "The scripts"). --help and the other absl flags behave as
under app.run.
"""

import dis
import functools
import importlib.util
import os
import runpy
import sys
import traceback
from typing import Callable, List, NoReturn, Optional

from absl import app, flags

from albert_tf.training.write_errors import CheckpointWriteError

CONSOLE_SCRIPT_PREFIX = "albert-"
TRACEBACK_VARIABLE = "ALBERT_TF_TRACEBACK"
USER_ERROR_STATUS = 1
USAGE_ERROR_STATUS = 2
# The project's code, wherever it is installed: albert_tf, data_gen and run_scripts are sibling packages.
PROJECT_DIRECTORIES = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), package, "")
                            for package in ("albert_tf", "data_gen", "run_scripts"))
USAGE_ERROR_TYPES = (app.UsageError, flags.Error)
# Errors about a value or a file; anything else (a KeyError, a TypeError, TensorFlow's errors) is a defect.
USER_ERROR_TYPES = (ValueError, FileNotFoundError, FileExistsError, CheckpointWriteError)


def run(main: Callable[[List[str]], Optional[int]]) -> None:
    """Runs `main` as `app.run(main)` does, but reports a user error (`is_user_error`) and a bad flag in one line."""
    app.run(functools.partial(_main_reporting_user_errors, main), flags_parser=_parse_flags)


def run_console_script() -> None:
    """The console commands pyproject.toml installs: `albert-<name>` runs `python -m run_scripts.<name>`.

    The command's own name says which script, so one entry point serves them all (dashes in the command read as
    underscores in the module name): `albert-create-pretraining-data --help` is
    `python -m run_scripts.create_pretraining_data --help`.
    """
    command = os.path.basename(sys.argv[0])
    name = command[len(CONSOLE_SCRIPT_PREFIX):].replace("-", "_") if command.startswith(CONSOLE_SCRIPT_PREFIX) else ""
    module = f"run_scripts.{name}"
    if not name or name.startswith("_") or importlib.util.find_spec(module) is None:
        raise SystemExit(f"error: the command {command!r} names no script of run_scripts; the commands are "
                         f"{CONSOLE_SCRIPT_PREFIX}<script name>, e.g. {CONSOLE_SCRIPT_PREFIX}create-pretraining-data.")
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is about the user's input, so its message alone is the report.

    A usage error (app.UsageError, or a flag absl cannot parse) always is. A ValueError, FileNotFoundError or
    FileExistsError is when the project raised it: its traceback's innermost frame is in albert_tf, data_gen or
    run_scripts and, for a ValueError, is a `raise` statement, since a ValueError that int(), an unpacking or
    numpy raises has a sentence about Python, not about the input. A FileNotFoundError the operating system
    raises for the project's open() names the file, so it counts.
    """
    if isinstance(error, USAGE_ERROR_TYPES):
        return True
    if not isinstance(error, USER_ERROR_TYPES) or error.__traceback__ is None:
        return False
    innermost = error.__traceback__
    while innermost.tb_next is not None:
        innermost = innermost.tb_next
    code = innermost.tb_frame.f_code
    if not os.path.realpath(code.co_filename).startswith(PROJECT_DIRECTORIES):
        return False
    if not isinstance(error, ValueError):
        return True
    return any(instruction.offset == innermost.tb_lasti and instruction.opname == "RAISE_VARARGS"
               for instruction in dis.get_instructions(code))


def _parse_flags(argv: List[str]) -> List[str]:
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        _exit_reporting(error, USAGE_ERROR_STATUS)


def _main_reporting_user_errors(main, argv):
    try:
        return main(argv)
    except Exception as error:
        if not is_user_error(error):
            raise
        _exit_reporting(error, USAGE_ERROR_STATUS if isinstance(error, USAGE_ERROR_TYPES) else USER_ERROR_STATUS)


def _traceback_wanted() -> bool:
    if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
        return True
    return flags.FLAGS.is_parsed() and flags.FLAGS.verbosity >= 1


def _exit_reporting(error: BaseException, status: int) -> NoReturn:
    if _traceback_wanted():
        traceback.print_exception(error, file=sys.stderr)
    else:
        print(f"error: {error}", file=sys.stderr)
    sys.exit(status)
