"""The JSON files a reproduction run keeps (arm and fine-tuning results, speed records, run.json, results.json).

Each is written whole under a temporary name and renamed into place, so a run stopped anywhere (SIGTERM) leaves
the previous file or the new one, never half of one, and a rerun can trust every file it finds.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "result.json")
>>> write_json(path, {"accuracy": 0.5})
>>> read_json(path)
{'accuracy': 0.5}
"""

import json
import os
from typing import Callable, Optional


def read_json(path: str):
    """The value in the JSON file `path`; a file that is not JSON (edited by hand, half of a merge) raises
    ValueError in one sentence naming it."""
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is damaged: it is not JSON ({error.msg} at line {error.lineno}, column "
                             f"{error.colno}); restore it from the repository that keeps it, or delete it and rerun "
                             "to write it again.") from None


def write_json(path: str, value, default: Optional[Callable] = float) -> None:
    """Writes `value` to `path` (indented, keys sorted); `default` converts what json cannot (numpy scalars)."""
    temporary = path + ".incomplete"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2, sort_keys=True, default=default)
    os.replace(temporary, path)
