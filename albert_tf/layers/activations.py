"""The hidden activations an albert_config.json may name."""

import tensorflow as tf

from albert_tf.layers.fused_elementwise import xla_fused


_SQRT_2_OVER_PI = 0.7978845608028654
_CUBIC = 0.044715


@tf.custom_gradient
def gelu(x):
    """The tanh approximation of GELU, which the original ALBERT code calls `gelu`.

    Its gradient recomputes tanh from `x` instead of keeping it from the forward pass: at
    ALBERT-base, batch 8 x 128, that is 144 MiB less for XLA to hold across the 12 depths
    (BUILD_NOTES.md, "Speed and memory").

    Example:
    >>> round(float(gelu(tf.constant(1.0))), 4)
    0.8412
    """

    def gradient(upstream):
        tanh = tf.tanh(_SQRT_2_OVER_PI * (x + _CUBIC * x * x * x))
        slope = _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * x * x)
        return upstream * (0.5 * (1.0 + tanh) + 0.5 * x * (1.0 - tanh * tanh) * slope)

    return tf.nn.gelu(x, approximate=True), gradient


def _gelu_tanh(x):
    # tf.nn.gelu(approximate=True)'s expression, term for term, so the values match it.
    return tf.tanh(_SQRT_2_OVER_PI * (x + _CUBIC * tf.pow(x, 3)))


def _gelu_value(x):
    return _in_float32(lambda x: 0.5 * x * (1.0 + _gelu_tanh(x)), x)


def _gelu_value_and_derivative(x):
    return _in_float32(_gelu_value_and_derivative_of, x)


def _gelu_value_and_derivative_of(x):
    tanh = _gelu_tanh(x)
    half_x = 0.5 * x
    slope = _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * x * x)
    return half_x * (1.0 + tanh), 0.5 * (1.0 + tanh) + half_x * (1.0 - tanh * tanh) * slope


def _gelu_value_and_input_gradient(x, upstream):
    def value_and_input_gradient(x, upstream):
        value, derivative = _gelu_value_and_derivative_of(x)
        return value, upstream * derivative

    return _in_float32(value_and_input_gradient, x, upstream)


def _in_float32(function, *tensors):
    """`function` of `tensors` computed in float32, its outputs rounded once to the first tensor's dtype.

    In bfloat16 XLA:CPU would round after every operation, converting back and forth each time: GELU and
    its gradient over [8, 128, 3072] took 4x the CPU time of the float32 computation (BUILD_NOTES.md,
    "Speed and memory"). The original computes in float32 throughout.
    """
    outputs = function(*(tf.cast(tensor, tf.float32) for tensor in tensors))
    return tf.nest.map_structure(lambda output: tf.cast(output, tensors[0].dtype), outputs)


def _relu_value_and_derivative(x):
    return tf.nn.relu(x), tf.cast(x > 0, x.dtype)


def _tanh_value_and_derivative(x):
    tanh = tf.tanh(x)
    return tanh, 1.0 - tanh * tanh


def _linear_value_and_derivative(x):
    return x, tf.ones_like(x)


class ActivationWithDerivative:
    """An activation's value, and its value with the gradient through it, for a gradient that recomputes them.

    `value_and_input_gradient(x, upstream)` gives the activation of `x` and `upstream` times its derivative
    from one pass (one tanh for GELU); for GELU both run as one XLA-fused loop, and `value(x)` too, so a
    recomputed value equals the forward pass's bit for bit.

    Example:
    >>> with_derivative = activation_with_derivative(tf.tanh)
    >>> value, input_gradient = with_derivative.value_and_input_gradient(tf.constant(0.0), tf.constant(3.0))
    >>> float(value), float(input_gradient)
    (0.0, 3.0)
    """

    def __init__(self, value, value_and_derivative, value_and_input_gradient=None):
        self.value = value
        self.value_and_derivative = value_and_derivative
        self.value_and_input_gradient = value_and_input_gradient or self._value_and_input_gradient

    def _value_and_input_gradient(self, x, upstream):
        value, derivative = self.value_and_derivative(x)
        return value, upstream * derivative


def linear(x):
    return x


_WITH_DERIVATIVES = {
    gelu: ActivationWithDerivative(xla_fused(_gelu_value), xla_fused(_gelu_value_and_derivative),
                                 xla_fused(_gelu_value_and_input_gradient)),
    tf.nn.relu: ActivationWithDerivative(tf.nn.relu, _relu_value_and_derivative),
    tf.tanh: ActivationWithDerivative(tf.tanh, _tanh_value_and_derivative),
    linear: ActivationWithDerivative(linear, _linear_value_and_derivative),
}


def activation_with_derivative(activation):
    """The ActivationWithDerivative of one of get_activation's functions; None for any other function."""
    return _WITH_DERIVATIVES.get(activation)


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": linear,
}


def get_activation(name: str):
    """Returns the function for a config's hidden_act, raising ValueError for an unknown name."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"hidden_act={name!r} is not supported; allowed: {', '.join(_ACTIVATIONS)}.") from None
