"""One strategy-aware custom training loop, shared by pretraining and fine-tuning.

Keras 3 `model.fit` breaks under MultiWorkerMirroredStrategy, so training runs as a tf.function that
takes `steps_per_loop` steps over a distributed iterator (what TPUs need), each step `strategy.run`
on every replica. A step computes the gradients of `gradient_accumulation_steps` micro-batches, sums
them across micro-batches and replicas (one all-reduce), unscales them under mixed_float16, clips the
sum to global norm `clip_norm` (the original's `tf.clip_by_global_norm(grads, 1.0)`) and applies the
optimizer's `update_step` to every variable that has a gradient. The optimizer's `iterations` is the
step counter; checkpoints resume it with the optimizer slots, the schedule and the data position.
"""

import dataclasses
import datetime
import os
import signal
import threading
import time
from typing import Optional, Union

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2
from tensorflow.core.util import event_pb2

from albert_tf.training import bfloat16_support
from albert_tf.training.host_allocator import releasing_free_heap

MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
# What tf.summary.scalar writes, without needing the tensorboard package: TensorBoard's scalars plugin.
_SCALAR_SUMMARY_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")).SerializeToString()
_UNSUPPORTED_OPTIMIZER_OPTIONS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "use_ema",
                                  "gradient_accumulation_steps", "loss_scale_factor")


class TrainingPreempted(Exception):
    """Raised by `Trainer.train` after SIGTERM, once the checkpoint at `step` is saved.

    A run script catches it and exits with code 0; rerunning the same command resumes from `step`.
    """

    def __init__(self, step, model_dir):
        super().__init__(f"Training preempted by SIGTERM at step {step}; the checkpoint is saved in {model_dir}, "
                         "rerun the same command to resume.")
        self.step = step


class NonFiniteLossError(FloatingPointError):
    """Raised by `Trainer.train` when a step's loss is NaN or Inf; no checkpoint of that state is written."""

    def __init__(self, step, loss, last_checkpoint):
        super().__init__(f"The training loss is {loss} at step {step}; stopped without saving, the last good "
                         f"checkpoint is {last_checkpoint}. Lower the learning rate or check the input data.")
        self.step = step


def set_mixed_precision(policy):
    """Sets the global Keras dtype policy; call it before building the model.

    Example:
    >>> set_mixed_precision("mixed_bfloat16")
    >>> keras.mixed_precision.global_policy().name
    'mixed_bfloat16'
    >>> set_mixed_precision("float32")
    """
    if policy not in MIXED_PRECISION_POLICIES:
        raise ValueError(f"Unknown mixed precision policy {policy!r}; allowed: {', '.join(MIXED_PRECISION_POLICIES)}.")
    keras.mixed_precision.set_global_policy(policy)


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


def enable_determinism(seed):
    """Seeds Python, numpy, TF and Keras and makes TF ops deterministic; call it before building anything.

    With it, a run that is stopped and resumed from a checkpoint ends with the same weights as one that
    ran straight through (given a dataset_fn that skips exactly the batches already consumed).
    """
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


@dataclasses.dataclass(kw_only=True)
class TrainingSettings:
    """How a run trains, whatever it trains: the fields PretrainingOptions and FinetuningOptions share, set
    by the flags of run_scripts/training_flags.py (keyword-only, so each subclass keeps its own field order)."""

    strategy: str = "one_device"
    tpu: Optional[str] = None
    steps_per_loop: int = 1
    jit_compile: bool = True
    recompute_blocks: Union[bool, int] = False
    mixed_precision: str = "float32"
    seed: int = 12345
    deterministic: bool = False


