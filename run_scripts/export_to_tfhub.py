"""Exports TF-Hub-style SavedModels: `<export_path>/encoder` (with `.mlm`) and `<export_path>/preprocessor`.

    python -m run_scripts.export_to_tfhub --init_checkpoint=albert_base \\
        --albert_config_file=albert_base/albert_config.json --spm_model_file=albert_base/30k-clean.model \\
        --export_path=/tmp/albert_hub

Loading the encoder needs only TensorFlow; the preprocessor also needs `import tensorflow_text`. `--tflite` and
`--onnx` also write the encoder as `encoder_<variant>.tflite` and `encoder.onnx` beside encoder/, and
`--onnx_optimize` `encoder_optimized.onnx`, fused for onnxruntime's CPU kernels.
"""

from absl import app, flags, logging

from albert_tf.checkpoints import locating
from albert_tf.config import load_config
from albert_tf.export.preprocessor import DEFAULT_SEQ_LENGTH
from albert_tf.export.tfhub_encoder import export_hub_modules
from run_scripts import entry
from run_scripts.mobile_flags import define_mobile_export_flags, tflite_variants
from run_scripts.original_flags import NO_EINSUM_CHOICE, define_original_flags
from run_scripts.tokenizer_flags import define_digit_comma_rule_flag

FLAGS = flags.FLAGS

flags.DEFINE_string("init_checkpoint", None, "Weights to export: a TF1 checkpoint, a Hugging Face directory or a "
                    "native checkpoint.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model (or --preset; if neither, the "
                    "config that comes with --init_checkpoint).")
flags.DEFINE_string("preset", None, "A named config, e.g. albert-base.")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model the weights were trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase input text (the released English models do).")
define_digit_comma_rule_flag()
flags.DEFINE_string("export_path", None, "Directory for encoder/ and preprocessor/.")
flags.DEFINE_integer("seq_length", DEFAULT_SEQ_LENGTH, "The preprocessor's default sequence length.")
flags.DEFINE_bool("allow_random_init", False, "Export random weights when there is no --init_checkpoint "
                  "(for tests only).")
flags.DEFINE_bool("overwrite", False, "Replace an existing export in --export_path.")
define_mobile_export_flags("--seq_length")
define_original_flags({"albert_directory": "pass --init_checkpoint (the checkpoint or the released directory, "
                                           "whose albert_config.json is found beside it) and --spm_model_file",
                       "checkpoint_name": "pass the checkpoint itself as --init_checkpoint",
                       "use_einsum": NO_EINSUM_CHOICE}, tpu=False)
flags.mark_flags_as_required(["spm_model_file", "export_path"])


def _config():
    if FLAGS.albert_config_file or FLAGS.preset:
        return load_config(FLAGS.albert_config_file, FLAGS.preset)
    found = locating.find_config(FLAGS.init_checkpoint) if FLAGS.init_checkpoint else None
    if found is None:
        raise app.UsageError("Give --albert_config_file or --preset; no albert_config.json comes with "
                             f"--init_checkpoint={FLAGS.init_checkpoint!r}.")
    logging.info("Using the model config %s.", found[1])
    return found[0]


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}.")
    encoder_dir, preprocessor_dir = export_hub_modules(
        FLAGS.export_path, _config(), FLAGS.spm_model_file, init_checkpoint=FLAGS.init_checkpoint,
        do_lower_case=FLAGS.do_lower_case, seq_length=FLAGS.seq_length, allow_random_init=FLAGS.allow_random_init,
        digit_comma_rule=FLAGS.digit_comma_rule, overwrite=FLAGS.overwrite, tflite_variants=tflite_variants(),
        tflite_seq_length=FLAGS.tflite_seq_length, onnx=FLAGS.onnx, onnx_optimize=FLAGS.onnx_optimize)
    logging.info("Wrote %s and %s.", encoder_dir, preprocessor_dir)


if __name__ == "__main__":
    entry.run(main)
