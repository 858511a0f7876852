"""Fine-tunes ALBERT on your own labelled text: python -m run_scripts.run_classifier --train_file=train.csv ...

Reads TSV, CSV or JSON-lines files (--train_file, --eval_file, --predict_file; the format from the extension or
--file_format) with the texts in --text_field (and --text_b_field) and the label in --label_field, and trains a
single-label classifier, a multi-label one (--multi_label) or a regression (--regression). Writes
eval_results.{txt,json}, eval_predictions.tsv, best/ and labels.txt, and with --do_predict predictions.tsv and
test_results.tsv, as run_glue does (albert_tf/tasks/text_classification.py).
"""

from absl import flags

from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from albert_tf.training import host_allocator
from data_gen.readers.labeled_text import FILE_FORMATS
from run_scripts import entry, finetuning_flags, training_flags

FLAGS = flags.FLAGS
# No original ALBERT script: the usual recipe for a new dataset (3 epochs, 10% warmup, 128 tokens).
# The original's run_classifier.py is run_glue here: its GLUE flags point there.
GLUE_SCRIPT = "this run_classifier reads your own files (--train_file, --eval_file, --predict_file); the original " \
              "run_classifier's GLUE tasks are run_scripts.run_glue's"
finetuning_flags.define_finetuning_flags(max_seq_length=128, num_train_epochs=3.0,
                                         warmup_proportion=0.1,
                                         original_flags={"task_name": GLUE_SCRIPT, "data_dir": GLUE_SCRIPT})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("train_file", None, "The training file (.tsv, .csv or .jsonl).")
flags.DEFINE_string("eval_file", None, "The evaluation file, labelled as the training file.")
flags.DEFINE_string("predict_file", None, "The file to predict: the text field(s) only; a label column is ignored.")
flags.DEFINE_enum("file_format", None, list(FILE_FORMATS), "The files' format (default: from each extension; "
                  ".json reads as JSON lines).")
flags.DEFINE_string("text_field", None, "The column (header name, or 0-based index without a header) or JSON key "
                    "of the text.")
flags.DEFINE_string("text_b_field", None, "The column or key of a second text, for sentence pairs.")
flags.DEFINE_string("label_field", None, "The column or key of the label.")
flags.DEFINE_list("labels", None, "The labels, comma-separated, in the model's order (default: labels.txt in "
                  "--output_dir, else the sorted labels of --train_file).")
flags.DEFINE_bool("multi_label", False, "Several labels per example: a JSON list, or a field split at "
                  "--label_separator; sigmoid outputs and binary cross-entropy.")
flags.DEFINE_string("label_separator", None, "With --multi_label, the string between the labels of a field, e.g. '|'.")
flags.DEFINE_float("multi_label_threshold", 0.5, "With --multi_label, an example has every label whose probability "
                   "is at least this.")
flags.DEFINE_bool("regression", False, "The label is a number: one output and mean squared error, as STS-B.")
flags.mark_flag_as_required("text_field")


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    training_flags.time_compile_paths_in_child_process("run_scripts.run_classifier")
    options = TextClassificationOptions(
        finetuning_flags.finetuning_options(), text_field=FLAGS.text_field, label_field=FLAGS.label_field,
        text_b_field=FLAGS.text_b_field, train_file=FLAGS.train_file, eval_file=FLAGS.eval_file,
        predict_file=FLAGS.predict_file, file_format=FLAGS.file_format, labels=FLAGS.labels,
        multi_label=FLAGS.multi_label, label_separator=FLAGS.label_separator,
        multi_label_threshold=FLAGS.multi_label_threshold, regression=FLAGS.regression)
    finetuning_flags.run(run_text_classification, options)


if __name__ == "__main__":
    entry.run(main)
