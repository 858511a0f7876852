"""Writes the built-in docstring corpus: python -m run_scripts.extract_corpus --output=PATH

One document per docstring of the installed Python modules, one sentence per line, a blank line between
documents (the input format of create_pretraining_data). With --holdout_output, a fixed, hash-chosen part of
the documents goes to a second file for evaluation.

    python -m run_scripts.extract_corpus --small_task_dir=small_task

writes the built-in small classification task instead (data_gen/pretraining/package_pair_task.py): which of two
packages a sentence comes from, 200 training sentences, dev from the documents `make demo` holds out.
"""

from absl import app, flags, logging

from data_gen.pretraining import corpora, package_pair_task
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("output", None, "Text file for the training documents, a local path or a URL (gs://...).")
flags.DEFINE_string("small_task_dir", None, "Write the built-in small classification task (train.tsv, dev.tsv) "
                    "here.")
flags.DEFINE_string("holdout_output", None, "Text file for the held-out documents; none are held out without it.")
flags.DEFINE_float("holdout_fraction", 0.05, "Fraction of documents held out, used with --holdout_output.")
flags.DEFINE_integer("seed", 0, "Salt of the document hash that chooses the held-out documents.")
flags.DEFINE_bool("include_site_packages", False, "Also read the docstrings of the installed site-packages.")
flags.DEFINE_integer("min_words_per_sentence", 3, "Shorter sentences are dropped.")
flags.DEFINE_integer("min_sentences_per_document", 2, "Documents with fewer sentences are dropped.")


def main(argv):
    del argv
    if not FLAGS.output and not FLAGS.small_task_dir:
        raise app.UsageError("Give --output (the corpus), --small_task_dir (the small task) or both.")
    if FLAGS["holdout_fraction"].present and not FLAGS.holdout_output:
        raise app.UsageError(f"--holdout_fraction={FLAGS.holdout_fraction} needs --holdout_output.")
    if FLAGS.small_task_dir:
        counts = package_pair_task.write_package_pair_task(FLAGS.small_task_dir,
                                                           include_site_packages=FLAGS.include_site_packages)
        logging.info("The small task (%s): %s", FLAGS.small_task_dir, counts)
    if not FLAGS.output:
        return
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
