"""Fine-tunes ALBERT on RACE: python -m run_scripts.run_race --data_dir=race_data --output_dir=... --do_train

Reads RACE/{train,dev,test}/{middle,high}/*.txt (per-article files or the merged all.txt). Writes
eval_results.{txt,json} (accuracy, accuracy_middle, accuracy_high, loss; the .txt also under the original's
names eval_accuracy and eval_loss) and eval_predictions.tsv on dev; with --do_predict, test_predictions.tsv and
the test accuracies and loss in predict_results.{txt,json}.
"""

import os

import numpy as np
import tensorflow as tf
from absl import app, flags, logging

from albert_tf import AlbertMultipleChoice
from albert_tf.tasks import finetuning
from albert_tf.training import host_allocator
from data_gen import race
from run_scripts import original_flags
from run_scripts import finetuning_flags

FLAGS = flags.FLAGS
_KEEP_CHECKPOINT_HINT = ("nothing to pass: the original never read it and kept every checkpoint, as "
                         "--eval_every_checkpoint does (--keep_checkpoint_max sets another number)")
finetuning_flags.define_finetuning_flags(learning_rate=1e-5, max_seq_length=512, train_step=12000, warmup_step=1000,
                                         save_checkpoints_steps=100, do_train=True, do_eval=True,
                                         original_flags={"train_file": original_flags.CACHED_FEATURES,
                                                         "eval_file": original_flags.CACHED_FEATURES,
                                                         "predict_file": original_flags.CACHED_FEATURES,
                                                         "task_name": "nothing to pass: run_race runs RACE",
                                                         "num_keep_checkpoint": _KEEP_CHECKPOINT_HINT})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("data_dir", None, "The directory holding RACE/ (or RACE/ itself).")
flags.DEFINE_integer("max_qa_length", 128, "Tokens kept from the end of each question + option.")
flags.DEFINE_bool("high_only", False, "Only the high-school questions.")
flags.DEFINE_bool("middle_only", False, "Only the middle-school questions.")
flags.mark_flag_as_required("data_dir")
# The original run_race's names, which eval_results.txt and predict_results also list.
ORIGINAL_METRIC_NAMES = {"eval_accuracy": "accuracy", "eval_loss": "loss"}


def _race_task(options, tokenizer):
    levels = race.selected_levels(FLAGS.high_only, FLAGS.middle_only)
    examples = {}

    def load(split):
        split_examples, features = race.load_split(FLAGS.data_dir, split, tokenizer, options.max_seq_length,
                                                   FLAGS.max_qa_length, finetuning_flags.cached_dir(), levels)
        examples[split] = split_examples
        return finetuning.DataSplit(split, features.dataset, features.num_examples)

    def scores(split, outputs):
        predictions = np.argmax(outputs["logits"], axis=-1)
        levels_of_split = [race.LEVELS.index(example.level) for example in examples[split.name]]
        return predictions, race.compute_metrics(predictions, outputs["label_ids"], levels_of_split)

    def write_eval_predictions(path, split, outputs):
        race.write_predictions(path, examples[split.name], scores(split, outputs)[0])

    def write_predictions(output_dir, split, outputs):
        predictions, results = scores(split, outputs)
        results["loss"] = float(np.mean(outputs["per_example_loss"]))
        race.write_predictions(os.path.join(output_dir, "test_predictions.tsv"), examples[split.name], predictions)
        race.write_results(os.path.join(output_dir, "predict_results"),
                           finetuning.with_original_names(results, ORIGINAL_METRIC_NAMES))
        logging.info("Test results: %s", results)

    choices = tf.TensorSpec([None, len(race.ANSWER_LETTERS), options.max_seq_length], tf.int32)
    return finetuning.FinetuningTask(
        name="race",
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertMultipleChoice(
            config, len(race.ANSWER_LETTERS), dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": choices, "input_mask": choices, "input_type_ids": choices},
        loss_fn=finetuning.classification_loss_fn, predict_fn=finetuning.classification_predict_fn,
        serving_fn=finetuning.classification_serving_fn,
        compute_metrics=lambda split, outputs: scores(split, outputs)[1], best_metric="accuracy",
        original_metric_names=ORIGINAL_METRIC_NAMES,
        train_data=load("train") if options.do_train else None,
        eval_splits=[load("dev")] if options.do_eval else [],
        predict_splits=[load("test")] if options.do_predict else [],
        write_eval_predictions=write_eval_predictions, write_predictions=write_predictions)


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    options = finetuning_flags.finetuning_options()
    tokenizer = finetuning_flags.tokenizer_from_flags()
    finetuning_flags.run(_race_task(options, tokenizer), options)


if __name__ == "__main__":
    app.run(main)
