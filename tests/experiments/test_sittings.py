"""What an arm's record says of its training (albert_tf/experiments/sittings.py): one record per sitting, kept
however the sitting ends, and the machine's other load told apart from the training's own."""
import pytest

from albert_tf.experiments import sittings
from albert_tf.training.compile_choice import forced_choice


def test_a_stopped_sitting_is_recorded_and_the_next_one_adds_its_own(tmp_path):
    directory = str(tmp_path)
    step = {"now": 0}
    with pytest.raises(KeyboardInterrupt):
        with sittings.sitting(directory, lambda: step["now"], lambda: None):
            step["now"] = 500
            raise KeyboardInterrupt
    with sittings.sitting(directory, lambda: step["now"], lambda: forced_choice(False)):
        step["now"] = 2000
    first, second = sittings.read_sittings(directory)
    assert (first["steps"], first["compile_path"]) == ([0, 500], None)
    assert second["steps"] == [500, 2000]
    assert second["compile_path"] == "TensorFlow's own kernels (flag: jit_compile=False)"
    assert set(second["machine"]) == {"cpu_model", "cpu_bfloat16_units", "cores", "tensorflow"}
    assert second["seconds"] >= 0 and second["process_cpu_seconds"] >= 0
    record = sittings.training_record([first, second])
    assert record["steps_trained"] == 2000 and len(record["sittings"]) == 2
    assert record["seconds"] == pytest.approx(first["seconds"] + second["seconds"], abs=0.11)


def test_the_machine_busy_time_leaves_out_idle_and_io_wait(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks.
    stat.write_text("cpu  100 20 30 900 50 5 5 0 10 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    monkeypatch.setattr(sittings.os, "sysconf", lambda name: 100)
    assert sittings.machine_busy_seconds(str(stat)) == pytest.approx(1.6)
    assert sittings.machine_busy_seconds(str(tmp_path / "absent")) is None
