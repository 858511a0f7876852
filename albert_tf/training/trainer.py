"""One strategy-aware custom training loop, shared by pretraining and fine-tuning.

Keras 3 `model.fit` breaks under MultiWorkerMirroredStrategy, so training runs as a tf.function that
takes `steps_per_loop` steps over a distributed iterator (what TPUs need), each step `strategy.run`
on every replica (albert_tf.training.train_step). Checkpoints resume the step counter with the optimizer
slots, the schedule and the data position (albert_tf.training.checkpointing); summaries and the progress
log are albert_tf.training.summaries. `jit_compile="auto"` takes the faster of XLA and TensorFlow's own
kernels (albert_tf.training.compile_choice).
"""

import dataclasses
import functools
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.training import bfloat16_support, compile_choice
from albert_tf.training.checkpointing import SigtermFlag, TrainingCheckpoints, TrainingPreempted
from albert_tf.training.host_allocator import release_free_heap, releasing_start_up_memory
from albert_tf.training.summaries import ProgressLog, summary_writer
from albert_tf.training.train_step import TrainStep, compiled, inner_optimizer, prepare_optimizer


class Trainer:
    """Trains, evaluates and predicts with a Keras model under any tf.distribute strategy.

    Create the model and optimizer under `strategy.scope()` and build the model (call it once) before
    creating the Trainer. Call `set_mixed_precision` before building the model; a float16 model gets
    dynamic loss scaling (its optimizer is wrapped in `keras.optimizers.LossScaleOptimizer`). With
    `jit_compile=True`, XLA compiles each replica's gradients, evaluation metrics and predictions and, under
    OneDeviceStrategy, the update too; False runs TensorFlow's own kernels. "auto" takes the faster path
    for the device, the precision and the model when training starts (a rule, a cached choice or a
    measurement, see albert_tf.training.compile_choice), and evaluation and prediction follow it; before
    any training they take the rule's path, else XLA. A measurement restores the weights, optimizer slots,
    step counter and dropout seeds it stepped, and reads its own copy of the data, so training continues
    exactly as on the chosen path.

    The callbacks:
    - `loss_fn(model, batch) -> (loss, metrics)`: the float32 scalar mean loss of this replica's batch and a
      dict of float32 scalar metrics (means over the batch); the trainer divides both by the number of
      replicas and micro-batches, so logs show means over the global batch. Declaring the metrics' names
      (`albert_tf.training.metric_names.returns_metrics`) spares a trace of the model that would learn them.
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
    >>> import keras
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
        self._steps_per_loop = steps_per_loop
        self._accumulation_steps = gradient_accumulation_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._log_every_steps = log_every_steps
        self._summary_dir = summary_dir
        self._jit_compile = compile_choice.parse_jit_compile(jit_compile, source="Trainer jit_compile")
        self._jit_choice = (None if self._jit_compile == compile_choice.AUTO
                            else compile_choice.forced_choice(self._jit_compile))
        self._inference_choice = None
        self._inference_functions_jit_compile = None
        self._loss_fn = loss_fn
        self._predict_functions = {}
        self._evaluate_functions = {}
        self.optimizer = None if optimizer is None else prepare_optimizer(strategy, model, optimizer)
        self._train_step = None
        if self.optimizer is not None and loss_fn is not None:
            self._train_step = TrainStep(strategy, model, self.optimizer, loss_fn,
                                         accumulation_steps=gradient_accumulation_steps, clip_norm=clip_norm)
        self._checkpoints = TrainingCheckpoints(strategy, model, self.optimizer, model_dir, keep_checkpoint_max)
        self.checkpoint = self._checkpoints.checkpoint
        if self._jit_compile is True and model.dtype_policy.compute_dtype == "bfloat16":
            _warn_if_xla_leaves_bfloat16_units_idle(strategy)

    # ---- checkpoints --------------------------------------------------------------------------------

    @property
    def step(self):
        """The number of optimizer steps taken: the optimizer's `iterations`."""
        if self.optimizer is None:
            raise ValueError("This Trainer has no optimizer, so no step counter; create it with the optimizer "
                             "to read the step of a restored training checkpoint.")
        return int(inner_optimizer(self.optimizer).iterations.numpy())

    @property
    def jit_compile_choice(self):
        """The training path and how it was decided (a compile_choice.JitCompileChoice); None while
        `jit_compile="auto"` has not chosen yet (it chooses when training starts)."""
        return self._jit_choice

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

    # ---- training -----------------------------------------------------------------------------------

    def train(self, dataset_fn, num_train_steps, global_batch_size):
        """Trains until the optimizer has taken `num_train_steps` steps, resuming from model_dir's latest checkpoint.

        Returns {"step", "loss", metrics..., "learning_rate"}: the last loop's mean loss and metrics. Raises
        TrainingPreempted after SIGTERM (with a saved checkpoint) and NonFiniteLossError on a NaN/Inf loss.
        """
        if self._train_step is None:
            raise ValueError("Trainer.train needs an optimizer and a loss_fn; this Trainer was created without.")
        self.restore()
        start_step = self.step
        if start_step >= num_train_steps:
            logging.info("Already at step %d of %d; nothing to train.", start_step, num_train_steps)
            return {"step": start_step}
        logging.info("Training from step %d to %d, global batch %d (%d replicas x %d micro-batches).",
                     start_step, num_train_steps, global_batch_size, self.strategy.num_replicas_in_sync,
                     self._accumulation_steps)
        train_steps = self.make_train_function(dataset_fn, global_batch_size, skip_steps=start_step,
                                               steps_left=num_train_steps - start_step)
        last_checkpoint = tf.train.latest_checkpoint(self.model_dir)
        progress = ProgressLog(start_step, num_train_steps, global_batch_size)
        with SigtermFlag(self.strategy) as sigterm, summary_writer(self.strategy, self._summary_dir).as_default():
            while self.step < num_train_steps:
                step = self.step
                next_save = (step // self._save_checkpoints_steps + 1) * self._save_checkpoints_steps
                num_steps = min(self._steps_per_loop, num_train_steps - step, next_save - step)
                results = train_steps(num_steps, last_checkpoint)
                crossed_log_step = self.step // self._log_every_steps > step // self._log_every_steps
                if crossed_log_step or self.step == num_train_steps:
                    progress.log(results)
                if self.step % self._save_checkpoints_steps == 0 or self.step == num_train_steps:
                    last_checkpoint = self._checkpoints.save(self.step)
                if self.step < num_train_steps and sigterm.stop_requested_on_any_worker():
                    if self.step % self._save_checkpoints_steps:
                        self._checkpoints.save(self.step)
                    raise TrainingPreempted(self.step, self.model_dir)
        return results

    def make_train_function(self, dataset_fn, global_batch_size, skip_steps=0, steps_left=None):
        """The function `train` calls for each loop: `train_steps(num_steps, last_checkpoint=None) -> results`.

        It takes up to `num_steps` optimizer steps (one tf.function call, `steps_per_loop` at most is what
        `train` asks) on the data of `dataset_fn`, after skipping `skip_steps` global batches, and returns
        {"step", "loss", metrics..., "learning_rate"} as `train` does; `last_checkpoint` only names the
        checkpoint to fall back to in a NonFiniteLossError. Nothing is saved or logged: this is the bare
        step, for callers that time it (albert_tf.benchmarking) or drive their own loop. `steps_left`, the steps
        the caller will take where it knows them, lets `jit_compile="auto"` skip a trial too long for the run.

        Example:
        >>> train_steps = trainer.make_train_function(dataset_fn, global_batch_size=16)  # doctest: +SKIP
        >>> train_steps(10)["step"]  # doctest: +SKIP
        10
        """
        if self._train_step is None:
            raise ValueError("Trainer.make_train_function needs an optimizer and a loss_fn; this Trainer was "
                             "created without.")
        dataset, element_spec = _distribute(self.strategy, dataset_fn, global_batch_size, skip_steps=skip_steps,
                                            micro_batches=self._accumulation_steps)
        if self._jit_choice is None:
            self._jit_choice = self._choose_jit_compile(dataset_fn, global_batch_size, skip_steps, element_spec,
                                                        steps_left)
            logging.info("jit_compile=auto trains with %s.", self._jit_choice.describe())
            if compile_choice.is_trial_child():
                logging.info("This process was started to time the compile paths; it ends here.")
                sys.exit(0)
        return self._train_step.loop_function(iter(dataset), element_spec, self._jit_choice.jit_compile)

    # ---- jit_compile="auto" -------------------------------------------------------------------------

    def _choose_jit_compile(self, dataset_fn, global_batch_size, skip_steps, element_spec, steps_left):
        """The rule's path, else the cached one, else the faster path measured on the first batch (cached)."""
        device = compile_choice.describe_device(self.strategy)
        key = compile_choice.cache_key(
            device, self.model.dtype_policy.name, compile_choice.model_fingerprint(self.model, self._loss_fn),
            compile_choice.batch_signature(element_spec), replicas=self.strategy.num_replicas_in_sync,
            accumulation_steps=self._accumulation_steps, strategy=type(self.strategy).__name__)
        cache = compile_choice.ChoiceCache()
        choice = compile_choice.rule_choice(device, self.model.dtype_policy.compute_dtype,
                                            lengths_vary=compile_choice.batch_lengths_vary(element_spec),
                                            steps=steps_left) or cache.lookup(key)
        # Every worker must take the same path (and measure together): a rule's or a cached choice counts only
        # where every worker holds it.
        held = self._mean_over_workers([float(choice is not None and choice.jit_compile),
                                        float(choice is not None and not choice.jit_compile)])
        if choice is not None and held[int(not choice.jit_compile)] == 1.0:
            return choice
        command = compile_choice.trial_command()
        if command and not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            choice = _measure_in_child_process(command, cache, key)
            if choice is not None:
                return choice
        choice = compile_choice.measured_choice(
            self._measure_paths(dataset_fn, global_batch_size, skip_steps, element_spec))
        cache.store(key, choice)
        return choice

    def _measure_paths(self, dataset_fn, global_batch_size, skip_steps, element_spec):
        """Steps/s of each path, timed on the first batch repeated; the training state is restored after, and
        only the faster path's functions are kept."""

        def first_batch_dataset_fn(input_context, batch_size, skip_batches):
            return dataset_fn(input_context, batch_size, skip_batches).take(1).repeat()

        trial_dataset, _ = _distribute(self.strategy, first_batch_dataset_fn, global_batch_size,
                                       skip_steps=skip_steps, micro_batches=self._accumulation_steps)
        iterator = iter(trial_dataset)
        trials = {}

        def run_steps(path, num_steps):
            if path not in trials:
                trials[path] = self._train_step.trial_function(iterator, element_spec, path)
            trials[path](num_steps)

        def free_path(path):
            del trials[path]
            self._train_step.forget_path(path)
            release_free_heap()

        restore = compile_choice.snapshot_variables(list(self.model.variables) + list(self.optimizer.variables))
        try:
            with releasing_start_up_memory():
                rates = compile_choice.measure_paths(run_steps, free_path=free_path, combine=self._mean_over_workers)
        finally:
            restore()
        trials.clear()
        self._train_step.forget_path(rates[True] < rates[False])
        release_free_heap()
        return rates

    def _mean_over_workers(self, values):
        """`values` averaged over the workers of a MultiWorkerMirroredStrategy; as they are elsewhere."""
        if not isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return values

        @tf.function
        def mean(local_values):
            per_replica = self.strategy.run(tf.identity, args=(local_values,))
            return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

        return [float(value) for value in mean(tf.constant(values, tf.float32)).numpy()]

    def _inference_jit_compile(self):
        """The path of evaluation and prediction: training's, else the rule's (XLA where there is none)."""
        choice = self._jit_choice
        if choice is None:
            if self._inference_choice is None:
                self._inference_choice = compile_choice.inference_choice(
                    compile_choice.describe_device(self.strategy), self.model.dtype_policy.compute_dtype)
                logging.info("jit_compile=auto evaluates and predicts with %s.", self._inference_choice.describe())
            choice = self._inference_choice
        if choice.jit_compile != self._inference_functions_jit_compile:
            self._evaluate_functions.clear()
            self._predict_functions.clear()
            self._inference_functions_jit_compile = choice.jit_compile
        return choice.jit_compile

    # ---- evaluation and prediction ------------------------------------------------------------------

    def evaluate(self, dataset_fn, metrics_fn, global_batch_size, max_steps=None):
        """Runs metrics_fn over a finite dataset (at most max_steps global batches); returns {name: ratio}."""
        dataset, _ = _distribute(self.strategy, dataset_fn, global_batch_size, skip_steps=0, micro_batches=1)

        def evaluate_step(replica_metrics, batch):
            sums = self.strategy.run(replica_metrics, args=(batch,))
            return tf.nest.map_structure(
                lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), sums)

        evaluate_step = self._inference_step(self._evaluate_functions, metrics_fn, dataset, evaluate_step)
        totals = {}
        steps = 0
        for batch in dataset:
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
        dataset, _ = _distribute(self.strategy, dataset_fn, global_batch_size, skip_steps=0, micro_batches=1)

        def predict_step(replica_predict, batch):
            outputs = self.strategy.run(replica_predict, args=(batch,))
            return tf.nest.map_structure(lambda value: self.strategy.gather(value, axis=0), outputs)

        predict_step = self._inference_step(self._predict_functions, predict_fn, dataset, predict_step)
        chunks = {}
        for batch in dataset:
            for name, value in predict_step(batch).items():
                chunks.setdefault(name, []).append(value.numpy())
        return {name: np.concatenate(values, axis=0) for name, values in chunks.items()}

    def _inference_step(self, functions, model_fn, dataset, step):
        """`step(replica_fn, batch)` as a tf.function over `dataset`'s batches, where `replica_fn` runs
        `model_fn(model, replica_batch)` on the inference path; kept in `functions` by `model_fn` and batch spec.

        Over a tf.data dataset (one CPU) it is traced once, for the element spec, which leaves the batch size and,
        with dynamic padding, the length unknown: traced by the first batches' shapes it was traced up to three
        times (full batches, another length, the last partial batch). A distributed dataset's batches are traced
        as they come, relaxing the shapes that change."""
        jit_compile = self._inference_jit_compile()
        key = (model_fn, repr(dataset.element_spec))
        if key not in functions:
            replica_fn = compiled(lambda replica_batch: model_fn(self.model, replica_batch), jit_compile)
            bound_step = functools.partial(step, replica_fn)
            if isinstance(dataset, tf.data.Dataset):
                functions[key] = tf.function(bound_step, input_signature=[dataset.element_spec], autograph=False)
            else:
                functions[key] = tf.function(bound_step, reduce_retracing=True, autograph=False)
        return functions[key]


