"""Converts ALBERT weights between original TF1 checkpoints, Hugging Face safetensors and native checkpoints.

    # Google's released tarball (albert_base_v2.tar.gz unpacked) -> Hugging Face:
    python -m run_scripts.convert_checkpoint --input=albert_base --output=albert_base_hf --output_format=hf
    # A Hugging Face download -> this project's tf.train checkpoint:
    python -m run_scripts.convert_checkpoint --input=albert-base-v2 --output=albert_base_native \
        --output_format=native --allow_missing_heads
    # A fine-tuned run_glue checkpoint -> Hugging Face AlbertForSequenceClassification:
    python -m run_scripts.convert_checkpoint --input=runs/mnli --output=mnli_hf --output_format=hf \
        --head=classifier
    # Its encoder alone (the classifier head is left out):
    python -m run_scripts.convert_checkpoint --input=runs/mnli --output=mnli_encoder_hf --output_format=hf \
        --drop_unused_heads

The input may be a checkpoint prefix, a tarball directory (model.ckpt-best.* and
albert_config.json, no `checkpoint` file needed), a TF1 TF-Hub module directory, a Hugging Face
directory (model.safetensors + config.json) or a directory of native checkpoints. The config comes
from the input (albert_config.json beside it, in assets/, or config.json) unless
--albert_config_file or --preset is given. The SentencePiece model is copied to the output.
Any missing, unexpected or mis-shaped variable stops the conversion with a non-zero exit and a
listing.
"""

from absl import flags

from albert_tf.checkpoints import conversion, formats
from albert_tf.config import load_config
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint prefix or directory to convert.")
flags.DEFINE_enum("input_format", "auto", ["auto"] + list(formats.FORMATS), "Format of --input.")
flags.DEFINE_string("output", None, "New (or empty) directory to write.")
flags.DEFINE_enum("output_format", None, list(formats.FORMATS), "Format to write.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json, when the input has none or to override it.")
flags.DEFINE_string("preset", None, "A named preset (e.g. albert-base), instead of --albert_config_file.")
flags.DEFINE_enum("head", "auto", list(conversion.MODEL_HEADS),
                  "The model to convert: auto (the task model a Hugging Face config.json names, else the "
                  "pretraining model when the input has its heads, else the encoder), or classifier (run_glue), "
                  "multiple_choice (run_race), squad (run_squad's v1 head), token_classifier (run_ner), pretraining, "
                  "encoder.")
flags.DEFINE_boolean("allow_missing_heads", False,
                     "Let head variables (outside bert/) that the input lacks start from a fresh initialisation, "
                     "e.g. the SOP head of a Hugging Face AlbertForMaskedLM download.")
flags.DEFINE_boolean("drop_unused_heads", False,
                     "Leave out head variables (outside bert/) that the converted model does not have, e.g. the "
                     "GLUE, SQuAD or RACE head of a fine-tuned checkpoint, whose encoder is then converted.")
flags.DEFINE_boolean("init_from_group0", False,
                     "Initialise every group (and every unshared half) from group 0 / index 1 of the input, as "
                     "the original's --init_from_group0.")


def main(argv):
    del argv
    given = FLAGS.albert_config_file or FLAGS.preset
    config = load_config(FLAGS.albert_config_file, FLAGS.preset) if given else None
    conversion.convert_checkpoint(FLAGS.input, FLAGS.output, FLAGS.output_format, input_format=FLAGS.input_format,
                                  config=config, head=FLAGS.head, allow_missing_heads=FLAGS.allow_missing_heads,
                                  drop_unused_heads=FLAGS.drop_unused_heads, init_from_group0=FLAGS.init_from_group0)


if __name__ == "__main__":
    flags.mark_flags_as_required(["input", "output", "output_format"])
    entry.run(main)
