"""Fine-tunes ALBERT on a GLUE task: python -m run_scripts.run_glue --task_name=MRPC --data_dir=glue_data ...

Reads the GLUE data directory (the original file layout) or, with --tfds, tensorflow-datasets glue/<task>
prepared locally. Writes eval_results.{txt,json} (the .txt also under the original run_classifier's names,
e.g. eval_accuracy) and eval_predictions.tsv (dev), and with --do_predict the
GLUE submission file(s) (e.g. MRPC.tsv; MNLI writes MNLI-m.tsv, MNLI-mm.tsv and, when the diagnostic
data is there, AX.tsv) and, as the original, test_results.tsv with each test example's class probabilities
(test_results_MNLI-mm.tsv and test_results_AX.tsv for MNLI's others).
"""

import os

import tensorflow as tf
from absl import app, flags, logging

from albert_tf import AlbertClassifier
from albert_tf.tasks import finetuning
from albert_tf.training import host_allocator
from data_gen import glue
from run_scripts import finetuning_flags

FLAGS = flags.FLAGS
finetuning_flags.define_finetuning_flags(
    learning_rate=5e-5, max_seq_length=512, train_step=1000, warmup_step=0,
    original_flags={"threshold_to_export": "not supported: the exported classifier serves its logits; apply a "
                                           "threshold to them where it is served"})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("task_name", None, f"The GLUE task: {', '.join(glue.GLUE_TASKS)} (case-insensitive).")
flags.DEFINE_string("data_dir", None, "The GLUE data directory (CoLA/, MRPC/, MNLI/, diagnostic/, ...).")
flags.DEFINE_bool("tfds", False, "Read tensorflow-datasets glue/<task> (prepared locally) instead of --data_dir.")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data_dir (default: its own default).")
flags.DEFINE_bool("use_paper_hparams", False,
                  "Use run_glue.sh's learning rate, steps, warmup, checkpoint interval and batch size for the "
                  "task, and evaluate every checkpoint as the original run_classifier did (flags given "
                  "explicitly still win).")
flags.mark_flag_as_required("task_name")


def _options(task):
    overrides = {}
    if FLAGS.use_paper_hparams:
        explicit = [name for name in ("learning_rate", "train_step", "warmup_step", "save_checkpoints_steps",
                                      "train_batch_size", "num_train_epochs", "warmup_proportion")
                    if FLAGS[name].present]
        overrides = glue.paper_hparams(task.name, explicit)
        if not FLAGS["eval_every_checkpoint"].present:
            overrides["eval_every_checkpoint"] = True
        logging.info("run_glue.sh hyperparameters for %s: %s", task.name, overrides)
    options = finetuning_flags.finetuning_options(**overrides)
    if task.name == "ax" and (options.do_train or options.do_eval):
        raise ValueError("--task_name=ax is prediction only (--do_predict) with a model fine-tuned on MNLI "
                         "(--init_checkpoint or its --output_dir); it has no training or dev data.")
    if not FLAGS.tfds and not FLAGS.data_dir:
        raise ValueError("Give --data_dir (the GLUE data directory) or --tfds.")
    return options


def _splits(task, options, tokenizer):
    """DataSplits for training, evaluation and prediction, and the examples behind each, by split name."""
    examples = {}

    def load(glue_task, split, name=None, metric_suffix=""):
        split_examples, features = glue.load_split(
            glue_task, split, tokenizer, options.max_seq_length, finetuning_flags.cached_dir(),
            data_dir=FLAGS.data_dir, use_tfds=FLAGS.tfds, tfds_data_dir=FLAGS.tfds_data_dir)
        name = name or split
        examples[name] = (glue_task, split, split_examples)
        return finetuning.DataSplit(name, features.dataset, features.num_examples, metric_suffix)

    train = load(task, "train") if options.do_train else None
    evaluation = [load(task, split, metric_suffix="_mismatched" if split == "dev_mismatched" else "")
                  for split in (task.eval_splits if options.do_eval else [])]
    prediction = [load(task, split) for split in (task.test_splits if options.do_predict else [])]
    if options.do_predict and task.name == "mnli":
        prediction.extend(_diagnostic_split(load))
    return train, evaluation, prediction, examples


def _diagnostic_split(load):
    """The AX diagnostic set, which GLUE scores with the MNLI model, when the data source has it."""
    ax = glue.get_task("ax")
    if not FLAGS.tfds and not tf.io.gfile.exists(glue.split_file(FLAGS.data_dir, ax, "test")):
        logging.warning("No %s: AX.tsv (predicted by the MNLI model) is not written.",
                        glue.split_file(FLAGS.data_dir, ax, "test"))
        return []
    try:
        return [load(ax, "test", name="ax_test")]
    except ValueError as error:
        logging.warning("AX.tsv (predicted by the MNLI model) is not written: %s", error)
        return []


def _glue_task(task, options, tokenizer):
    train, evaluation, prediction, examples = _splits(task, options, tokenizer)
    regression = task.is_regression

    def compute_metrics(split, outputs):
        return glue.compute_metrics(task, glue.predictions_from_outputs(task, outputs), outputs["label_ids"])

    def write_eval_predictions(path, split, outputs):
        glue.write_eval_predictions(path, task, examples[split.name][2], glue.predictions_from_outputs(task, outputs))

    def write_predictions(output_dir, split, outputs):
        glue_task, glue_split, split_examples = examples[split.name]
        path = os.path.join(output_dir, glue_task.submission_files[glue_split])
        glue.write_submission(path, glue_task, split_examples, glue.predictions_from_outputs(task, outputs))
        glue.write_probabilities(os.path.join(output_dir, glue.probabilities_file(task, glue_task, glue_split)),
                                 task, outputs)

    sequence = tf.TensorSpec([None, options.max_seq_length], tf.int32)
    return finetuning.FinetuningTask(
        name=task.name,
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertClassifier(
            config, task.num_labels, dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=finetuning.regression_loss_fn if regression else finetuning.classification_loss_fn,
        predict_fn=finetuning.regression_predict_fn if regression else finetuning.classification_predict_fn,
        serving_fn=finetuning.regression_serving_fn if regression else finetuning.classification_serving_fn,
        compute_metrics=compute_metrics, best_metric=task.best_metric,
        original_metric_names=glue.original_metric_names(task), train_data=train, eval_splits=evaluation,
        predict_splits=prediction, write_eval_predictions=write_eval_predictions,
        write_predictions=write_predictions)


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    task = glue.get_task(FLAGS.task_name)
    options = _options(task)
    tokenizer = finetuning_flags.tokenizer_from_flags()
    finetuning_flags.run(_glue_task(task, options, tokenizer), options)


if __name__ == "__main__":
    app.run(main)
