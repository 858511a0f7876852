"""Writes the built-in docstring corpus: python -m run_scripts.extract_corpus --output=PATH

One document per docstring of the installed Python modules, one sentence per line, a blank line between
documents (the input format of create_pretraining_data). With --holdout_output, a fixed, hash-chosen part of
the documents goes to a second file for evaluation.
"""

from absl import app, flags, logging

from data_gen.pretraining import corpora
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("output", None, "Text file for the training documents, a local path or a URL (gs://...).")
flags.DEFINE_string("holdout_output", None, "Text file for the held-out documents; none are held out without it.")
flags.DEFINE_float("holdout_fraction", 0.05, "Fraction of documents held out, used with --holdout_output.")
flags.DEFINE_integer("seed", 0, "Salt of the document hash that chooses the held-out documents.")
flags.DEFINE_bool("include_site_packages", False, "Also read the docstrings of the installed site-packages.")
flags.DEFINE_integer("min_words_per_sentence", 3, "Shorter sentences are dropped.")
flags.DEFINE_integer("min_sentences_per_document", 2, "Documents with fewer sentences are dropped.")
flags.mark_flag_as_required("output")


def main(argv):
    del argv
    if FLAGS["holdout_fraction"].present and not FLAGS.holdout_output:
        raise app.UsageError(f"--holdout_fraction={FLAGS.holdout_fraction} needs --holdout_output.")
    stats = corpora.write_corpus(
        FLAGS.output,
        include_site_packages=FLAGS.include_site_packages,
        holdout_fraction=FLAGS.holdout_fraction if FLAGS.holdout_output else 0.0,
        holdout_path=FLAGS.holdout_output,
        seed=FLAGS.seed,
        min_words_per_sentence=FLAGS.min_words_per_sentence,
        min_sentences_per_document=FLAGS.min_sentences_per_document,
    )
    for key in sorted(stats):
        logging.info("%s = %d", key, stats[key])


if __name__ == "__main__":
    entry.run(main)
