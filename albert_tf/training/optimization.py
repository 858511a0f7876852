"""The original ALBERT optimizers (AdamW and LAMB) and learning-rate schedule, as Keras 3 objects.

Both optimizers follow google-research/albert `optimization.AdamWeightDecayOptimizer` and
`lamb_optimizer.LAMBOptimizer` exactly: Adam moments WITHOUT bias correction, L2 weight decay added to
the update (not to the loss) except for excluded variables, and for LAMB a per-variable trust ratio
||w|| / ||update||. Keras's own `keras.optimizers.Lamb` and `AdamW` bias-correct and decay differently,
so they do not reproduce ALBERT training.
"""

import re

import keras
import tensorflow as tf
from keras import ops

DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_NAMES = ("lamb", "adamw")


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original schedule: polynomial decay to 0, overridden by a linear warmup.

    With `s = step - start_warmup_step`, the rate is `initial_learning_rate * s / num_warmup_steps`
    while `s < num_warmup_steps`, else `initial_learning_rate * (1 - min(step, num_train_steps) /
    num_train_steps) ** power`. Decay counts from step 0, not from the end of warmup, so the rate jumps
    from `initial_learning_rate * (num_warmup_steps - 1) / num_warmup_steps` down to the decayed value
    at the first step after warmup: that is the original's behaviour and is kept.

    Example:
    >>> schedule = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    >>> round(float(schedule(5)), 6), round(float(schedule(50)), 6)
    (0.0005, 0.0005)
    """

    def __init__(self, initial_learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0,
                 power=1.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}.")
        self.initial_learning_rate = initial_learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.start_warmup_step = start_warmup_step
        self.power = power

    def __call__(self, step):
        initial_learning_rate = ops.convert_to_tensor(self.initial_learning_rate, "float32")
        decay_progress = ops.minimum(ops.cast(step, "float32"), float(self.num_train_steps)) / float(
            self.num_train_steps)
        learning_rate = initial_learning_rate * ops.power(1.0 - decay_progress, self.power)
        if not self.num_warmup_steps:
            return learning_rate
        # Integer arithmetic for the step, as the original: a step before start_warmup_step gives a
        # negative warmup rate there too (the original only ever starts at or after that step).
        warmup_step = ops.cast(step, "int32") - self.start_warmup_step
        warmup_learning_rate = initial_learning_rate * (
            ops.cast(warmup_step, "float32") / float(self.num_warmup_steps))
        is_warmup = ops.cast(warmup_step < self.num_warmup_steps, "float32")
        return (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "start_warmup_step": self.start_warmup_step,
            "power": self.power,
        }


@tf.function(jit_compile=True, autograph=False)
def _updated_weights_and_moments(gradient, weights, adam_m, adam_v, learning_rate, *, beta_1, beta_2, epsilon,
                                 weight_decay_rate, layer_adaptation):
    """One variable's AdamW step (LAMB's with `layer_adaptation`): the new weights, m and v, in float32.

    Compiled by XLA into one or two loops over the variable, where TensorFlow's kernels made about fifteen
    passes over memory: ALBERT-base's AdamW update took 47-69 ms of CPU a step that way, 21-30 ms this way
    (BUILD_NOTES.md, "Speed and memory"). Inside an XLA-compiled step it is inlined as any other function.
    """
    next_m = beta_1 * adam_m + (1.0 - beta_1) * gradient
    next_v = beta_2 * adam_v + (1.0 - beta_2) * tf.square(gradient)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    if weight_decay_rate:
        update += weight_decay_rate * weights
    ratio = 1.0
    if layer_adaptation:
        weight_norm = tf.sqrt(tf.reduce_sum(tf.square(weights)))
        update_norm = tf.sqrt(tf.reduce_sum(tf.square(update)))
        ratio = tf.where(weight_norm > 0.0, tf.where(update_norm > 0.0, weight_norm / update_norm, 1.0), 1.0)
    return weights - ratio * learning_rate * update, next_m, next_v


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecayOptimizer(keras.optimizers.Optimizer):
    """Adam without bias correction, plus L2 weight decay added to the update (the original's AdamW).

    Per variable w with gradient g: `m = b1*m + (1-b1)*g`, `v = b2*v + (1-b2)*g*g`,
    `update = m / (sqrt(v) + epsilon) + weight_decay_rate * w` (the decay term only when no pattern in
    `exclude_from_weight_decay` is found by `re.search` in the variable's path), `w -= lr * update`.
    Moments and arithmetic are float32; the variables must be float32 (master weights under the mixed
    policies). The defaults are the original class's: no decay and no exclusions; `create_optimizer` passes
    the original training scripts' 0.01 and LayerNorm/bias exclusions.

    Example:
    >>> variable = keras.Variable([1.0, -2.0], name="kernel")
    >>> optimizer = AdamWeightDecayOptimizer(learning_rate=0.1, weight_decay_rate=0.0)
    >>> optimizer.apply([ops.convert_to_tensor([0.5, 0.5])], [variable])
    >>> [round(float(x), 4) for x in variable.numpy()]
    [0.6838, -2.3162]
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=None, name=None, **kwargs):
        for option in ("weight_decay", "global_clipnorm", "clipnorm", "clipvalue", "use_ema",
                       "gradient_accumulation_steps"):
            if kwargs.get(option):
                raise ValueError(
                    f"{type(self).__name__} got {option}={kwargs[option]!r}; it applies the original's own "
                    "weight decay (weight_decay_rate), and clipping and accumulation belong to the "
                    "training loop.")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = list(exclude_from_weight_decay or ())

    def build(self, var_list):
        if self.built:
            return
        non_float32 = [f"{v.path} ({v.dtype})" for v in var_list if v.dtype != "float32"]
        if non_float32:
            raise ValueError(
                f"{type(self).__name__} keeps float32 master weights, but got {non_float32}; build the model "
                "under 'float32', 'mixed_bfloat16' or 'mixed_float16', whose variables are float32.")
        super().build(var_list)
        self._adam_m = [self.add_variable_from_reference(v, name="adam_m") for v in var_list]
        self._adam_v = [self.add_variable_from_reference(v, name="adam_v") for v in var_list]
        self._use_weight_decay_flags = [self.uses_weight_decay(v.path) for v in var_list]

    def uses_weight_decay(self, variable_path):
        """Whether the variable at `variable_path` is decayed: the original's `_do_use_weight_decay`."""
        if not self.weight_decay_rate:
            return False
        return not any(re.search(pattern, variable_path) for pattern in self.exclude_from_weight_decay)

    def _apply_update(self, gradient, variable, learning_rate, layer_adaptation):
        """Updates the moments and the variable in one XLA-fused pass (`_updated_weights_and_moments`)."""
        index = self._get_variable_index(variable)
        adam_m, adam_v = self._adam_m[index], self._adam_v[index]
        if isinstance(gradient, tf.IndexedSlices):
            # An embedding lookup's sparse gradient: the moments are updated densely, as in the original.
            gradient = tf.convert_to_tensor(gradient)
        weight_decay_rate = self.weight_decay_rate if self._use_weight_decay_flags[index] else 0.0
        weights, next_m, next_v = _updated_weights_and_moments(
            ops.cast(gradient, "float32"), tf.convert_to_tensor(variable), tf.convert_to_tensor(adam_m),
            tf.convert_to_tensor(adam_v), ops.cast(learning_rate, "float32"), beta_1=float(self.beta_1),
            beta_2=float(self.beta_2), epsilon=float(self.epsilon), weight_decay_rate=float(weight_decay_rate),
            layer_adaptation=layer_adaptation)
        self.assign(adam_m, next_m)
        self.assign(adam_v, next_v)
        self.assign(variable, weights)

    def update_step(self, gradient, variable, learning_rate):
        self._apply_update(gradient, variable, learning_rate, layer_adaptation=False)

    def get_config(self):
        config = super().get_config()
        for option in ("weight_decay", "global_clipnorm", "clipnorm", "clipvalue", "use_ema", "ema_momentum",
                       "ema_overwrite_frequency", "gradient_accumulation_steps"):
            config.pop(option, None)
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
        })
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class LAMBOptimizer(AdamWeightDecayOptimizer):
    """The original LAMB: the AdamW update scaled per variable by the trust ratio ||w|| / ||update||.

    The ratio is 1 when either norm is 0 and for variables matching `exclude_from_layer_adaptation`
    (which defaults to `exclude_from_weight_decay`, as in the original); then `w -= ratio * lr * update`.

    Example:
    >>> variable = keras.Variable([3.0, 4.0], name="kernel")
    >>> optimizer = LAMBOptimizer(learning_rate=0.1, weight_decay_rate=0.0)
    >>> optimizer.apply([ops.convert_to_tensor([1.0, 1.0])], [variable])
    >>> [round(float(x), 4) for x in variable.numpy()]
    [2.6464, 3.6464]
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=None, exclude_from_layer_adaptation=None, name=None, **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
                         beta_2=beta_2, epsilon=epsilon, exclude_from_weight_decay=exclude_from_weight_decay,
                         name=name, **kwargs)
        # As the original: an empty or missing list means "the weight-decay exclusions".
        self.exclude_from_layer_adaptation = list(exclude_from_layer_adaptation or self.exclude_from_weight_decay)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._use_layer_adaptation_flags = [self.uses_layer_adaptation(v.path) for v in var_list]

    def uses_layer_adaptation(self, variable_path):
        """Whether the trust ratio applies to `variable_path`: the original's `_do_layer_adaptation`."""
        return not any(re.search(pattern, variable_path) for pattern in self.exclude_from_layer_adaptation)

    def update_step(self, gradient, variable, learning_rate):
        self._apply_update(gradient, variable, learning_rate,
                           layer_adaptation=self._use_layer_adaptation_flags[self._get_variable_index(variable)])

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = list(self.exclude_from_layer_adaptation)
        return config


