"""Writes ALBERT pretraining TFRecords: python -m run_scripts.create_pretraining_data --input_file=... --output_file=...

Flags and defaults are the original google-research/albert create_pretraining_data.py's, plus the input
format, output sharding, worker processes and block size. The same --random_seed gives the same bytes for
any --num_workers, and with --beam_pipeline_options an Apache Beam pipeline writes the same bytes; rerunning
the same command skips finished shards.
"""

from absl import app, flags, logging

from albert_tf.tokenization import AlbertTokenizer
from data_gen.pretraining import create_pretraining_data as cpd
from run_scripts import entry
from run_scripts.original_flags import define_original_flags
from run_scripts.tokenizer_flags import define_digit_comma_rule_flag

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input text file(s): comma list and/or globs. Not used with tfds input.")
flags.DEFINE_string("output_file", None, "Output TFRecord file(s): comma list, or one path numbered by "
                    "--num_output_shards.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (ids <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary, used when --spm_model_file is not given "
                    "(the released Chinese models).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the input (uncased models).")
define_digit_comma_rule_flag()
flags.DEFINE_bool("do_whole_word_mask", True, "Mask whole words rather than single pieces.")
flags.DEFINE_bool("do_permutation", False, "The original's permutation mode: not supported (it was never used "
                  "for the released models).")
flags.DEFINE_bool("favor_shorter_ngram", True, "p(n) proportional to 1/n; False reverses it.")
flags.DEFINE_bool("random_next_sentence", False, "Next-sentence prediction (random B) instead of sentence order.")
flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
flags.DEFINE_integer("ngram", 3, "Longest masked n-gram, in words.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked-LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Seed of all randomness.")
flags.DEFINE_integer("dupe_factor", 40, "Passes over the data, each with different masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked fraction of tokens.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target sequence length.")
flags.DEFINE_integer("num_output_shards", None, "Write PATH-00000-of-0000N shards of the one --output_file path.")
flags.DEFINE_integer("num_workers", 1, "Worker processes; the output does not depend on it.")
flags.DEFINE_enum("input_format", "text", list(cpd.INPUT_FORMATS), "text: one sentence per line, blank line "
                  "between documents; jsonl: one JSON document per line; tfds: --tfds_name.")
flags.DEFINE_string("json_text_field", "text", "Text field of a JSON line; its lines are the sentences.")
flags.DEFINE_string("tfds_name", None, "tensorflow-datasets text dataset, e.g. wikipedia/20230601.en; it must "
                    "be prepared locally (never downloaded).")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data directory (default: tfds's).")
flags.DEFINE_string("tfds_split", "train", "tensorflow-datasets split.")
flags.DEFINE_string("tfds_text_feature", "text", "Text feature of the tensorflow-datasets examples.")
flags.DEFINE_integer("block_bytes", cpd.DEFAULT_BLOCK_BYTES, "Text per block: the unit of shuffling, of random "
                     "B documents and of work; memory grows with it.")
flags.DEFINE_string("beam_pipeline_options", None, "Run as an Apache Beam pipeline (the beam extra) with these "
                    "options: a comma list without dashes, e.g. runner=DataflowRunner,project=...,region=...,"
                    "temp_location=gs://...; same bytes as the local run. Excludes --num_workers.")
flags.DEFINE_string("summary_file", None, "Summary JSON (default: the output base name + .summary.json).")
define_original_flags({"input_file_mode": "nothing to pass: input is read as bytes and decoded as UTF-8"}, tpu=False)
flags.mark_flags_as_required(["output_file"])


def main(argv):
    del argv
    if FLAGS.do_permutation:
        raise app.UsageError("--do_permutation=true is not supported: the original's permutation mode was an "
                             "unused experiment.")
    if not (FLAGS.spm_model_file or FLAGS.vocab_file):
        raise app.UsageError("Give --spm_model_file (or --vocab_file for a WordPiece vocabulary).")
    tokenizer = AlbertTokenizer(spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
                                do_lower_case=FLAGS.do_lower_case, digit_comma_rule=FLAGS.digit_comma_rule)
    summary = cpd.create_pretraining_data(
        FLAGS.input_file, cpd.output_shard_paths(FLAGS.output_file, FLAGS.num_output_shards), tokenizer,
        input_format=FLAGS.input_format, json_text_field=FLAGS.json_text_field, tfds_name=FLAGS.tfds_name,
        tfds_data_dir=FLAGS.tfds_data_dir, tfds_split=FLAGS.tfds_split, tfds_text_feature=FLAGS.tfds_text_feature,
        max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob, ngram=FLAGS.ngram,
        favor_shorter_ngram=FLAGS.favor_shorter_ngram, do_whole_word_mask=FLAGS.do_whole_word_mask,
        random_next_sentence=FLAGS.random_next_sentence, dupe_factor=FLAGS.dupe_factor,
        random_seed=FLAGS.random_seed, num_workers=FLAGS.num_workers if FLAGS["num_workers"].present else None,
        block_bytes=FLAGS.block_bytes, summary_file=FLAGS.summary_file,
        beam_pipeline_options=FLAGS.beam_pipeline_options)
    for key, value in summary["totals"].items():
        logging.info("%s = %d", key, value)


if __name__ == "__main__":
    entry.run(main)
