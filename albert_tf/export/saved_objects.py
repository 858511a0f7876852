"""What the exported SavedModel objects share: Keras models kept out of the object graph, their tf.Variables.

The exports save only tf.functions over the model's variables, so that loading needs neither Keras nor
albert_tf.
"""

import keras
import tensorflow as tf

AutoTrackable = tf.__internal__.tracking.AutoTrackable


class Untracked:
    """The Keras objects the saved functions call, held by a plain object: AutoTrackable does not look
    inside it, so they (and every Keras-internal trackable under them) stay out of the SavedModel."""

    def __init__(self, **objects):
        self.__dict__.update(objects)


def tf_variables(variables):
    """The tf.Variables inside Keras variables.

    The SavedModel must hold these, not the Keras wrappers: a wrapper is exported as a second variable
    beside the one the functions read, which TF1-style clients (`saved_model_cli run`, TF Serving's
    session loader) then find uninitialised.
    """
    unwrapped = [variable.value if isinstance(variable, keras.Variable) else variable for variable in variables]
    for variable in unwrapped:
        if not isinstance(variable, tf.Variable):
            raise TypeError(f"Expected a tf.Variable inside the model's variable, got {type(variable).__name__}.")
    return unwrapped


def check_file(path, flag):
    """Raises FileNotFoundError naming `flag` unless `path` exists."""
    if not path or not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{flag}={path!r} does not exist.")
