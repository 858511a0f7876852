"""albert_tf/training/checkpointing.py: SigtermFlag, while active SIGTERM only sets its flag, and a request the
training did not act on goes on to the handler that was in place before, when that is a Python function; a
checkpoint that cannot be written is one error that keeps the last good checkpoint."""
import os
import signal
import time

import pytest
import tensorflow as tf

from albert_tf.training.checkpointing import SigtermFlag, TrainingCheckpoints
from albert_tf.training.write_errors import CheckpointWriteError


def _sigterm_self():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the handler runs in this thread before the sleep returns


@pytest.fixture
def received():
    """A Python SIGTERM handler that records each call, in place for the test."""
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGTERM, previous)


def test_a_request_the_training_did_not_act_on_goes_to_the_previous_handler(received):
    with SigtermFlag(tf.distribute.get_strategy()) as flag:
        assert not flag.stop_requested_on_any_worker()
        _sigterm_self()
        assert flag.stop_requested_on_any_worker() and received == []
    assert received == [signal.SIGTERM]


def test_a_request_that_ended_the_training_in_an_exception_is_not_passed_on(received):
    with pytest.raises(RuntimeError, match="the training stopped"):
        with SigtermFlag(tf.distribute.get_strategy()):
            _sigterm_self()
            raise RuntimeError("the training stopped")
    assert received == []
    with SigtermFlag(tf.distribute.get_strategy()):
        pass
    assert received == []


def test_a_checkpoint_that_cannot_be_written_leaves_no_part_of_it_and_keeps_the_last_good_one(tmp_path, monkeypatch):
    model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
    model.build((None, 3))
    checkpoints = TrainingCheckpoints(tf.distribute.get_strategy(), model, None, str(tmp_path), 5)
    checkpoints.save(10)

    def full_disk(checkpoint_number):
        # What TensorFlow leaves when the disk fills while it writes a checkpoint's data.
        (tmp_path / f"ckpt-{checkpoint_number}_temp").mkdir()
        (tmp_path / f"ckpt-{checkpoint_number}_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").touch()
        raise tf.errors.ResourceExhaustedError(None, None, "{{function_node __wrapped__SaveV2}} "
                                               f"{tmp_path}/ckpt-20_temp/part; No space left on device [Op:SaveV2]")

    monkeypatch.setattr(checkpoints._manager, "save", full_disk)
    with pytest.raises(CheckpointWriteError) as raised:
        checkpoints.save(20)
    assert str(raised.value) == (f"Could not write the checkpoint of step 20 to {tmp_path} (No space left on device); "
                                 "the last good checkpoint, ckpt-10, is kept: make room and rerun the same command to "
                                 "resume.")
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-10.data-00000-of-00001", "ckpt-10.index"]
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-10")
