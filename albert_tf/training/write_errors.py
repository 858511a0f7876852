"""Errors of writing a run's state that the user can fix (make room, fix a permission), without TensorFlow: the
scripts' entry point reports them in one line before it has imported anything heavy.

Example:
>>> print(CheckpointWriteError(20, "run", "run/ckpt-10", "No space left on device"))
Could not write the checkpoint of step 20 to run (No space left on device); the last good checkpoint, ckpt-10, is \
kept: make room and rerun the same command to resume.
"""

import os


class CheckpointWriteError(OSError):
    """Raised by `TrainingCheckpoints.save` when a checkpoint cannot be written (a full disk, a quota, a
    read-only filesystem): the half-written files are removed, the last good checkpoint stays the one a rerun
    resumes from."""

    def __init__(self, step, model_dir, last_checkpoint, reason):
        kept = (f"the last good checkpoint, {os.path.basename(last_checkpoint)}, is kept" if last_checkpoint
                else "there is no earlier checkpoint")
        super().__init__(f"Could not write the checkpoint of step {step} to {model_dir} ({reason}); {kept}: make "
                         "room and rerun the same command to resume.")
        self.step = step
        self.model_dir = model_dir
