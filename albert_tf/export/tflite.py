"""TFLite models of an exported SavedModel (the TF-Hub-style encoder, or a fine-tuned model's serving export).

Three variants, each a `.tflite` file beside the SavedModel directory (`encoder/` gives `encoder_float32.tflite`,
`encoder_int8.tflite`, `encoder_float16.tflite`):
- `float32`: the converter's default, the SavedModel's numbers.
- `int8`: dynamic-range quantization (`tf.lite.Optimize.DEFAULT` without a representative dataset): weights are
  stored in int8, activations stay float32 and are quantized on the fly around the matmuls.
- `float16`: `Optimize.DEFAULT` with `target_spec.supported_types = [tf.float16]`: weights stored in float16 and
  dequantized to float32 when the model loads (on a CPU; a GPU delegate computes in float16).

The TFLite model takes the integer inputs of the SavedModel's `serving_default` signature (`input_word_ids`,
`input_mask`, `input_type_ids`), never raw text: the preprocessor's SentencePiece and string ops are not TFLite
builtins. The sequence axis is fixed at conversion (`seq_length`), as mobile runtimes prefer; the batch axis stays
dynamic (the interpreter starts at batch 1; `resize_tensor_input` or the signature runner changes it).
"""

import logging
import os
import tempfile
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

logger = logging.getLogger(__name__)

TFLITE_VARIANTS = ("float32", "int8", "float16")
DEFAULT_TFLITE_SEQ_LENGTH = 128
SERVING_SIGNATURE = "serving_default"
# What the encoder's TFLite model returns: `default` repeats pooled_output, and the per-block encoder_outputs_{i}
# are for fine-tuning recipes that mobile inference does not run.
ENCODER_TFLITE_OUTPUTS = ("pooled_output", "sequence_output")


def tflite_path(saved_model_dir: str, variant: str) -> str:
    """Where the `variant` TFLite model of `saved_model_dir` goes: beside it, `<dir>_<variant>.tflite`."""
    return f"{os.path.normpath(saved_model_dir)}_{variant}.tflite"


def check_tflite_variants(variants: Sequence[str]) -> None:
    """Raises ValueError naming the first of `variants` that is not one of TFLITE_VARIANTS (or an empty list)."""
    if not variants:
        raise ValueError(f"tflite_variants is empty; give some of {', '.join(TFLITE_VARIANTS)}.")
    for variant in variants:
        if variant not in TFLITE_VARIANTS:
            raise ValueError(f"tflite_variants has {variant!r}; the variants are {', '.join(TFLITE_VARIANTS)}.")


def serving_signature(saved_model_dir: str):
    """The loaded SavedModel (keep it alive: its variables back the function) and its `serving_default`."""
    loaded = tf.saved_model.load(saved_model_dir)
    if SERVING_SIGNATURE not in loaded.signatures:
        raise ValueError(f"The SavedModel {saved_model_dir} has no {SERVING_SIGNATURE!r} signature (it has "
                         f"{sorted(loaded.signatures) or 'none'}); export it with export_to_tfhub or a fine-tuning "
                         "script's --export_dir.")
    return loaded, loaded.signatures[SERVING_SIGNATURE]


def fixed_length_specs(signature, seq_length: Optional[int], saved_model_dir: str) -> Dict[str, tf.TensorSpec]:
    """The signature's input specs with the last (sequence) axis fixed at `seq_length`.

    A signature whose sequence axis is already fixed (a fine-tuning export at its max_seq_length) keeps it;
    `seq_length`, when given, must then agree. An open axis takes `seq_length`, or DEFAULT_TFLITE_SEQ_LENGTH.
    """
    specs = {}
    for name, spec in sorted(signature.structured_input_signature[1].items()):
        if not spec.dtype.is_integer or spec.shape.rank is None or spec.shape.rank < 2:
            raise ValueError(f"The SavedModel {saved_model_dir}'s input {name!r} is {spec.dtype.name} of shape "
                             f"{spec.shape}; the TFLite export takes integer [batch, ..., sequence] inputs (the "
                             "encoder's or a fine-tuned model's, not the preprocessor's strings).")
        length = spec.shape[-1]
        if length is not None and seq_length is not None and length != seq_length:
            raise ValueError(f"tflite_seq_length={seq_length} differs from the SavedModel {saved_model_dir}'s fixed "
                             f"sequence length {length} (input {name!r}); leave tflite_seq_length out or export the "
                             "model at that length.")
        length = length or seq_length or DEFAULT_TFLITE_SEQ_LENGTH
        specs[name] = tf.TensorSpec([None, *spec.shape[1:-1], length], spec.dtype, name=name)
    return specs


