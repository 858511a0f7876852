"""How a reproduction run stops on SIGTERM: the Trainer saves a checkpoint and raises TrainingPreempted, and the
run turns it into ReproductionStopped, which names what it was training, so the run script can say so in one line
and the same command resumes from that checkpoint.

Example:
>>> from albert_tf.training.checkpointing import TrainingPreempted
>>> try:
...     with stopped_during("training sharing/all/seed0"):
...         raise TrainingPreempted(12, "out/arms/sharing/all/seed0")
... except ReproductionStopped as stopped:
...     print(stopped)
Stopped by SIGTERM during training sharing/all/seed0 at step 12 (checkpoint saved in ...); rerun the same command...
"""

import contextlib
from typing import Iterator

from albert_tf.training.checkpointing import TrainingPreempted


class ReproductionStopped(Exception):
    """SIGTERM stopped the training `what` at `step` once its checkpoint in `directory` was saved."""

    def __init__(self, what: str, step: int, directory: str):
        super().__init__(f"Stopped by SIGTERM during {what} at step {step} (checkpoint saved in {directory}); rerun "
                         "the same command to resume.")
        self.what = what
        self.step = step


@contextlib.contextmanager
def stopped_during(what: str) -> Iterator[None]:
    """Turns a TrainingPreempted raised inside into a ReproductionStopped naming `what` (e.g. "training <arm key>")."""
    try:
        yield
    except TrainingPreempted as preempted:
        raise ReproductionStopped(what, preempted.step, preempted.model_dir) from None
