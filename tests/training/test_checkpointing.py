"""SigtermFlag (albert_tf/training/checkpointing.py): while active SIGTERM only sets its flag; a request the
training did not act on goes on to the handler that was in place before, when that is a Python function."""
import os
import signal
import time

import pytest
import tensorflow as tf

from albert_tf.training.checkpointing import SigtermFlag


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
