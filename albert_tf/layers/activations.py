"""The hidden activations an albert_config.json may name."""

import tensorflow as tf

from albert_tf.layers.fused import xla_fused


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
    return 0.5 * x * (1.0 + _gelu_tanh(x))


def _gelu_value_and_derivative(x):
    tanh = _gelu_tanh(x)
    half_x = 0.5 * x
    slope = _SQRT_2_OVER_PI * (1.0 + 3.0 * _CUBIC * x * x)
    return half_x * (1.0 + tanh), 0.5 * (1.0 + tanh) + half_x * (1.0 - tanh * tanh) * slope


def _relu_value_and_derivative(x):
    return tf.nn.relu(x), tf.cast(x > 0, x.dtype)


def _tanh_value_and_derivative(x):
    tanh = tf.tanh(x)
    return tanh, 1.0 - tanh * tanh


def _linear_value_and_derivative(x):
    return x, tf.ones_like(x)


class ActivationWithDerivative:
    """An activation's value, and its value with its derivative, for a gradient that recomputes them.

    `value_and_derivative(x)` computes both from one pass (one tanh for GELU); for GELU both run as one
    XLA-fused loop, and `value(x)` too, so a recomputed value equals the forward pass's bit for bit.

    Example:
    >>> value, derivative = activation_with_derivative(tf.tanh).value_and_derivative(tf.constant(0.0))
    >>> float(value), float(derivative)
    (0.0, 1.0)
    """

    def __init__(self, value, value_and_derivative):
        self.value = value
        self.value_and_derivative = value_and_derivative


def linear(x):
    return x


_WITH_DERIVATIVES = {
    gelu: ActivationWithDerivative(xla_fused(_gelu_value), xla_fused(_gelu_value_and_derivative)),
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
