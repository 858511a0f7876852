"""TensorBoard scalars without the tensorboard package, and the Trainer's progress log (rate and time left)."""

import datetime
import os
import time

import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2
from tensorflow.core.util import event_pb2

# What tf.summary.scalar writes, without needing the tensorboard package: TensorBoard's scalars plugin.
_SCALAR_SUMMARY_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")).SerializeToString()


def write_scalars(scalars, step):
    """Writes {name: number} as TensorBoard scalars at `step` to the default tf.summary writer.

    The same records as `tf.summary.scalar`, which needs the tensorboard package (not a dependency).

    Example:
    >>> import tempfile
    >>> with tf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     write_scalars({"loss": 0.5, "masked_lm_accuracy": 0.25}, step=100)
    """
    for name, value in scalars.items():
        tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=_SCALAR_SUMMARY_METADATA)


def read_scalars(summary_dir, name):
    """{step: value} of the scalar `name` in the TensorBoard event files of `summary_dir` (what `write_scalars`
    wrote there); a step written twice keeps its last value.

    Example:
    >>> import tempfile
    >>> summary_dir = tempfile.mkdtemp()
    >>> with tf.summary.create_file_writer(summary_dir).as_default():
    ...     write_scalars({"loss": 0.5}, step=10)
    ...     write_scalars({"loss": 0.25}, step=20)
    >>> read_scalars(summary_dir, "loss")
    {10: 0.5, 20: 0.25}
    """
    paths = sorted(tf.io.gfile.glob(os.path.join(summary_dir, "events.out.tfevents.*")))
    if not paths:
        raise ValueError(f"No TensorBoard event files in {summary_dir!r}.")
    values = {}
    for path in paths:
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == name:
                    values[int(event.step)] = float(tf.make_ndarray(value.tensor))
    if not values:
        raise ValueError(f"The event files in {summary_dir!r} hold no scalar named {name!r}.")
    return dict(sorted(values.items()))


def summary_writer(strategy, summary_dir):
    """A writer to `summary_dir` on the worker that saves summaries; a no-op writer elsewhere or without a dir."""
    if summary_dir and strategy.extended.should_save_summary:
        return tf.summary.create_file_writer(summary_dir)
    return tf.summary.create_noop_writer()


class ProgressLog:
    """Logs a training loop's results with the steps per second since the previous log and the time left at
    that rate, and writes them as scalars to the default tf.summary writer."""

    def __init__(self, start_step, total_steps, global_batch_size):
        self._total_steps = total_steps
        self._global_batch_size = global_batch_size
        self._step = start_step
        self._time = time.monotonic()

    def log(self, results):
        """Logs and writes {"step", "loss", "learning_rate", metrics...} as `Trainer.train` returns them."""
        steps_per_second, eta_seconds = self._rate(results["step"])
        scalars = {name: value for name, value in results.items() if name != "step"}
        scalars.update(examples_per_second=steps_per_second * self._global_batch_size,
                       steps_per_second=steps_per_second)
        metrics = " ".join(f"{name}={value:.4f}" for name, value in results.items()
                           if name not in ("step", "loss", "learning_rate"))
        logging.info("step %d/%d loss=%.4f lr=%.3e examples/s=%.1f steps/s=%.2f eta=%s %s", results["step"],
                     self._total_steps, results["loss"], results["learning_rate"], scalars["examples_per_second"],
                     steps_per_second, datetime.timedelta(seconds=round(eta_seconds)), metrics)
        write_scalars(scalars, results["step"])

    def _rate(self, step):
        """Steps per second since the previous log, and the seconds left at that rate."""
        now = time.monotonic()
        steps_per_second = (step - self._step) / max(now - self._time, 1e-9)
        self._step, self._time = step, now
        return steps_per_second, (self._total_steps - step) / max(steps_per_second, 1e-9)
