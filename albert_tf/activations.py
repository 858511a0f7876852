"""The hidden activations an albert_config.json may name."""

import tensorflow as tf


def gelu(x):
    """The tanh approximation of GELU, which the original ALBERT code calls `gelu`."""
    return tf.nn.gelu(x, approximate=True)


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
