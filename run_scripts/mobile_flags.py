"""The TFLite and ONNX flags of export_to_tfhub and export_mobile."""

from absl import flags

from albert_tf.export.tflite import TFLITE_VARIANTS

# The flags belong to the script that defines them (its --help lists them), not to this module.
flags.disclaim_key_flags()


def define_mobile_export_flags(default_seq_length_help: str, flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--tflite, --tflite_variants, --tflite_seq_length, --onnx and --onnx_optimize."""
    flags.DEFINE_bool(
        "tflite", False, "Also write TFLite models beside the SavedModel (<dir>_<variant>.tflite). They take the "
        "integer inputs input_word_ids, input_mask and input_type_ids, not raw text: in-graph tokenization "
        "(SentencePiece, string ops) is not made of TFLite builtins, so tokenize in the app.", flag_values=flag_values)
    flags.DEFINE_list(
        "tflite_variants", list(TFLITE_VARIANTS), "The TFLite models --tflite writes: float32; int8 (dynamic-range "
        "quantization, weights in int8); float16 (weights in float16).", flag_values=flag_values)
    flags.DEFINE_integer(
        "tflite_seq_length", None, "The TFLite models' fixed sequence length (the batch axis stays dynamic); "
        f"default {default_seq_length_help}.", lower_bound=1, flag_values=flag_values)
    flags.DEFINE_bool(
        "onnx", False, "Also write <dir>.onnx with tf2onnx (the onnx extra: `make onnx`, then .venv/onnx on "
        "PYTHONPATH).", flag_values=flag_values)
    flags.DEFINE_bool(
        "onnx_optimize", False, "With --onnx, also write <dir>_optimized.onnx for CPU serving in onnxruntime: its "
        "transformer optimizer fuses each attention layer, LayerNorm, the embeddings and GELU into onnxruntime's "
        "kernels (the same outputs to float rounding), and the shared block's weights stay stored once.",
        flag_values=flag_values)


def tflite_variants(flag_values: flags.FlagValues = flags.FLAGS):
    """The variants to write: --tflite_variants with --tflite, else none."""
    return tuple(flag_values.tflite_variants) if flag_values.tflite else ()
