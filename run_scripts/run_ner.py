"""Fine-tunes ALBERT for named-entity recognition: python -m run_scripts.run_ner --data_dir=conll2003 --output_dir=...

Reads CoNLL-2003 files (train.txt, dev.txt or valid.txt, test.txt: one token per line with its tag last, a blank
line between sentences) with tags in --tag_scheme, or with --tfds=conll2003 tensorflow-datasets' conll2003 prepared
locally. Writes eval_results.{txt,json} (entity precision, recall and
f1 as conlleval computes them, token accuracy, loss), eval_predictions.txt (word, gold tag, predicted tag) and
best/; with --do_predict, test_predictions.txt and the test scores in predict_results.{txt,json}.
"""

from absl import flags

from albert_tf.tasks.ner import NerOptions, run_ner
from albert_tf.training import host_allocator
from data_gen.readers.tag_schemes import TAG_SCHEMES
from run_scripts import entry, finetuning_flags, training_flags

FLAGS = flags.FLAGS
# No original ALBERT script: the usual BERT CoNLL-2003 recipe (3 epochs, 10% warmup, 128 tokens).
finetuning_flags.define_finetuning_flags(max_seq_length=128, num_train_epochs=3.0,
                                         warmup_proportion=0.1, do_train=True,
                                         do_eval=True)
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("data_dir", None, "The directory holding train.txt, dev.txt (or valid.txt) and test.txt "
                    "(or give --tfds).")
flags.DEFINE_string("tfds", None, "Read this tensorflow-datasets dataset, prepared locally, instead of --data_dir: "
                    "conll2003 (its train, dev and test splits; tokens and ner tags).")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data_dir (default: its own default).")
flags.DEFINE_enum("tag_scheme", "iob1", list(TAG_SCHEMES),
                  "The files' tags: iob1 (the CoNLL-2003 release; IOB2 files read the same), iob2 or bioes.")


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    training_flags.time_compile_paths_in_child_process("run_scripts.run_ner")
    options = NerOptions(finetuning_flags.finetuning_options(), data_dir=FLAGS.data_dir, tag_scheme=FLAGS.tag_scheme,
                         tfds_name=FLAGS.tfds, tfds_data_dir=FLAGS.tfds_data_dir)
    finetuning_flags.run(run_ner, options)


if __name__ == "__main__":
    entry.run(main)
