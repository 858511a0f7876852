"""Writes TFLite and ONNX models of a SavedModel beside it: a fine-tuning script's --export_dir or export_to_tfhub's
encoder/.

    python -m run_scripts.export_mobile --saved_model_dir=out/mrpc/export --tflite --onnx

gives out/mrpc/export_float32.tflite, export_int8.tflite, export_float16.tflite and export.onnx, which take the
integer inputs of its serving_default signature; --onnx_optimize adds export_optimized.onnx, fused for
onnxruntime's CPU kernels.
"""

from absl import app, flags

from albert_tf.export.mobile import export_mobile_models
from run_scripts import entry
from run_scripts.mobile_flags import define_mobile_export_flags, tflite_variants

FLAGS = flags.FLAGS

flags.DEFINE_string("saved_model_dir", None, "The SavedModel to convert (its serving_default signature).")
flags.DEFINE_list("tflite_outputs", None, "The outputs the TFLite models keep (default all of the signature's).")
flags.DEFINE_bool("overwrite", False, "Replace existing TFLite and ONNX files.")
define_mobile_export_flags("the SavedModel's own sequence length, else 128")
flags.mark_flag_as_required("saved_model_dir")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}.")
    export_mobile_models(FLAGS.saved_model_dir, tflite_variants(), FLAGS.tflite_seq_length, FLAGS.onnx,
                         FLAGS.tflite_outputs, overwrite=FLAGS.overwrite, onnx_optimize=FLAGS.onnx_optimize)


if __name__ == "__main__":
    entry.run(main)
