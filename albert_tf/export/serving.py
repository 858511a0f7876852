"""The serving export of a fine-tuned model: a SavedModel with one `serving_default` signature."""

from typing import Callable, Dict, Optional

import keras
import tensorflow as tf
from absl import logging


def export_saved_model(model: keras.Model, input_signature: Dict[str, tf.TensorSpec],
                       serving_fn: Optional[Callable], export_dir: str) -> str:
    """Writes `model` as a SavedModel whose `serving_default` signature takes `input_signature`.

    The outputs are `serving_fn(model, inputs)` (a dict), or {"outputs": model(inputs)} without one.

    Example:
    >>> import tempfile
    >>> model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Dense(2)])
    >>> path = export_saved_model(model, {"x": tf.TensorSpec([None, 3], tf.int32)},
    ...                           lambda m, inputs: {"logits": m(tf.cast(inputs["x"], tf.float32))},
    ...                           tempfile.mkdtemp())  # doctest: +SKIP
    """
    serving_fn = serving_fn or (lambda serving_model, inputs: {"outputs": serving_model(inputs, training=False)})
    archive = keras.export.ExportArchive()
    archive.track(model)
    # Named specs make the signature's arguments the input names (input_word_ids, ...), not inputs_1, ...
    named = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name) for name, spec in input_signature.items()}
    archive.add_endpoint("serve", lambda inputs: serving_fn(model, inputs), input_signature=[named])
    archive.write_out(export_dir, verbose=False)
    logging.info("Exported the fine-tuned model to %s (signature serving_default).", export_dir)
    return export_dir
