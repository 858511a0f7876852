"""RACE fine-tuning: accuracy by level, the prediction and result files, and `run_race`.

`run_race` reads RACE/{train,dev,test}/{middle,high}/*.txt (per-article files or the merged all.txt,
data_gen.readers.race) and fine-tunes, evaluates and predicts with the shared driver (finetuning.py). It writes
eval_results.{txt,json} (accuracy, accuracy_middle, accuracy_high, loss; the .txt also under the original's
names eval_accuracy and eval_loss) and eval_predictions.tsv on dev; for prediction, test_predictions.tsv and the
test accuracies and loss in predict_results.{txt,json}.

Usage (it needs the RACE data and a pretrained model, so it is not run here):

    from albert_tf.tasks.finetuning_options import FinetuningOptions
    from albert_tf.tasks.race import RaceOptions, run_race

    results = run_race(RaceOptions(
        FinetuningOptions(output_dir="out/race", init_checkpoint="albert_base", learning_rate=1e-5,
                          train_step=12000, warmup_step=1000, do_train=True, do_eval=True),
        data_dir="race_data"))
    results["eval"]  # {'accuracy': ..., 'accuracy_high': ..., 'accuracy_middle': ..., 'loss': ..., ...}
"""

import dataclasses
import json
import os
from typing import Dict, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks import multi_seed
from albert_tf.tasks.checkpoint_evaluation import with_original_names
from albert_tf.tasks.classification_functions import (classification_loss_fn, classification_predict_fn,
                                                      classification_serving_fn)
from albert_tf.tasks.finetuning_options import FinetuningOptions, check_finetuning_options, resolve_cached_dir
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask
from albert_tf.tasks.model_source import resolve_model_source
from albert_tf.training import metrics
from data_gen.readers import race as race_data
from data_gen.readers.race import RaceExample

# The original run_race's names, which eval_results.txt and predict_results also list.
ORIGINAL_METRIC_NAMES = {"eval_accuracy": "accuracy", "eval_loss": "loss"}
_SPLIT_FLAGS = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}


@dataclasses.dataclass
class RaceOptions:
    """A RACE run: where the data is, which levels, the question + option length, and the fine-tuning options.

    `data_dir` holds RACE/ (or is RACE/ itself); `max_qa_length` tokens are kept from the end of each
    question + option; `high_only` / `middle_only` keep one level.

    Example:
    >>> RaceOptions(FinetuningOptions("/tmp/race"), data_dir="race_data", high_only=True).max_qa_length
    128
    """

    finetuning: FinetuningOptions
    data_dir: str
    max_qa_length: int = 128
    high_only: bool = False
    middle_only: bool = False


# ---- metrics and outputs -------------------------------------------------------------------------

def compute_metrics(predictions, labels, levels) -> Dict[str, float]:
    """accuracy over all questions, and accuracy_middle / accuracy_high for the levels present."""
    predictions, labels, levels = np.asarray(predictions), np.asarray(labels), np.asarray(levels)
    results = {"accuracy": metrics.accuracy(predictions, labels)}
    for level_id, level in enumerate(race_data.LEVELS):
        selected = levels == level_id
        if selected.any():
            results[f"accuracy_{level}"] = metrics.accuracy(predictions[selected], labels[selected])
    return results


def write_predictions(path: str, examples: Sequence[RaceExample], predictions: Sequence[int]) -> None:
    """`id\\tlevel\\tprediction\\tlabel` rows (answer letters) with a header."""
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("id\tlevel\tprediction\tlabel\n")
        for example, prediction in zip(examples, predictions):
            handle.write(f"{example.example_id}\t{example.level}\t{race_data.ANSWER_LETTERS[int(prediction)]}\t"
                         f"{race_data.ANSWER_LETTERS[example.label]}\n")


def write_results(path_prefix: str, results: Dict[str, float]) -> None:
    """`name = value` lines in path_prefix.txt (the original's predict_results.txt) and the same in .json."""
    with tf.io.gfile.GFile(path_prefix + ".txt", "w") as handle:
        handle.write("".join(f"{name} = {value}\n" for name, value in sorted(results.items())))
    with tf.io.gfile.GFile(path_prefix + ".json", "w") as handle:
        handle.write(json.dumps(results, indent=2, sort_keys=True) + "\n")


# ---- the task ------------------------------------------------------------------------------------

def build_task(options: RaceOptions, tokenizer) -> FinetuningTask:
    """The FinetuningTask of a RACE run, its splits loaded (and their features cached) as the options ask."""
    finetuning_options = options.finetuning
    levels = race_data.selected_levels(options.high_only, options.middle_only)
    examples = {}

    def load(split):
        split_examples, features = race_data.load_split(
            options.data_dir, split, tokenizer, finetuning_options.max_seq_length, options.max_qa_length,
            resolve_cached_dir(finetuning_options), levels)
        if not split_examples:
            # A test split is scored too (predict_results), so an empty one has nothing to report.
            raise ValueError(f"The RACE {split} files under {options.data_dir} ({', '.join(levels)}) hold no "
                             f"questions; {_SPLIT_FLAGS[split]} needs at least one.")
        examples[split] = split_examples
        return DataSplit(split, features.dataset, features.num_examples)

    def scores(split, outputs):
        predictions = np.argmax(outputs["logits"], axis=-1)
        levels_of_split = [race_data.LEVELS.index(example.level) for example in examples[split.name]]
        return predictions, compute_metrics(predictions, outputs["label_ids"], levels_of_split)

    def task_eval_predictions(path, split, outputs):
        write_predictions(path, examples[split.name], scores(split, outputs)[0])

    def task_predictions(output_dir, split, outputs):
        predictions, results = scores(split, outputs)
        results["loss"] = float(np.mean(outputs["per_example_loss"]))
        write_predictions(os.path.join(output_dir, "test_predictions.tsv"), examples[split.name], predictions)
        write_results(os.path.join(output_dir, "predict_results"),
                      with_original_names(results, ORIGINAL_METRIC_NAMES))
        logging.info("Test results: %s", results)

    choices = tf.TensorSpec([None, len(race_data.ANSWER_LETTERS), finetuning_options.max_seq_length], tf.int32)
    return FinetuningTask(
        name="race",
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertMultipleChoice(
            config, len(race_data.ANSWER_LETTERS), dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": choices, "input_mask": choices, "input_type_ids": choices},
        loss_fn=classification_loss_fn, predict_fn=classification_predict_fn,
        serving_fn=classification_serving_fn,
        compute_metrics=lambda split, outputs: scores(split, outputs)[1], best_metric="accuracy",
        original_metric_names=ORIGINAL_METRIC_NAMES,
        train_data=load("train") if finetuning_options.do_train else None,
        eval_splits=[load("dev")] if finetuning_options.do_eval else [],
        predict_splits=[load("test")] if finetuning_options.do_predict else [],
        write_eval_predictions=task_eval_predictions, write_predictions=task_predictions,
        sequence_features=INPUT_NAMES)


def run_race(options: RaceOptions) -> Dict[str, object]:
    """Fine-tunes, evaluates and predicts RACE as `options` ask; returns `run_finetuning`'s results
    (with `num_trials` > 1, `multi_seed.run_trials`').

    A run stopped by SIGTERM raises checkpointing.TrainingPreempted once its checkpoint is saved; running it
    again resumes. See the module's docstring for an example.
    """
    check_finetuning_options(options.finetuning)
    source = resolve_model_source(options.finetuning)
    return multi_seed.run_trials(build_task(options, source.tokenizer), options.finetuning, source)