def selected_outputs(signature, output_names: Optional[Sequence[str]], saved_model_dir: str):
    """`output_names` (all the signature's outputs when None), each checked to be one of the signature's."""
    available = sorted(signature.structured_outputs)
    if output_names is None:
        return available
    missing = [name for name in output_names if name not in available]
    if missing:
        raise ValueError(f"The SavedModel {saved_model_dir}'s {SERVING_SIGNATURE} has no output {missing[0]!r}; it "
                         f"has {', '.join(available)}.")
    return list(output_names)


def serving_function(signature, specs: Dict[str, tf.TensorSpec], outputs: Sequence[str]):
    """A tf.function of `specs` (positional, in their order; the specs' names name the inputs) that calls
    `signature` and returns its `outputs`."""

    def serve(*args):
        results = signature(**dict(zip(specs, args)))
        return {name: results[name] for name in outputs}

    return tf.function(serve, input_signature=list(specs.values()), autograph=False)


def _stage_fixed_length_saved_model(saved_model_dir: str, staging_dir: str, seq_length: Optional[int],
                                    output_names: Optional[Sequence[str]]) -> Dict[str, tf.TensorSpec]:
    """Saves to `staging_dir` a SavedModel whose `serving_default` calls the original one at a fixed length.

    The converter takes the signature from a SavedModel (a concrete function would lose the input and output
    names of the TFLite signature runner). Custom gradients are not saved again: the converted graph is the
    forward pass only, and re-saving the encoder's custom-gradient functions fails on their captures.
    """
    loaded, signature = serving_signature(saved_model_dir)
    specs = fixed_length_specs(signature, seq_length, saved_model_dir)
    outputs = selected_outputs(signature, output_names, saved_model_dir)

    concrete = serving_function(signature, specs, outputs).get_concrete_function()
    holder = tf.Module()
    holder.model = loaded
    tf.saved_model.save(holder, staging_dir, signatures={SERVING_SIGNATURE: concrete},
                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
    return specs


def _converter(staged_dir: str, variant: str) -> tf.lite.TFLiteConverter:
    converter = tf.lite.TFLiteConverter.from_saved_model(staged_dir, signature_keys=[SERVING_SIGNATURE])
    if variant in ("int8", "float16"):
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter


def convert_to_tflite(saved_model_dir: str, variants: Sequence[str] = TFLITE_VARIANTS,
                      seq_length: Optional[int] = None,
                      output_names: Optional[Sequence[str]] = None, overwrite: bool = False) -> Dict[str, str]:
    """Writes the TFLite `variants` of `saved_model_dir`'s `serving_default` beside it; returns {variant: path}.

    `seq_length` fixes the sequence axis when the signature leaves it open (None: the signature's own length,
    else DEFAULT_TFLITE_SEQ_LENGTH); `output_names` keeps those outputs only (None: all of them). An existing
    file is refused unless `overwrite`.

    Example:
    >>> convert_to_tflite("/tmp/albert_hub/encoder", seq_length=128,
    ...                   output_names=ENCODER_TFLITE_OUTPUTS)  # doctest: +SKIP
    {'float32': '/tmp/albert_hub/encoder_float32.tflite', 'int8': ..., 'float16': ...}
    """
    check_tflite_variants(variants)
    paths = {variant: tflite_path(saved_model_dir, variant) for variant in variants}
    for path in paths.values():
        if tf.io.gfile.exists(path) and not overwrite:
            raise FileExistsError(f"{path} exists; remove it or pass overwrite (--overwrite) to replace it.")
    with tempfile.TemporaryDirectory() as staging:
        staged_dir = os.path.join(staging, "fixed_length")
        specs = _stage_fixed_length_saved_model(saved_model_dir, staged_dir, seq_length, output_names)
        for variant, path in paths.items():
            model = _converter(staged_dir, variant).convert()
            with tf.io.gfile.GFile(path + ".partial", "wb") as handle:
                handle.write(model)
            tf.io.gfile.rename(path + ".partial", path, overwrite=True)
            logger.info("Wrote the %s TFLite model (%.1f MB, inputs %s) to %s", variant, len(model) / 1e6,
                        {name: spec.shape.as_list() for name, spec in specs.items()}, path)
    return paths


def run_tflite(model_path: str, inputs: Mapping[str, np.ndarray], num_threads: Optional[int] = None
               ) -> Dict[str, np.ndarray]:
    """Runs the TFLite model's `serving_default` on `inputs` (any batch size) and returns its outputs.

    Example:
    >>> run_tflite("/tmp/albert_hub/encoder_int8.tflite", inputs)["pooled_output"].shape  # doctest: +SKIP
    (2, 768)
    """
    interpreter = tf.lite.Interpreter(model_path=model_path, num_threads=num_threads)
    runner = interpreter.get_signature_runner(SERVING_SIGNATURE)
    expected = runner.get_input_details()
    missing = sorted(set(expected) - set(inputs))
    if missing:
        raise ValueError(f"The TFLite model {model_path} takes {sorted(expected)}; the inputs lack {missing[0]!r}.")
    for name, details in expected.items():
        fixed = list(details["shape_signature"][1:])
        given = list(np.shape(inputs[name])[1:])
        if given != fixed:
            raise ValueError(f"The TFLite model {model_path}'s input {name!r} takes [batch, "
                             f"{', '.join(map(str, fixed))}]; got shape {list(np.shape(inputs[name]))}.")
    return runner(**{name: np.asarray(inputs[name], details["dtype"]) for name, details in expected.items()})


def output_drift(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
                 prediction_output: Optional[str] = None) -> Dict[str, float]:
    """How far `candidate`'s outputs are from `reference`'s: `max_abs_diff/<name>` for every output they share,
    and, with `prediction_output` (e.g. "logits"), `prediction_agreement`: the fraction of rows whose argmax over
    that output's last axis is the same.

    Example:
    >>> drift = output_drift({"logits": np.array([[1.0, 0.0], [0.0, 1.0]])},
    ...                      {"logits": np.array([[0.9, 0.1], [0.6, 0.4]])}, prediction_output="logits")
    >>> round(drift["max_abs_diff/logits"], 3), drift["prediction_agreement"]
    (0.6, 0.5)
    """
    shared = sorted(set(reference) & set(candidate))
    if not shared:
        raise ValueError(f"The outputs share no name: {sorted(reference)} against {sorted(candidate)}.")
    drift = {}
    for name in shared:
        expected, actual = np.asarray(reference[name], np.float64), np.asarray(candidate[name], np.float64)
        if expected.shape != actual.shape:
            raise ValueError(f"Output {name!r} has shape {list(actual.shape)} against {list(expected.shape)}.")
        drift[f"max_abs_diff/{name}"] = float(np.max(np.abs(expected - actual))) if expected.size else 0.0
    if prediction_output is not None:
        if prediction_output not in shared:
            raise ValueError(f"prediction_output={prediction_output!r} is not among the shared outputs {shared}.")
        expected_labels = np.argmax(reference[prediction_output], axis=-1)
        actual_labels = np.argmax(candidate[prediction_output], axis=-1)
        drift["prediction_agreement"] = float(np.mean(expected_labels == actual_labels))
    return drift