# AUTOTUNE then means as many parallel calls as cores (16 at most), and prefetch buffers still grow as they are read.
_WITHOUT_AUTOTUNING = tf.data.Options()
_WITHOUT_AUTOTUNING.autotune.enabled = False


def _distribute(strategy, dataset_fn, global_batch_size, skip_steps, micro_batches):
    """The distributed dataset of `dataset_fn`, and the element spec of one replica's (micro-)batch."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % (replicas * micro_batches):
        raise ValueError(f"The global batch size {global_batch_size} must be divisible by {replicas} replica(s) "
                         f"x {micro_batches} gradient accumulation step(s).")
    batch_size = global_batch_size // (replicas * micro_batches)
    element_specs = []

    def dataset_for_pipeline(input_context):
        replicas_per_pipeline = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        dataset = dataset_fn(input_context, batch_size, skip_steps * micro_batches * replicas_per_pipeline)
        element_specs.append(dataset.element_spec)
        if micro_batches > 1:
            dataset = dataset.batch(micro_batches, drop_remainder=True)
        return dataset

    if _is_one_cpu(strategy):
        # Deleting an iterator waits for tf.data's autotuning thread to wake by itself (TensorFlow 2.21): after as
        # long as the iterator had lived, up to a minute, at the end of every training run and prediction. A
        # strategy's distributed dataset autotunes the pipelines it builds per device; on one CPU the host's
        # pipeline is the device's, read without autotuning (BUILD_NOTES.md, "Optimization and the training loop").
        dataset = dataset_for_pipeline(tf.distribute.InputContext()).with_options(_WITHOUT_AUTOTUNING)
    else:
        # The strategies build every local pipeline here, so the element spec is known when this returns.
        dataset = strategy.distribute_datasets_from_function(dataset_for_pipeline)
    return dataset, element_specs[-1]


def _is_one_cpu(strategy) -> bool:
    if not isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return False
    device, = strategy.extended.worker_devices
    return tf.DeviceSpec.from_string(device).device_type == "CPU"


def _measure_in_child_process(command, cache, key):
    """The choice a child process running `command` measured and cached for `key`; None, with a warning, where it
    failed or cached none (the caller then measures in this process)."""
    logging.info("jit_compile=auto times both paths in a child process, so that this one holds only the path it "
                 "takes: %s", " ".join(command))
    environment = dict(os.environ, **{compile_choice.TRIAL_CHILD_VARIABLE: "1"})
    result = subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, check=False)
    choice = cache.measurement(key)
    if result.returncode == 0 and choice is not None:
        return dataclasses.replace(choice, reason=f"{choice.reason}, in a child process")
    last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
    problem = (f"failed (exit status {result.returncode}: {last_line})" if result.returncode
               else "cached no choice for this run")
    logging.warning("The compile-path trial in a child process %s; timing the paths in this process instead.",
                    problem)
    return None


def _warn_if_xla_leaves_bfloat16_units_idle(strategy):
    """A CPU with bfloat16 units gains nothing from mixed_bfloat16 under an XLA that computes matmuls in float32."""
    on_cpu = not tf.config.list_logical_devices("GPU") and not isinstance(strategy, tf.distribute.TPUStrategy)
    if on_cpu and bfloat16_support.cpu_bfloat16_units() and bfloat16_support.xla_bfloat16_dot_dtype("/cpu:0") == "f32":
        logging.warning("This CPU has bfloat16 units, but XLA computes bfloat16 matmuls in float32 here, so "
                        "mixed_bfloat16 with jit_compile leaves them idle; TensorFlow's own kernels (--nojit_compile) "
                        "use them. Compare the two with run_scripts.benchmark.")
