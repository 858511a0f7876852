"""How a reproduction run stops on SIGTERM, in one line that names what it was doing, so the same command resumes.

While `stop_on_sigterm` is active, SIGTERM raises at once where it finds the run, and `stopped_during` blocks name
that place. Inside a training the Trainer's own handler takes over: it saves a checkpoint after the current loop and
raises TrainingPreempted, which `stopped_during` turns into the same ReproductionStopped (with the step and the
checkpoint), and it hands a signal that came during the last loop back to this one. Every file the run keeps is
written whole or not at all, so a run stopped anywhere resumes.

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
import signal
import threading
from typing import Iterator

from albert_tf.training.checkpointing import TrainingPreempted


class ReproductionStopped(Exception):
    """SIGTERM stopped a reproduction run during `what`; rerunning the same command resumes it."""

    def __init__(self, what: str):
        super().__init__(f"Stopped by SIGTERM during {what}; rerun the same command to resume.")
        self.what = what


class _SigtermReceived(BaseException):
    """What stop_on_sigterm's handler raises; a BaseException, as KeyboardInterrupt is, so that no `except
    Exception` on the way swallows it."""


def _raise_sigterm_received(signum, frame):
    raise _SigtermReceived()


@contextlib.contextmanager
def stopped_during(what: str) -> Iterator[None]:
    """Turns a SIGTERM inside (TrainingPreempted, or stop_on_sigterm's) into ReproductionStopped naming `what`
    (e.g. "training <arm key>"); an inner block's name wins."""
    try:
        yield
    except TrainingPreempted as preempted:
        raise ReproductionStopped(f"{what} at step {preempted.step} (checkpoint saved in {preempted.model_dir})") \
            from None
    except _SigtermReceived:
        raise ReproductionStopped(what) from None


@contextlib.contextmanager
def stop_on_sigterm(what: str) -> Iterator[None]:
    """While active, SIGTERM raises ReproductionStopped naming the innermost `stopped_during` block, or `what`
    outside them; the previous handler is back afterwards. Outside the main thread, where Python runs no signal
    handler, it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_sigterm_received)
    try:
        with stopped_during(what):
            yield
    finally:
        signal.signal(signal.SIGTERM, previous)
