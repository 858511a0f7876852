"""tests/shared_builds.py: a fixture's files built once per run for every test worker, each worker given a copy."""
import os
import threading
import time

import pytest

from tests.shared_builds import build_once


def test_concurrent_callers_build_once_and_each_gets_its_own_copy_with_rebased_paths(tmp_path):
    builds = []

    def build(directory):
        builds.append(directory)
        time.sleep(0.2)  # long enough for the other callers to arrive while it builds
        with open(os.path.join(directory, "model.onnx"), "w") as handle:
            handle.write("weights")
        return {"model": os.path.join(directory, "model.onnx"), "nested": {"dir": directory}, "size": 7}

    records = {}

    def call(worker):
        records[worker] = build_once(str(tmp_path), "model", build, str(tmp_path / worker / "copy"))

    threads = [threading.Thread(target=call, args=(f"gw{index}",)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    for worker, record in records.items():
        copy = str(tmp_path / worker / "copy")
        assert record == {"model": os.path.join(copy, "model.onnx"), "nested": {"dir": copy}, "size": 7}
        assert open(record["model"]).read() == "weights" and os.listdir(copy) == ["model.onnx"]
    # A caller's copy is its own: writing into it leaves the others' as they were.
    with open(records["gw0"]["model"], "w") as handle:
        handle.write("overwritten")
    assert open(records["gw1"]["model"]).read() == "weights"


def test_a_failed_build_leaves_nothing_and_the_next_caller_builds_again(tmp_path):
    def broken(directory):
        with open(os.path.join(directory, "half.onnx"), "w") as handle:
            handle.write("half")
        raise RuntimeError("the export failed")

    with pytest.raises(RuntimeError, match="the export failed"):
        build_once(str(tmp_path), "model", broken, str(tmp_path / "gw0"))
    record = build_once(str(tmp_path), "model", lambda directory: {"dir": directory}, str(tmp_path / "gw1"))
    assert record == {"dir": str(tmp_path / "gw1")} and os.listdir(tmp_path / "gw1") == []
