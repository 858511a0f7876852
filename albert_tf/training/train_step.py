"""The Trainer's optimizer step on every replica, and the loop of `steps_per_loop` steps in one tf.function.

A step computes the gradients of `gradient_accumulation_steps` micro-batches, sums them across
micro-batches and replicas (one all-reduce), unscales them under mixed_float16, clips the sum to global
norm `clip_norm` (the original's `tf.clip_by_global_norm(grads, 1.0)`) and applies the optimizer's
`update_step` to every variable that has a gradient. The optimizer's `iterations` is the step counter.
"""

import functools

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.training.checkpointing import NonFiniteLossError
from albert_tf.training.host_allocator import releasing_start_up_memory

_UNSUPPORTED_OPTIMIZER_OPTIONS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "use_ema",
                                  "gradient_accumulation_steps", "loss_scale_factor")


def compiled(replica_fn, jit_compile):
    """`replica_fn` compiled by XLA when `jit_compile`, else as it is (traced by its caller)."""
    return tf.function(replica_fn, jit_compile=True, autograph=False) if jit_compile else replica_fn


def inner_optimizer(optimizer):
    """The optimizer whose `update_step` a step applies and whose `iterations` counts the steps: the inner one
    of a LossScaleOptimizer."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.inner_optimizer
    return optimizer


def prepare_optimizer(strategy, model, optimizer):
    """`optimizer` built on the model's trainable variables, wrapped in a dynamic LossScaleOptimizer for a
    float16 model; fails on options a step would ignore and on an optimizer created outside the scope."""
    with strategy.scope():
        if (model.dtype_policy.compute_dtype == "float16"
                and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    updating = inner_optimizer(optimizer)
    set_options = [name for name in _UNSUPPORTED_OPTIMIZER_OPTIONS if getattr(updating, name, None)]
    if set_options:
        raise ValueError(f"Trainer applies updates with the optimizer's update_step, so the optimizer options "
                         f"{set_options} would be ignored; unset them (the Trainer clips and accumulates).")
    if not strategy.extended.variable_created_in_scope(updating.iterations.value):
        raise ValueError("The optimizer was not created under the strategy's scope; create it inside "
                         "`with strategy.scope():`.")
    return optimizer


class TrainStep:
    """One optimizer step of `loss_fn` on every replica of `strategy`, and the loop that takes several.

    `optimizer` comes from `prepare_optimizer`; a LossScaleOptimizer scales the loss, unscales the
    gradients and skips (and halves its scale on) a step whose gradients are not finite. A loop function
    is built for a path, `jit_compile` or not: with it, XLA compiles each replica's gradients and, under
    OneDeviceStrategy, the update too. Each path is traced once and shared by its loop functions, so the
    steps `jit_compile="auto"` times are compiled for the training that follows.
    """

    def __init__(self, strategy, model, optimizer, loss_fn, *, accumulation_steps, clip_norm):
        self._strategy = strategy
        self._model = model
        self._loss_fn = loss_fn
        self._optimizer = inner_optimizer(optimizer)
        self._loss_scale_optimizer = optimizer if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else None
        self._accumulation_steps = accumulation_steps
        self._clip_norm = clip_norm
        self._train_loops = {}
        self._trained_variables = None
        self._metric_names = None

    def loop_function(self, iterator, element_spec, jit_compile):
        """`train_steps(num_steps, last_checkpoint=None) -> results`: up to `num_steps` steps on the batches of
        the distributed `iterator` in one tf.function call, as `Trainer.make_train_function` describes.

        `element_spec` is one replica's (micro-)batch, which traces the structure of loss_fn's metrics unless
        loss_fn declares their names (`returns_metrics`).
        """
        train_loop = self._train_loop_function(jit_compile)
        loop_inputs = (iterator, self._zero_metrics(element_spec))
        compiled_once = False

        def train_steps(num_steps, last_checkpoint=None):
            nonlocal compiled_once
            if compiled_once:
                return self._run_loop(train_loop, loop_inputs, num_steps, last_checkpoint)
            # Tracing and compiling free most of what they allocate, and TensorFlow's import left library pages
            # resident that training never reads; handing both back keeps them out of the peak (BUILD_NOTES.md).
            with releasing_start_up_memory():
                results = self._run_loop(train_loop, loop_inputs, num_steps, last_checkpoint)
            compiled_once = True
            return results

        return train_steps

    def trial_function(self, iterator, element_spec, jit_compile):
        """`run(num_steps)`: `num_steps` steps of the `jit_compile` path on `iterator`, as loop_function's,
        without checking the loss: a trial on repeated batches, whose state the caller restores."""
        train_loop = self._train_loop_function(jit_compile)
        zero_metrics = self._zero_metrics(element_spec)

        def run(num_steps):
            int(train_loop(iterator, tf.constant(num_steps), zero_metrics)[0])  # waits for the steps

        return run

    def forget_path(self, jit_compile):
        """Drops the `jit_compile` path's traced (and compiled) functions, once the other path was chosen."""
        self._train_loops.pop(jit_compile, None)

    def _train_loop_function(self, jit_compile):
        if jit_compile not in self._train_loops:
            gradient_fn = compiled(self._replica_gradients, jit_compile)
            # One device holds every variable, so XLA can fuse the whole update. It holds 220 MB less than the
            # per-op update at ALBERT-base on CPU, at the same speed (BUILD_NOTES.md, "Speed and memory").
            # Other strategies update each variable's copies through their own cross-device machinery.
            compile_update = jit_compile and isinstance(self._strategy, tf.distribute.OneDeviceStrategy)
            train_loop = functools.partial(self._train_loop, gradient_fn=gradient_fn, compile_update=compile_update)
            self._train_loops[jit_compile] = tf.function(train_loop, autograph=False)
        return self._train_loops[jit_compile]

    # ---- the loop -----------------------------------------------------------------------------------

    def _step(self):
        return int(self._optimizer.iterations.numpy())

    def _run_loop(self, train_loop, loop_inputs, num_steps, last_checkpoint):
        """Runs one loop of `num_steps` steps; returns its mean loss and metrics and its last learning rate."""
        iterator, zero_metrics = loop_inputs
        step = self._step()
        try:
            steps_done, loss_sum, metric_sums, learning_rate, last_loss = train_loop(
                iterator, tf.constant(num_steps), zero_metrics)
        except tf.errors.OutOfRangeError:
            raise ValueError(f"The training dataset ran out at step {step}; dataset_fn must return a repeating "
                             "dataset.") from None
        steps_done = int(steps_done)
        if not np.isfinite(float(last_loss)):
            raise NonFiniteLossError(step + steps_done, float(last_loss), last_checkpoint)
        return {"step": self._step(), "loss": float(loss_sum) / steps_done,
                **{name: float(value) / steps_done for name, value in metric_sums.items()},
                "learning_rate": float(learning_rate)}

    def _train_loop(self, iterator, num_steps, zero_metrics, *, gradient_fn, compile_update):
        """Up to `num_steps` steps in one tf.function; stops early after a step with a non-finite loss."""
        replica_train_step = functools.partial(self._replica_train_step, gradient_fn=gradient_fn,
                                               compile_update=compile_update)

        def keep_going(steps_done, loss_sum, metric_sums, learning_rate, last_loss):
            return tf.logical_and(steps_done < num_steps, tf.math.is_finite(last_loss))

        def step(steps_done, loss_sum, metric_sums, learning_rate, last_loss):
            learning_rate = tf.cast(self._optimizer.learning_rate, tf.float32)
            loss, metrics = self._strategy.run(replica_train_step, args=(next(iterator),))
            # Every replica holds the same all-reduced values: read them from the first, without communication.
            last_loss = self._strategy.experimental_local_results(loss)[0]
            metric_sums = {name: metric_sums[name] + self._strategy.experimental_local_results(metrics[name])[0]
                           for name in metric_sums}
            return steps_done + 1, loss_sum + last_loss, metric_sums, learning_rate, last_loss

        return tf.while_loop(keep_going, step, (tf.constant(0), tf.constant(0.0), zero_metrics, tf.constant(0.0),
                                                tf.constant(0.0)))

    def _zero_metrics(self, element_spec):
        """A zero per metric of loss_fn (the training loop carries their sums): the names it declares
        (`returns_metrics`), else those a trace of it returns."""
        if self._metric_names is None:
            declared = getattr(self._loss_fn, "metric_names", None)
            self._metric_names = declared if declared is not None else self._traced_metric_names(element_spec)
        return {name: tf.constant(0.0) for name in self._metric_names}

    def _traced_metric_names(self, element_spec):
        loss_fn = tf.function(lambda batch: self._loss_fn(self._model, batch), autograph=False)
        _, metrics = loss_fn.get_concrete_function(element_spec).structured_outputs
        return tuple(metrics)

    def _check_metric_names(self, metrics):
        if sorted(metrics) != sorted(self._metric_names):
            raise ValueError(f"The loss function {getattr(self._loss_fn, '__name__', self._loss_fn)!r} returned "
                             f"metrics {sorted(metrics)} but declares {sorted(self._metric_names)}.")

    # ---- one step -----------------------------------------------------------------------------------

    def _replica_train_step(self, batch, *, gradient_fn, compile_update):
        grads, loss, metrics = gradient_fn(batch)
        self._check_metric_names(metrics)
        context = tf.distribute.get_replica_context()
        grads, loss, metrics = context.all_reduce(tf.distribute.ReduceOp.SUM, (grads, loss, metrics))
        finite = None
        if self._loss_scale_optimizer is not None:
            scale = self._loss_scale_optimizer.dynamic_scale
            grads = [grad / scale for grad in grads]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(grad)) for grad in grads])
        grads, _ = tf.clip_by_global_norm(grads, self._clip_norm)
        context.merge_call(self._apply_gradients, args=(grads, finite), kwargs={"compile_update": compile_update})
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
        weight = 1.0 / (self._strategy.num_replicas_in_sync * self._accumulation_steps)
        with tf.GradientTape() as tape:
            loss, metrics = self._loss_fn(self._model, batch)
            _check_float32_scalars(loss, metrics)
            scaled_loss = loss * weight
            if self._loss_scale_optimizer is not None:
                scaled_loss = self._loss_scale_optimizer.scale_loss(scaled_loss)
        variables = self._model.trainable_variables
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

    def _apply_gradients(self, strategy, grads, finite, *, compile_update):
        """Cross-replica: one update per variable with the already reduced gradients, then step + 1."""
        optimizer = self._optimizer
        learning_rate = optimizer.learning_rate

        def update_variable(variable, grad):
            # Without it TensorFlow's executor runs the update's gradient-free parts (beta_1 * m, beta_2 * v,
            # the weight decay, LAMB's weight norm) as soon as the step starts and holds their results through
            # the backward pass: 144 MiB at ALBERT-base (BUILD_NOTES.md, "Speed and memory").
            with tf.control_dependencies([grad]):
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

        if compile_update:
            tf.function(apply, jit_compile=True, autograph=False)()
        else:
            apply()
        optimizer.iterations.assign_add(1)


def _check_float32_scalars(loss, metrics):
    if loss.dtype != tf.float32 or loss.shape.rank != 0:
        raise ValueError(f"loss_fn must return a float32 scalar loss (compute losses in float32), got {loss!r}.")
    if not isinstance(metrics, dict):
        raise ValueError(f"loss_fn must return (loss, dict of metrics), got metrics {metrics!r}.")
    for name, value in metrics.items():
        if value.dtype != tf.float32 or value.shape.rank != 0:
            raise ValueError(f"loss_fn metric {name!r} must be a float32 scalar, got {value!r}.")


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