class Trainer:
    """Trains, evaluates and predicts with a Keras model under any tf.distribute strategy.

    Create the model and optimizer under `strategy.scope()` and build the model (call it once) before
    creating the Trainer. Call `set_mixed_precision` before building the model; a float16 model gets
    dynamic loss scaling (its optimizer is wrapped in `keras.optimizers.LossScaleOptimizer`). With
    `jit_compile`, XLA compiles each replica's gradients, evaluation metrics and predictions and, under
    OneDeviceStrategy, the update too.

    The callbacks:
    - `loss_fn(model, batch) -> (loss, metrics)`: the float32 scalar mean loss of this replica's batch and a
      dict of float32 scalar metrics (means over the batch); the trainer divides both by the number of
      replicas and micro-batches, so logs show means over the global batch.
    - `dataset_fn(input_context, batch_size, skip_batches) -> tf.data.Dataset`: this input pipeline's data,
      batched by `batch_size` (the per-replica batch, already divided by the replicas and the accumulation
      steps), sharded with `input_context.num_input_pipelines` / `input_pipeline_id`, with the first
      `skip_batches` batches skipped (those consumed before a resume). Training data must repeat and keep
      equal batch shapes (`drop_remainder=True`); evaluation and prediction data must be finite and keep
      the last partial batch.
    - `metrics_fn(model, batch) -> {name: (numerator, denominator)}`: float32 sums over this replica's batch;
      `evaluate` returns sum(numerator) / sum(denominator) over every batch and replica.
    - `predict_fn(model, batch) -> {name: tensor}`: per-example outputs with the batch as first axis.
    The callbacks are traced without AutoGraph, which would convert the whole model (Keras included) on
    every trace, seconds each: a branch or loop on a tensor's value is written with tf.cond or tf.while_loop.

    Example:
    >>> import numpy as np
    >>> strategy = tf.distribute.get_strategy()
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    ...     optimizer = keras.optimizers.SGD(0.1)
    >>> def loss_fn(model, batch):
    ...     prediction = model(batch["x"], training=True)[:, 0]
    ...     return tf.reduce_mean(tf.square(prediction - batch["y"])), {}
    >>> def dataset_fn(input_context, batch_size, skip_batches):
    ...     x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    ...     data = tf.data.Dataset.from_tensor_slices({"x": x, "y": x[:, 0] - x[:, 1]})
    ...     return data.repeat().batch(batch_size, drop_remainder=True).skip(skip_batches)
    >>> import tempfile
    >>> trainer = Trainer(strategy, model, optimizer, loss_fn, model_dir=tempfile.mkdtemp(), steps_per_loop=10)
    >>> trainer.train(dataset_fn, num_train_steps=100, global_batch_size=16)["loss"] < 0.01
    True
    """

    def __init__(self, strategy, model, optimizer, loss_fn, *, model_dir, steps_per_loop=1, jit_compile=False,
                 gradient_accumulation_steps=1, clip_norm=1.0, save_checkpoints_steps=1000, keep_checkpoint_max=5,
                 log_every_steps=100, summary_dir=None):
        for name, value in (("steps_per_loop", steps_per_loop),
                            ("gradient_accumulation_steps", gradient_accumulation_steps),
                            ("save_checkpoints_steps", save_checkpoints_steps), ("log_every_steps", log_every_steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Trainer {name} must be a positive integer, got {value!r}.")
        if not isinstance(keep_checkpoint_max, int) or isinstance(keep_checkpoint_max, bool) or keep_checkpoint_max < 0:
            raise ValueError("Trainer keep_checkpoint_max must be a non-negative integer (0 keeps every checkpoint), "
                             f"got {keep_checkpoint_max!r}.")
        if not model.built or not model.variables:
            raise ValueError(f"Trainer needs a built model, but {model.name!r} has no variables yet; call it once "
                             "on a batch (or model.build(...)) under strategy.scope() first.")
        if not strategy.extended.variable_created_in_scope(model.variables[0].value):
            raise ValueError(f"The variables of model {model.name!r} were not created under the strategy's scope; "
                             "build the model inside `with strategy.scope():`.")
        self.strategy = strategy
        self.model = model
        self.model_dir = model_dir
        self._loss_fn = loss_fn
        self._steps_per_loop = steps_per_loop
        self._accumulation_steps = gradient_accumulation_steps
        self._clip_norm = clip_norm
        self._save_checkpoints_steps = save_checkpoints_steps
        self._log_every_steps = log_every_steps
        self._summary_dir = summary_dir
        self._jit_compile = jit_compile
        self._gradient_fn = self._compiled(self._replica_gradients)
        # One device holds every variable, so XLA can fuse the whole update. It holds 220 MB less than the
        # per-op update at ALBERT-base on CPU, at the same speed (BUILD_NOTES.md, "Speed and memory"). Other
        # strategies update each variable's copies through their own cross-device machinery.
        self._compile_update = jit_compile and isinstance(strategy, tf.distribute.OneDeviceStrategy)
        self._trained_variables = None
        self._predict_functions = {}
        self._evaluate_functions = {}
        self._set_up_optimizer(optimizer)
        self._set_up_checkpoints(keep_checkpoint_max)
        if jit_compile and model.dtype_policy.compute_dtype == "bfloat16":
            _warn_if_xla_leaves_bfloat16_units_idle(strategy)

    # ---- set-up -------------------------------------------------------------------------------------

    def _compiled(self, replica_fn):
        """`replica_fn` compiled by XLA when the Trainer compiles, else as it is (traced by its caller)."""
        return tf.function(replica_fn, jit_compile=True, autograph=False) if self._jit_compile else replica_fn

    def _set_up_optimizer(self, optimizer):
        self.optimizer = optimizer
        self._optimizer = optimizer
        self._loss_scale_optimizer = None
        if optimizer is None:
            return
        with self.strategy.scope():
            if (self.model.dtype_policy.compute_dtype == "float16"
                    and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)):
                self.optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                self._loss_scale_optimizer = self.optimizer
                self._optimizer = self.optimizer.inner_optimizer
            self.optimizer.build(self.model.trainable_variables)
        set_options = [name for name in _UNSUPPORTED_OPTIMIZER_OPTIONS if getattr(self._optimizer, name, None)]
        if set_options:
            raise ValueError(f"Trainer applies updates with the optimizer's update_step, so the optimizer options "
                             f"{set_options} would be ignored; unset them (the Trainer clips and accumulates).")
        if not self.strategy.extended.variable_created_in_scope(self._optimizer.iterations.value):
            raise ValueError("The optimizer was not created under the strategy's scope; create it inside "
                             "`with strategy.scope():`.")

    def _set_up_checkpoints(self, keep_checkpoint_max):
        tracked = {"model": self.model,
                   # Keras does not track some model state for tf.train.Checkpoint (e.g. the dropout seed
                   # generators); listing the non-trainable variables makes a resumed run exact.
                   "model_non_trainable_variables": list(self.model.non_trainable_variables)}
        if self.optimizer is not None:
            tracked["optimizer"] = self.optimizer
        self.checkpoint = tf.train.Checkpoint(**tracked)
        self._is_chief = self.strategy.extended.should_checkpoint
        if self._is_chief:
            write_dir = self.model_dir
        else:
            # The standard multi-worker pattern: every worker saves (saving may use collectives), only
            # the chief's files are kept.
            write_dir = os.path.join(self.model_dir, f"workertemp_{self.strategy.cluster_resolver.task_id}")
        self._checkpoint_write_dir = write_dir
        self._checkpoint_manager = tf.train.CheckpointManager(
            self.checkpoint, write_dir, max_to_keep=keep_checkpoint_max or None, checkpoint_name="ckpt")

    # ---- checkpoints --------------------------------------------------------------------------------

    @property
    def step(self):
        """The number of optimizer steps taken: the optimizer's `iterations`."""
        if self._optimizer is None:
            raise ValueError("This Trainer has no optimizer, so no step counter; create it with the optimizer "
                             "to read the step of a restored training checkpoint.")
        return int(self._optimizer.iterations.numpy())

    def restore(self, checkpoint_path=None):
        """Restores `checkpoint_path` (default: the latest in model_dir); returns the path, or None if none.

        Evaluation-only trainers (optimizer None) restore the model and skip the optimizer's values.
        """
        checkpoint_path = checkpoint_path or tf.train.latest_checkpoint(self.model_dir)
        if checkpoint_path is None:
            return None
        status = self.checkpoint.restore(checkpoint_path)
        if self.optimizer is None:
            status.expect_partial()
        status.assert_existing_objects_matched()
        logging.info("Restored %s", checkpoint_path)
        return checkpoint_path

    def _save_checkpoint(self):
        path = self._checkpoint_manager.save(checkpoint_number=self.step)
        if not self._is_chief:
            tf.io.gfile.rmtree(self._checkpoint_write_dir)
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    # ---- training -----------------------------------------------------------------------------------

    def train(self, dataset_fn, num_train_steps, global_batch_size):
        """Trains until the optimizer has taken `num_train_steps` steps, resuming from model_dir's latest checkpoint.

        Returns {"step", "loss", metrics..., "learning_rate"}: the last loop's mean loss and metrics. Raises
        TrainingPreempted after SIGTERM (with a saved checkpoint) and NonFiniteLossError on a NaN/Inf loss.
        """
        if self.optimizer is None or self._loss_fn is None:
            raise ValueError("Trainer.train needs an optimizer and a loss_fn; this Trainer was created without.")
        self.restore()
        start_step = self.step
        if start_step >= num_train_steps:
            logging.info("Already at step %d of %d; nothing to train.", start_step, num_train_steps)
            return {"step": start_step}
        logging.info("Training from step %d to %d, global batch %d (%d replicas x %d micro-batches).",
                     start_step, num_train_steps, global_batch_size, self.strategy.num_replicas_in_sync,
                     self._accumulation_steps)
        train_steps = self.make_train_function(dataset_fn, global_batch_size, skip_steps=start_step)
        last_checkpoint = tf.train.latest_checkpoint(self.model_dir)
        rate = _Rate(start_step, num_train_steps, global_batch_size)
        with _SigtermFlag(self) as sigterm, self._summary_writer().as_default():
            while self.step < num_train_steps:
                step = self.step
                next_save = (step // self._save_checkpoints_steps + 1) * self._save_checkpoints_steps
                num_steps = min(self._steps_per_loop, num_train_steps - step, next_save - step)
                results = train_steps(num_steps, last_checkpoint)
                crossed_log_step = self.step // self._log_every_steps > step // self._log_every_steps
                if crossed_log_step or self.step == num_train_steps:
                    self._log(results, rate)
                if self.step % self._save_checkpoints_steps == 0 or self.step == num_train_steps:
                    last_checkpoint = self._save_checkpoint()
                if self.step < num_train_steps and sigterm.stop_requested_on_any_worker():
                    if self.step % self._save_checkpoints_steps:
                        self._save_checkpoint()
                    raise TrainingPreempted(self.step, self.model_dir)
        return results

    def make_train_function(self, dataset_fn, global_batch_size, skip_steps=0):
        """The function `train` calls for each loop: `train_steps(num_steps, last_checkpoint=None) -> results`.

        It takes up to `num_steps` optimizer steps (one tf.function call, `steps_per_loop` at most is what
        `train` asks) on the data of `dataset_fn`, after skipping `skip_steps` global batches, and returns
        {"step", "loss", metrics..., "learning_rate"} as `train` does; `last_checkpoint` only names the
        checkpoint to fall back to in a NonFiniteLossError. Nothing is saved or logged: this is the bare
        step, for callers that time it (albert_tf.benchmarking) or drive their own loop.

        Example:
        >>> train_steps = trainer.make_train_function(dataset_fn, global_batch_size=16)  # doctest: +SKIP
        >>> train_steps(10)["step"]  # doctest: +SKIP
        10
        """
        if self.optimizer is None or self._loss_fn is None:
            raise ValueError("Trainer.make_train_function needs an optimizer and a loss_fn; this Trainer was "
                             "created without.")
        dataset = self._distribute(dataset_fn, global_batch_size, skip_steps=skip_steps,
                                   micro_batches=self._accumulation_steps)
        train_loop = tf.function(self._train_loop, autograph=False)
        loop_inputs = (iter(dataset), self._trace_metric_structure())
        compiled = False

        def train_steps(num_steps, last_checkpoint=None):
            nonlocal compiled
            if compiled:
                return self._run_loop(train_loop, loop_inputs, num_steps, last_checkpoint)
            # Tracing and compiling free most of what they allocate; handing those pages back as they go, not
            # only at the end, keeps them from adding up to the process's peak (BUILD_NOTES.md).
            with releasing_free_heap():
                results = self._run_loop(train_loop, loop_inputs, num_steps, last_checkpoint)
            compiled = True
            return results

        return train_steps

    def _run_loop(self, train_loop, loop_inputs, num_steps, last_checkpoint):
        """Runs one loop of `num_steps` steps; returns its mean loss and metrics and its last learning rate."""
        iterator, zero_metrics = loop_inputs
        step = self.step
        try:
            steps_done, loss_sum, metric_sums, learning_rate, last_loss = train_loop(
                iterator, tf.constant(num_steps), zero_metrics)
        except tf.errors.OutOfRangeError:
            raise ValueError(f"The training dataset ran out at step {step}; dataset_fn must return a repeating "
                             "dataset.") from None
        steps_done = int(steps_done)
        if not np.isfinite(float(last_loss)):
            raise NonFiniteLossError(step + steps_done, float(last_loss), last_checkpoint)
        return {"step": self.step, "loss": float(loss_sum) / steps_done,
                **{name: float(value) / steps_done for name, value in metric_sums.items()},
                "learning_rate": float(learning_rate)}

    def _train_loop(self, iterator, num_steps, zero_metrics):
        """Up to `num_steps` steps in one tf.function; stops early after a step with a non-finite loss."""

        def keep_going(steps_done, loss_sum, metric_sums, learning_rate, last_loss):
            return tf.logical_and(steps_done < num_steps, tf.math.is_finite(last_loss))

        def step(steps_done, loss_sum, metric_sums, learning_rate, last_loss):
            learning_rate = tf.cast(self._optimizer.learning_rate, tf.float32)
            loss, metrics = self.strategy.run(self._replica_train_step, args=(next(iterator),))
            # Every replica holds the same all-reduced values: read them from the first, without communication.
            last_loss = self.strategy.experimental_local_results(loss)[0]
            metric_sums = {name: metric_sums[name] + self.strategy.experimental_local_results(metrics[name])[0]
                           for name in metric_sums}
            return steps_done + 1, loss_sum + last_loss, metric_sums, learning_rate, last_loss

        return tf.while_loop(keep_going, step, (tf.constant(0), tf.constant(0.0), zero_metrics, tf.constant(0.0),
                                                tf.constant(0.0)))

    def _replica_train_step(self, batch):
        grads, loss, metrics = self._gradient_fn(batch)
        context = tf.distribute.get_replica_context()
        grads, loss, metrics = context.all_reduce(tf.distribute.ReduceOp.SUM, (grads, loss, metrics))
        finite = None
        if self._loss_scale_optimizer is not None:
            scale = self._loss_scale_optimizer.dynamic_scale
            grads = [grad / scale for grad in grads]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(grad)) for grad in grads])
        grads, _ = tf.clip_by_global_norm(grads, self._clip_norm)
        context.merge_call(self._apply_gradients, args=(grads, finite))
        return loss, metrics

    def _replica_gradients(self, batch):
        """This replica's gradient sum over its micro-batches, with loss and metrics scaled to global means."""
        if self._accumulation_steps == 1:
            return self._micro_batch_gradients(batch)

        def accumulate(index, grads, loss, metrics):
            micro_batch = tf.nest.map_structure(lambda tensor: tensor[index], batch)
            micro_grads, micro_loss, micro_metrics = self._micro_batch_gradients(micro_batch)
            return (index + 1, [a + b for a, b in zip(grads, micro_grads)], loss + micro_loss,
                    {name: metrics[name] + micro_metrics[name] for name in metrics})

        first = self._micro_batch_gradients(tf.nest.map_structure(lambda tensor: tensor[0], batch))
        _, grads, loss, metrics = tf.while_loop(
            lambda index, *_: index < self._accumulation_steps, accumulate, (tf.constant(1), *first))
        return grads, loss, metrics

    def _micro_batch_gradients(self, batch):
        weight = 1.0 / (self.strategy.num_replicas_in_sync * self._accumulation_steps)
        with tf.GradientTape() as tape:
            loss, metrics = self._loss_fn(self.model, batch)
            _check_float32_scalars(loss, metrics)
            scaled_loss = loss * weight
            if self._loss_scale_optimizer is not None:
                scaled_loss = self._loss_scale_optimizer.scale_loss(scaled_loss)
        variables = self.model.trainable_variables
        grads = tape.gradient(scaled_loss, variables)
        if self._trained_variables is None:
            # As the original, variables without a gradient are not updated at all (not even decayed).
            unused = [variable.path for variable, grad in zip(variables, grads) if grad is None]
            if unused:
                logging.warning("No gradient reaches %s; they are left unchanged.", unused)
            self._trained_variables = [variable for variable, grad in zip(variables, grads) if grad is not None]
        # Embedding lookups give IndexedSlices; dense sums are what the all-reduce, the accumulation loop
        # and the (dense) optimizer math need.
        grads = [tf.convert_to_tensor(grad) for grad in grads if grad is not None]
        return grads, loss * weight, {name: value * weight for name, value in metrics.items()}

    def _apply_gradients(self, strategy, grads, finite):
        """Cross-replica: one update per variable with the already reduced gradients, then step + 1."""
        optimizer = self._optimizer
        learning_rate = optimizer.learning_rate

        def update_variable(variable, grad):
            optimizer.update_step(grad, variable, learning_rate)

        def update():
            for grad, variable in zip(grads, self._trained_variables):
                strategy.extended.update(variable.value, update_variable, args=(grad,), group=False)

        def apply():
            if finite is None:
                update()
            else:
                tf.cond(strategy.experimental_local_results(finite)[0],
                        lambda: _update_and_grow_scale(update, self._loss_scale_optimizer),
                        lambda: _shrink_scale(self._loss_scale_optimizer))

        if self._compile_update:
            tf.function(apply, jit_compile=True, autograph=False)()
        else:
            apply()
        optimizer.iterations.assign_add(1)

    def _trace_metric_structure(self):
        """Zeros shaped like loss_fn's metrics (the training loop carries their sums), checked once."""
        loss_fn = tf.function(lambda batch: self._loss_fn(self.model, batch), autograph=False)
        _, metrics = loss_fn.get_concrete_function(self._element_spec).structured_outputs
        return {name: tf.constant(0.0) for name in metrics}

    # ---- data ---------------------------------------------------------------------------------------

    def _distribute(self, dataset_fn, global_batch_size, skip_steps, micro_batches):
        replicas = self.strategy.num_replicas_in_sync
        if global_batch_size % (replicas * micro_batches):
            raise ValueError(f"The global batch size {global_batch_size} must be divisible by {replicas} replica(s) "
                             f"x {micro_batches} gradient accumulation step(s).")
        batch_size = global_batch_size // (replicas * micro_batches)

        def dataset_for_pipeline(input_context):
            replicas_per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
            dataset = dataset_fn(input_context, batch_size, skip_steps * micro_batches * replicas_per_pipeline)
            self._element_spec = dataset.element_spec  # one replica's (micro-)batch, for _trace_metric_structure
            if micro_batches > 1:
                dataset = dataset.batch(micro_batches, drop_remainder=True)
            return dataset

        return self.strategy.distribute_datasets_from_function(dataset_for_pipeline)

    # ---- evaluation and prediction ------------------------------------------------------------------

    def evaluate(self, dataset_fn, metrics_fn, global_batch_size, max_steps=None):
        """Runs metrics_fn over a finite dataset (at most max_steps global batches); returns {name: ratio}."""
        if metrics_fn not in self._evaluate_functions:
            replica_metrics = self._compiled(lambda replica_batch: metrics_fn(self.model, replica_batch))

            def evaluate_step(batch):
                sums = self.strategy.run(replica_metrics, args=(batch,))
                return tf.nest.map_structure(
                    lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), sums)

            self._evaluate_functions[metrics_fn] = tf.function(evaluate_step, reduce_retracing=True, autograph=False)
        evaluate_step = self._evaluate_functions[metrics_fn]
        totals = {}
        steps = 0
        for batch in self._distribute(dataset_fn, global_batch_size, skip_steps=0, micro_batches=1):
            for name, (numerator, denominator) in evaluate_step(batch).items():
                previous = totals.get(name, (0.0, 0.0))
                totals[name] = (previous[0] + float(numerator), previous[1] + float(denominator))
            steps += 1
            if steps == max_steps:
                break
        empty = [name for name, (_, denominator) in totals.items() if denominator == 0]
        if not totals or empty:
            raise ValueError(f"Evaluation over {steps} batch(es) gave no weight to metric(s) {empty or 'at all'}; "
                             "is the evaluation dataset empty?")
        logging.info("Evaluated %d batch(es): %s", steps, {name: n / d for name, (n, d) in totals.items()})
        return {name: numerator / denominator for name, (numerator, denominator) in totals.items()}

    def predict(self, dataset_fn, predict_fn, global_batch_size):
        """Runs predict_fn over a finite dataset; returns {name: numpy array}, examples in dataset order.

        Outputs are gathered from every replica (and worker) in replica order, which is the dataset's
        order for a single input pipeline; with several workers, carry an example id to reorder.
        """
        if predict_fn not in self._predict_functions:
            replica_predict = self._compiled(lambda replica_batch: predict_fn(self.model, replica_batch))

            def predict_step(batch):
                outputs = self.strategy.run(replica_predict, args=(batch,))
                return tf.nest.map_structure(lambda value: self.strategy.gather(value, axis=0), outputs)

            self._predict_functions[predict_fn] = tf.function(predict_step, reduce_retracing=True, autograph=False)
        predict_step = self._predict_functions[predict_fn]
        chunks = {}
        for batch in self._distribute(dataset_fn, global_batch_size, skip_steps=0, micro_batches=1):
            for name, value in predict_step(batch).items():
                chunks.setdefault(name, []).append(value.numpy())
        return {name: np.concatenate(values, axis=0) for name, values in chunks.items()}

    # ---- logging ------------------------------------------------------------------------------------

    def _summary_writer(self):
        if self._summary_dir and self.strategy.extended.should_save_summary:
            return tf.summary.create_file_writer(self._summary_dir)
        return tf.summary.create_noop_writer()

    def _log(self, results, rate):
        steps_per_second, eta_seconds = rate.update(results["step"])
        scalars = {name: value for name, value in results.items() if name != "step"}
        scalars.update(examples_per_second=steps_per_second * rate.global_batch_size,
                       steps_per_second=steps_per_second)
        metrics = " ".join(f"{name}={value:.4f}" for name, value in results.items()
                           if name not in ("step", "loss", "learning_rate"))
        logging.info("step %d/%d loss=%.4f lr=%.3e examples/s=%.1f steps/s=%.2f eta=%s %s", results["step"],
                     rate.total_steps, results["loss"], results["learning_rate"], scalars["examples_per_second"],
                     steps_per_second, datetime.timedelta(seconds=round(eta_seconds)), metrics)
        write_scalars(scalars, results["step"])


