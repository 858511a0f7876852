"""An ONNX model of an exported SavedModel's `serving_default`, through tf2onnx (the optional `onnx` extra).

The model takes the signature's integer inputs with the signature's own shapes (the encoder's batch and sequence
axes stay dynamic) and writes `<saved_model_dir>.onnx` beside the SavedModel. tf2onnx comes from
requirements-onnx.txt: `make onnx` installs it into `.venv/onnx`, which goes on PYTHONPATH for the export and for
onnxruntime (`PYTHONPATH=.venv/onnx`), or `pip install -r requirements-onnx.txt` in an environment of your own.
"""

import logging
import os
from typing import Optional, Sequence
from unittest import mock

import tensorflow as tf

from albert_tf.export.tflite import selected_outputs, serving_function, serving_signature

logger = logging.getLogger(__name__)

# tf2onnx 1.17's ReshapeOptimizer rewires the reshape that follows a Keras 3 Dense on a [batch, seq, hidden] input
# (tf.tensordot: reshape to 2-D, matmul, reshape back) to the 2-D matmul output, so the attention's split into
# heads then reads the wrong shape and onnxruntime fails; every other optimizer is kept (BUILD_NOTES).
_BROKEN_TF2ONNX_OPTIMIZERS = ("reshape_optimizer",)


def onnx_path(saved_model_dir: str) -> str:
    """Where the ONNX model of `saved_model_dir` goes: beside it, `<dir>.onnx`."""
    return f"{os.path.normpath(saved_model_dir)}.onnx"


def require_tf2onnx():
    """tf2onnx, imported; a ValueError saying how to install it when it is absent."""
    try:
        import tf2onnx
        import tf2onnx.optimizer
    except ImportError as error:
        raise ValueError("The ONNX export needs tf2onnx, the `onnx` extra: run `make onnx` and put .venv/onnx on "
                         "PYTHONPATH, or pip install -r requirements-onnx.txt.") from error
    return tf2onnx


def convert_to_onnx(saved_model_dir: str, output_names: Optional[Sequence[str]] = None, opset: Optional[int] = None,
                    overwrite: bool = False) -> str:
    """Writes `saved_model_dir`'s `serving_default` as `<saved_model_dir>.onnx` and returns its path.

    `output_names` keeps those outputs only (None: all of them); `opset` is the ONNX opset (None: tf2onnx's
    default). An existing file is refused unless `overwrite`.

    Example:
    >>> convert_to_onnx("/tmp/albert_hub/encoder")  # doctest: +SKIP
    '/tmp/albert_hub/encoder.onnx'
    """
    tf2onnx = require_tf2onnx()
    path = onnx_path(saved_model_dir)
    if tf.io.gfile.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; remove it or pass overwrite (--overwrite) to replace it.")
    loaded, signature = serving_signature(saved_model_dir)  # `loaded` holds the variables until the end
    specs = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name)
             for name, spec in sorted(signature.structured_input_signature[1].items())}
    outputs = selected_outputs(signature, output_names, saved_model_dir)
    function = serving_function(signature, specs, outputs)
    optimizers = {name: optimizer for name, optimizer in tf2onnx.optimizer._optimizers.items()
                  if name not in _BROKEN_TF2ONNX_OPTIMIZERS}
    with mock.patch.dict(tf2onnx.optimizer._optimizers, optimizers, clear=True):
        model, _ = tf2onnx.convert.from_function(function, input_signature=list(specs.values()), opset=opset,
                                                 output_path=path + ".partial")
    tf.io.gfile.rename(path + ".partial", path, overwrite=True)
    opset_version = next(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))
    logger.info("Wrote the ONNX model (opset %d, %.1f MB) to %s", opset_version, os.path.getsize(path) / 1e6, path)
    return path
