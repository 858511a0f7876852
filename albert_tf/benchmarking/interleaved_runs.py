"""A benchmark's rows run repeat by repeat, interleaved, where a row whose process fails is recorded and left out.

Each repeat runs every row once before the next repeat starts, so that what else the machine does drifts over all
rows alike. A row whose run raises RuntimeError or OSError (its child process failed, or was killed: the
out-of-memory killer's SIGKILL) is not run again; its failure is kept, with the end of its message, and the other
rows carry on.

Example:
>>> def run(row, repeat):
...     if row == "too large":
...         raise RuntimeError("The row failed in its child process (killed by SIGKILL)")
...     return {"row": row, "repeat": repeat}
>>> runs, failures = run_interleaved(["small", "too large"], 2, run, "example")
>>> [record["repeat"] for record in runs["small"]], runs["too large"], failures["too large"]
([0, 1], [], 'The row failed in its child process (killed by SIGKILL)')
"""

from typing import Callable, Dict, Hashable, List, Sequence, Tuple, TypeVar

from absl import logging

Row = TypeVar("Row", bound=Hashable)
# How much of a failed row's message its record keeps: the end, where a child's error is.
FAILURE_CHARACTERS = 2000


def run_interleaved(rows: Sequence[Row], repeats: int, run: Callable[[Row, int], dict], workload: str,
                    describe: Callable[[Row], str] = str, record_failures: bool = True
                    ) -> Tuple[Dict[Row, List[dict]], Dict[Row, str]]:
    """Runs `run(row, repeat)` for each of `repeats` repeats of every row; returns each row's records, in repeat
    order, and the failure message of each row that failed. With `record_failures=False` a failure is raised."""
    runs: Dict[Row, List[dict]] = {row: [] for row in rows}
    failures: Dict[Row, str] = {}
    for repeat in range(repeats):
        for row in rows:
            if row in failures:
                continue
            logging.info("%s run %d of %d: %s", workload, repeat + 1, repeats, describe(row))
            try:
                runs[row].append(run(row, repeat))
            except (RuntimeError, OSError) as error:
                if not record_failures:
                    raise
                logging.warning("%s row %s failed: %s", workload, describe(row), error)
                failures[row] = str(error).strip()[-FAILURE_CHARACTERS:]
    return runs, failures
