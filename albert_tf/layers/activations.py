"""The hidden activations an albert_config.json may name."""

import tensorflow as tf


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


def linear(x):
    return x


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
