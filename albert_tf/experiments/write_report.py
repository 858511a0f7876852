"""Writes a reproduction run's REPORT.md, results.json and plots from its kept records alone, in a process that
imports no TensorFlow:

    python -m albert_tf.experiments.write_report --output_dir=paper_runs/small

It reads OUTPUT_DIR/report_inputs.json (albert_tf.experiments.report_inputs), every arm_result.json and
downstream_result.json it names, and the speed records; no data, no checkpoint. The verdicts need scipy, which the
training processes must not see: TensorFlow and Keras import scipy and scikit-learn at `import tensorflow`
whenever they can (70 MB and a second per process), and the built-in corpus is the docstrings of every installed
site-package. So `make install` puts scipy in .venv/report (requirements-report.txt), outside site-packages, and
this process alone adds it to its path. A reproduction run writes its report with `write_report_in_child`.

Example (it needs a finished run's records, so it is not run here):
>>> write_report_in_child("paper_runs/small")["report"]  # doctest: +SKIP
'/work/main/paper_runs/small/REPORT.md'
"""

import argparse
import json
import os
from typing import Dict, Optional, Sequence

from albert_tf.benchmarking.child_process import REPORT_PACKAGES, add_report_packages_to_path, run_python_child

REPORT_INPUTS_NAME = "report_inputs.json"
PATHS_MARKER = "REPORT_PATHS "


def write_report_in_child(output_dir: str) -> Dict[str, str]:
    """Writes the report of `output_dir` (which holds report_inputs.json) in a child process of this module;
    returns the paths of REPORT.md and results.json. A child that fails raises RuntimeError with its stderr."""
    output_dir = os.path.abspath(output_dir)
    return run_python_child(["-m", "albert_tf.experiments.write_report", f"--output_dir={output_dir}"], PATHS_MARKER,
                            f"Writing the report of {output_dir} failed").record


def put_report_packages_on_path() -> None:
    """Makes scipy importable in this process (it must not be in a training process), or exits with one line."""
    add_report_packages_to_path()
    try:
        import scipy.stats  # noqa: F401  (only to fail here, in one line, without it)
    except ImportError:
        raise SystemExit(f"error: scipy is not importable (it is looked for in {REPORT_PACKAGES} and on the path); "
                         "`make install` puts it there from requirements-report.txt.") from None


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Writes a reproduction run's report from its kept records.")
    parser.add_argument("--output_dir", required=True, help="The run's output directory.")
    output_dir = os.path.abspath(parser.parse_args(argv).output_dir)
    put_report_packages_on_path()
    # Imported once scipy is on the path: the verdicts import it.
    from albert_tf.experiments.kept_records import write_report_from_records
    try:
        paths = write_report_from_records(output_dir)
    except (ValueError, FileNotFoundError) as error:  # a missing or damaged record: its sentence says which
        raise SystemExit(f"error: {error}") from None
    print(PATHS_MARKER + json.dumps(paths))


if __name__ == "__main__":
    main()