def create_optimizer(name, init_lr, num_train_steps, num_warmup_steps, start_warmup_step=0, poly_power=1.0,
                     weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                     exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY):
    """The optimizer the original `create_optimizer` builds: "lamb" or "adamw" on the warmup + decay schedule.

    Create it under the training strategy's scope. Gradient clipping to global norm 1.0 is the training
    loop's job (albert_tf.training.train_step), as the original clipped before `apply_gradients`.

    Example:
    >>> optimizer = create_optimizer("lamb", init_lr=0.00176, num_train_steps=125000, num_warmup_steps=3125)
    >>> type(optimizer).__name__, optimizer.exclude_from_layer_adaptation
    ('LAMBOptimizer', ['LayerNorm', 'layer_norm', 'bias'])
    """
    if name not in OPTIMIZER_NAMES:
        raise ValueError(f"Unknown optimizer {name!r}; allowed: {', '.join(OPTIMIZER_NAMES)}.")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
                                     start_warmup_step=start_warmup_step, power=poly_power)
    optimizer_class = LAMBOptimizer if name == "lamb" else AdamWeightDecayOptimizer
    return optimizer_class(learning_rate=schedule, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
                           beta_2=beta_2, epsilon=epsilon, exclude_from_weight_decay=exclude_from_weight_decay)