def _check_float32_scalars(loss, metrics):
    if loss.dtype != tf.float32 or loss.shape.rank != 0:
        raise ValueError(f"loss_fn must return a float32 scalar loss (compute losses in float32), got {loss!r}.")
    if not isinstance(metrics, dict):
        raise ValueError(f"loss_fn must return (loss, dict of metrics), got metrics {metrics!r}.")
    for name, value in metrics.items():
        if value.dtype != tf.float32 or value.shape.rank != 0:
            raise ValueError(f"loss_fn metric {name!r} must be a float32 scalar, got {value!r}.")


def _warn_if_xla_leaves_bfloat16_units_idle(strategy):
    """A CPU with bfloat16 units gains nothing from mixed_bfloat16 under an XLA that computes matmuls in float32."""
    on_cpu = not tf.config.list_logical_devices("GPU") and not isinstance(strategy, tf.distribute.TPUStrategy)
    if on_cpu and bfloat16_support.cpu_bfloat16_units() and bfloat16_support.xla_bfloat16_dot_dtype("/cpu:0") == "f32":
        logging.warning("This CPU has bfloat16 units, but XLA computes bfloat16 matmuls in float32 here, so "
                        "mixed_bfloat16 with jit_compile leaves them idle; TensorFlow's own kernels (--nojit_compile) "
                        "use them. Compare the two with run_scripts.benchmark.")


