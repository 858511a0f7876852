"""The serving export of a fine-tuned model: a SavedModel with one `serving_default` signature."""

from typing import Callable, Dict, Optional

import keras
import tensorflow as tf
from absl import logging

from albert_tf.export.saved_objects import AutoTrackable, Untracked, tf_variables


class _ServingModel(AutoTrackable):
    """`serve(inputs)` over the model's tf.Variables, each saved once (Keras' ExportArchive saves every weight
    twice: under `variables` and again under `_all_variables`)."""

    def __init__(self, model: keras.Model, serving_fn: Callable, input_signature: Dict[str, tf.TensorSpec]):
        self._parts = Untracked(model=model, serving_fn=serving_fn)
        self.variables = tf_variables(model.variables)
        self.trainable_variables = tf_variables(model.trainable_variables)
        self.serve = tf.function(self._serve, input_signature=[input_signature], autograph=False)

    def _serve(self, inputs):
        return self._parts.serving_fn(self._parts.model, inputs)


def export_saved_model(model: keras.Model, input_signature: Dict[str, tf.TensorSpec],
                       serving_fn: Optional[Callable], export_dir: str) -> str:
    """Writes `model` as a SavedModel whose `serving_default` signature takes `input_signature`.

    The outputs are `serving_fn(model, inputs)` (a dict), or {"outputs": model(inputs)} without one. Each weight
    is stored once; loading needs neither Keras nor albert_tf.

    Example:
    >>> import tempfile
    >>> model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Dense(2)])
    >>> path = export_saved_model(model, {"x": tf.TensorSpec([None, 3], tf.int32)},
    ...                           lambda m, inputs: {"logits": m(tf.cast(inputs["x"], tf.float32))},
    ...                           tempfile.mkdtemp())  # doctest: +SKIP
    """
    serving_fn = serving_fn or (lambda serving_model, inputs: {"outputs": serving_model(inputs, training=False)})
    # Named specs make the signature's arguments the input names (input_word_ids, ...), not inputs_1, ...
    named = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name) for name, spec in input_signature.items()}
    serving_model = _ServingModel(model, serving_fn, named)
    tf.saved_model.save(serving_model, export_dir,
                        signatures={"serving_default": serving_model.serve.get_concrete_function()})
    logging.info("Exported the fine-tuned model to %s (signature serving_default).", export_dir)
    return export_dir
