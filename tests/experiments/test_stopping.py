"""How a reproduction run stops on SIGTERM (albert_tf/experiments/stopping.py), in this process: the place it names,
and a SIGTERM in a training's last loop, which the Trainer's handler passes on. The script's one line, exit status
and resume are in test_reproduce_paper.py."""
import os
import signal
import time

import pytest
import tensorflow as tf

from albert_tf.experiments.stopping import ReproductionStopped, stop_on_sigterm, stopped_during
from albert_tf.training.checkpointing import SigtermFlag, TrainingPreempted


def _sigterm_self():
    # Without a Python handler in place SIGTERM would end pytest itself.
    assert callable(signal.getsignal(signal.SIGTERM))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the handler raises in this thread before the sleep returns


def test_sigterm_names_the_innermost_place_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ReproductionStopped, match=r"^Stopped by SIGTERM during the data preparation; rerun the same "
                                                  r"command to resume\.$"):
        with stop_on_sigterm("the run"), stopped_during("the data preparation"):
            _sigterm_self()
    assert signal.getsignal(signal.SIGTERM) == before
    with pytest.raises(ReproductionStopped, match="^Stopped by SIGTERM during the run;"):
        with stop_on_sigterm("the run"):
            _sigterm_self()
    with stop_on_sigterm("the run"):
        pass
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_preempted_training_gives_its_step_and_checkpoint():
    with pytest.raises(ReproductionStopped) as stopped:
        with stopped_during("training sharing/all/seed0"):
            raise TrainingPreempted(12, "out/arms/sharing/all/seed0")
    assert str(stopped.value) == ("Stopped by SIGTERM during training sharing/all/seed0 at step 12 (checkpoint saved "
                                  "in out/arms/sharing/all/seed0); rerun the same command to resume.")


def test_a_sigterm_in_a_trainings_last_loop_stops_the_run_once_the_training_is_done():
    finished = []
    with pytest.raises(ReproductionStopped, match="^Stopped by SIGTERM during training dropout/dropout0.1/seed0;"):
        with stop_on_sigterm("the run"), stopped_during("training dropout/dropout0.1/seed0"):
            with SigtermFlag(tf.distribute.get_strategy()):
                _sigterm_self()
                finished.append("the last loop")
            finished.append("after the training")
    assert finished == ["the last loop"]
