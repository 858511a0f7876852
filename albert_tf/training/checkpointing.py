"""The Trainer's checkpoints: what they hold, where each worker writes them, and how a run stops on SIGTERM.

A checkpoint holds the model, its non-trainable variables and the optimizer (slots, schedule and
`iterations`, the step counter), so a resumed run continues where the saved one stopped.
"""

import os
import signal
import threading

import tensorflow as tf
from absl import logging

from albert_tf.training.write_errors import CheckpointWriteError


class TrainingPreempted(Exception):
    """Raised by `Trainer.train` after SIGTERM, once the checkpoint at `step` is saved.

    A run script catches it and exits with code 0; rerunning the same command resumes from `step`.
    """

    def __init__(self, step, model_dir):
        super().__init__(f"Training preempted by SIGTERM at step {step}; the checkpoint is saved in {model_dir}, "
                         "rerun the same command to resume.")
        self.step = step
        self.model_dir = model_dir


class NonFiniteLossError(FloatingPointError):
    """Raised by `Trainer.train` when a step's loss is NaN or Inf; no checkpoint of that state is written."""

    def __init__(self, step, loss, last_checkpoint):
        super().__init__(f"The training loss is {loss} at step {step}; stopped without saving, the last good "
                         f"checkpoint is {last_checkpoint}. Lower the learning rate or check the input data.")
        self.step = step


def _reason(error):
    """The operating system's words in a failed op's message: "No space left on device" out of
    "{{function_node ...}} /dir/ckpt-20_temp/part-...tempstate123; No space left on device [Op:SaveV2]"."""
    message = getattr(error, "message", None) or str(error)
    return message.rsplit("; ", 1)[-1].split(" [Op:")[0]


class TrainingCheckpoints:
    """The training state's `tf.train.Checkpoint` and the CheckpointManager that saves it as model_dir/ckpt-STEP.

    `keep_checkpoint_max` 0 keeps every checkpoint. An `optimizer` of None (evaluation only) leaves the
    optimizer out.
    """

    def __init__(self, strategy, model, optimizer, model_dir, keep_checkpoint_max):
        tracked = {"model": model,
                   # Keras does not track some model state for tf.train.Checkpoint (e.g. the dropout seed
                   # generators); listing the non-trainable variables makes a resumed run exact.
                   "model_non_trainable_variables": list(model.non_trainable_variables)}
        if optimizer is not None:
            tracked["optimizer"] = optimizer
        self.checkpoint = tf.train.Checkpoint(**tracked)
        self._is_chief = strategy.extended.should_checkpoint
        if self._is_chief:
            write_dir = model_dir
        else:
            # The standard multi-worker pattern: every worker saves (saving may use collectives), only
            # the chief's files are kept.
            write_dir = os.path.join(model_dir, f"workertemp_{strategy.cluster_resolver.task_id}")
        self._write_dir = write_dir
        self._manager = tf.train.CheckpointManager(
            self.checkpoint, write_dir, max_to_keep=keep_checkpoint_max or None, checkpoint_name="ckpt")

    def save(self, step):
        """Saves the checkpoint numbered `step`; returns its path on the chief, None on the other workers.

        A write that fails (tf.errors.ResourceExhaustedError for a full disk, or any other I/O error) raises
        CheckpointWriteError once the step's temporary files are removed; the checkpoint state file, written last,
        still names the previous checkpoint."""
        last_checkpoint = self._manager.latest_checkpoint
        try:
            path = self._manager.save(checkpoint_number=step)
        except (tf.errors.ResourceExhaustedError, tf.errors.UnavailableError, tf.errors.PermissionDeniedError,
                tf.errors.DataLossError, tf.errors.InternalError, OSError) as error:
            self._remove_partial_files(step)
            raise CheckpointWriteError(step, self._write_dir, last_checkpoint, _reason(error)) from None
        if not self._is_chief:
            tf.io.gfile.rmtree(self._write_dir)
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    def _remove_partial_files(self, step):
        """What a failed save of `step` left: the `_temp` directory TensorFlow writes into, and its files."""
        prefix = os.path.join(self._write_dir, f"ckpt-{step}")
        for leftover in tf.io.gfile.glob(prefix + "_temp*") + tf.io.gfile.glob(prefix + ".*"):
            try:
                if tf.io.gfile.isdir(leftover):
                    tf.io.gfile.rmtree(leftover)
                else:
                    tf.io.gfile.remove(leftover)
            except tf.errors.OpError as error:
                logging.warning("Could not remove %s, left by the failed save: %s", leftover, error)


class SigtermFlag:
    """While active, SIGTERM only sets a flag, checked between loops (and agreed on by all workers).

    A SIGTERM that came during the last loop stops nothing here: on a normal exit it goes on to the handler that was
    in place before, when that is a Python function (a caller's, such as a reproduction run's), and is dropped under
    the default action, as before, so a run script still finishes its evaluation.
    """

    def __init__(self, strategy):
        self._strategy = strategy
        self._requested = False
        self._previous_handler = None
        self._count_requests = tf.function(self._count_requests_across_workers)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGTERM, self._handle)
        else:
            logging.warning("Trainer.train runs outside the main thread: SIGTERM will not save a checkpoint.")
        return self

    def _handle(self, signum, frame):
        logging.warning("SIGTERM received: saving a checkpoint after the current loop.")
        self._requested = True

    def stop_requested_on_any_worker(self):
        if not isinstance(self._strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return self._requested
        # Every worker must stop at the same step, or the others would wait forever in a collective.
        return int(self._count_requests(tf.constant(int(self._requested)))) > 0

    def _count_requests_across_workers(self, requested):
        per_replica = self._strategy.run(tf.identity, args=(requested,))
        return self._strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def __exit__(self, exc_type, exc_value, traceback):
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            if self._requested and exc_type is None and callable(self._previous_handler):
                self._previous_handler(signal.SIGTERM, None)
        return False
