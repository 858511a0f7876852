"""The constants and the initializer that every ALBERT layer, model and weight table shares."""

import keras

# tf.contrib.layers.layer_norm's default, which the original uses everywhere; Hugging Face's layer_norm_eps too.
LAYER_NORM_EPSILON = 1e-12

# The original fine-tuning heads initialise with a fixed stddev, not the config's initializer_range.
HEAD_INITIALIZER_STDDEV = 0.02


def truncated_normal(stddev):
    """The original's `create_initializer`: a normal with this stddev, truncated at two standard deviations.

    Every call returns a new instance, as writing out `keras.initializers.TruncatedNormal(stddev=...)` would.

    Example:
    >>> initializer = truncated_normal(0.02)
    >>> type(initializer).__name__, initializer.stddev
    ('TruncatedNormal', 0.02)
    """
    return keras.initializers.TruncatedNormal(stddev=stddev)