def _update_and_grow_scale(update, loss_scale_optimizer):
    """The LossScaleOptimizer rule for a finite step: update, and double the scale every growth period."""
    update()
    grow = tf.equal(loss_scale_optimizer.step_counter, loss_scale_optimizer.dynamic_growth_steps - 1)
    loss_scale_optimizer.step_counter.assign(tf.where(grow, tf.zeros_like(loss_scale_optimizer.step_counter),
                                                      loss_scale_optimizer.step_counter + 1))
    loss_scale_optimizer.dynamic_scale.assign(tf.where(grow, loss_scale_optimizer.dynamic_scale * 2.0,
                                                       loss_scale_optimizer.dynamic_scale))


def _shrink_scale(loss_scale_optimizer):
    """The LossScaleOptimizer rule for a step with Inf/NaN gradients: skip it and halve the scale."""
    loss_scale_optimizer.step_counter.assign(tf.zeros_like(loss_scale_optimizer.step_counter))
    loss_scale_optimizer.dynamic_scale.assign(loss_scale_optimizer.dynamic_scale * 0.5)


class _Rate:
    """Steps per second since the previous log, and the time left at that rate."""

    def __init__(self, start_step, total_steps, global_batch_size):
        self.total_steps = total_steps
        self.global_batch_size = global_batch_size
        self._step = start_step
        self._time = time.monotonic()

    def update(self, step):
        now = time.monotonic()
        steps_per_second = (step - self._step) / max(now - self._time, 1e-9)
        self._step, self._time = step, now
        return steps_per_second, (self.total_steps - step) / max(steps_per_second, 1e-9)


class _SigtermFlag:
    """While active, SIGTERM only sets a flag, checked between loops (and agreed on by all workers)."""

    def __init__(self, trainer):
        self._strategy = trainer.strategy
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

    def __exit__(self, *exc_info):
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
        return False
