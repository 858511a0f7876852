"""TFLite and ONNX models beside an exported SavedModel: what `export_to_tfhub --tflite --onnx` and
`export_mobile` write (see `albert_tf.export.tflite`, `albert_tf.export.onnx_export` and, for the fused ONNX
model of `--onnx_optimize`, `albert_tf.export.onnx_optimize`)."""

import logging
from typing import Dict, Optional, Sequence

import tensorflow as tf

from albert_tf.export.onnx_export import convert_to_onnx, onnx_path, require_tf2onnx
from albert_tf.export.onnx_optimize import optimize_onnx, optimized_onnx_path, require_onnxruntime
from albert_tf.export.tflite import check_tflite_variants, convert_to_tflite, tflite_path

logger = logging.getLogger(__name__)

ONNX = "onnx"
ONNX_OPTIMIZED = "onnx_optimized"


def mobile_model_paths(saved_model_dir: str, tflite_variants: Sequence[str] = (), onnx: bool = False,
                       onnx_optimize: bool = False) -> Dict[str, str]:
    """{variant: path} of the TFLite models, {"onnx": path} and {"onnx_optimized": path}, that
    `export_mobile_models` writes."""
    paths = {variant: tflite_path(saved_model_dir, variant) for variant in tflite_variants}
    if onnx:
        paths[ONNX] = onnx_path(saved_model_dir)
    if onnx_optimize:
        paths[ONNX_OPTIMIZED] = optimized_onnx_path(onnx_path(saved_model_dir))
    return paths


def check_mobile_paths_free(saved_model_dir: str, tflite_variants: Sequence[str] = (), onnx: bool = False,
                            onnx_optimize: bool = False) -> None:
    """Raises FileExistsError naming the first TFLite or ONNX file of `saved_model_dir` that exists already."""
    for path in mobile_model_paths(saved_model_dir, tflite_variants, onnx, onnx_optimize).values():
        if tf.io.gfile.exists(path):
            raise FileExistsError(f"{path} exists; remove it or pass overwrite (--overwrite) to replace it.")


def check_onnx_request(onnx: bool, onnx_optimize: bool) -> None:
    """Raises ValueError for `onnx_optimize` without `onnx`, or when the onnx extra that they need is absent."""
    if onnx_optimize and not onnx:
        raise ValueError("onnx_optimize (--onnx_optimize) fuses the ONNX model, which only onnx (--onnx) writes; "
                         "pass both.")
    if onnx:
        require_tf2onnx()
    if onnx_optimize:
        require_onnxruntime()


def export_mobile_models(saved_model_dir: str, tflite_variants: Sequence[str] = (),
                         tflite_seq_length: Optional[int] = None, onnx: bool = False,
                         tflite_output_names: Optional[Sequence[str]] = None, overwrite: bool = False,
                         onnx_optimize: bool = False) -> Dict[str, str]:
    """Converts `saved_model_dir` (its `serving_default`) to the TFLite `tflite_variants` and, with `onnx`, to
    ONNX, each file beside it; returns {variant, "onnx" or "onnx_optimized": path}.

    `tflite_seq_length` fixes the TFLite models' sequence axis (`convert_to_tflite`); the ONNX model keeps the
    signature's shapes. `tflite_output_names` keeps those outputs in the TFLite models (None: all).
    `onnx_optimize` (with `onnx`) also writes the ONNX model fused for onnxruntime's CPU kernels
    (`optimize_onnx`). Existing files are refused unless `overwrite`, and a missing onnx extra is reported,
    before anything is converted.

    Example:
    >>> export_mobile_models("out/mrpc/export", ("float32", "int8"), onnx=True)  # doctest: +SKIP
    {'float32': 'out/mrpc/export_float32.tflite', 'int8': 'out/mrpc/export_int8.tflite', 'onnx': 'out/mrpc/export.onnx'}
    """
    if tflite_variants:
        check_tflite_variants(tflite_variants)
    check_onnx_request(onnx, onnx_optimize)
    if not tflite_variants and not onnx:
        raise ValueError("Nothing to convert: give TFLite variants (--tflite) or ONNX (--onnx).")
    if not overwrite:
        check_mobile_paths_free(saved_model_dir, tflite_variants, onnx, onnx_optimize)
    paths = {}
    if tflite_variants:
        paths.update(convert_to_tflite(saved_model_dir, tflite_variants, tflite_seq_length, tflite_output_names,
                                       overwrite=True))
    if onnx:
        paths[ONNX] = convert_to_onnx(saved_model_dir, overwrite=True)
    if onnx_optimize:
        paths[ONNX_OPTIMIZED], _ = optimize_onnx(paths[ONNX], overwrite=True)
    logger.info("Wrote %s", ", ".join(paths.values()))
    return paths
