"""Trains an ALBERT SentencePiece vocabulary: python -m run_scripts.build_vocab --input=... --model_prefix=..."""

from absl import flags, logging

from data_gen.pretraining import build_vocab
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Comma list or glob of text files, one sentence per line; local paths or "
                    "URLs (gs://...).")
flags.DEFINE_string("model_prefix", None, "Output prefix, a local path or a URL (gs://...): writes PREFIX.model "
                    "and PREFIX.vocab.")
flags.DEFINE_integer("vocab_size", 30000, "Number of pieces, special symbols included.")
flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled (shuffled) from the input.")
flags.mark_flags_as_required(["input", "model_prefix"])


def main(argv):
    del argv
    files = build_vocab.expand_input_files(FLAGS.input)
    model_path = build_vocab.train_sentencepiece(files, FLAGS.model_prefix, vocab_size=FLAGS.vocab_size,
                                                 input_sentence_size=FLAGS.input_sentence_size)
    logging.info("Wrote %s and %s.vocab", model_path, FLAGS.model_prefix)


if __name__ == "__main__":
    entry.run(main)
