"""albert_tf.benchmarking.interleaved_runs: repeats interleaved over the rows, a failed row recorded and left out."""
import pytest

from albert_tf.benchmarking.interleaved_runs import FAILURE_CHARACTERS, run_interleaved


def test_each_repeat_runs_every_row_and_a_failed_row_is_not_run_again():
    calls = []

    def run(row, repeat):
        calls.append((row, repeat))
        if (row, repeat) == ("b", 1):
            raise OSError("x" * (FAILURE_CHARACTERS + 10) + " the end of the child's stderr\n")
        return {"row": row, "repeat": repeat}

    runs, failures = run_interleaved(["a", "b", "c"], 3, run, "test")
    assert calls == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1), ("c", 1), ("a", 2), ("c", 2)]
    assert [record["repeat"] for record in runs["a"]] == [0, 1, 2] and runs["b"] == [{"row": "b", "repeat": 0}]
    assert list(failures) == ["b"] and len(failures["b"]) == FAILURE_CHARACTERS
    assert failures["b"].endswith("the end of the child's stderr")


def test_without_recording_failures_the_first_failure_is_raised():
    def run(row, repeat):
        raise RuntimeError(f"{row} failed")

    with pytest.raises(RuntimeError, match="^a failed$"):
        run_interleaved(["a", "b"], 2, run, "test", record_failures=False)
