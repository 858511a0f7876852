"""Evaluating a fine-tuning run's checkpoints: predictions in example order, the metrics of every eval split in
eval_results.txt / eval_results.json, and the best checkpoint by the task's metric kept in `output_dir/best/`.

The final checkpoint is evaluated, or with `eval_every_checkpoint` every checkpoint that exists, never waiting for
new ones (google-research/albert#243). Predictions come from this run's best checkpoint, else as
`prediction_checkpoint` says.
"""

import functools
import json
import os
import re
import uuid
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import writing
from albert_tf.tasks import dynamic_padding
from albert_tf.tasks.finetuning_options import FinetuningOptions, resolve_checkpoints_kept
from albert_tf.tasks.finetuning_task import EXAMPLE_INDEX, DataSplit, FinetuningTask, Outputs

# The feature that carries each example's place in its split through a prediction sorted by length.
POSITION = "prediction_position"
BEST_DIR_NAME = "best"
BEST_CHECKPOINT_NAME = "ckpt-best"


def predict_split(trainer, split: DataSplit, batch_size: int, predict_fn,
                  sequence_features: Sequence[str] = ()) -> Outputs:
    """`predict_fn`'s outputs over `split`, in example order, checked to hold a row per example.

    With `sequence_features` (dynamic padding) each window of GROUP_WINDOW_BATCHES batches is predicted sorted by
    length, so that each batch, cut to its longest member, holds examples of similar length; the outputs are put
    back in the examples' order.
    """
    sort = bool(sequence_features)
    outputs = trainer.predict(_finite_dataset_fn(split, sequence_features, sort),
                              _keeping_positions(predict_fn) if sort else predict_fn, batch_size)
    if not outputs:
        outputs = _empty_outputs(trainer.model, split, predict_fn)
    elif sort:
        order = np.argsort(outputs.pop(POSITION), kind="stable")
        outputs = {name: value[order] for name, value in outputs.items()}
    if EXAMPLE_INDEX in outputs:
        order = np.argsort(outputs[EXAMPLE_INDEX], kind="stable")
        outputs = {name: value[order] for name, value in outputs.items()}
    count = len(next(iter(outputs.values()))) if outputs else 0
    if count != split.num_examples:
        raise ValueError(f"Split {split.name!r} should hold {split.num_examples} examples but prediction "
                         f"returned {count}.")
    return outputs


def _finite_dataset_fn(split: DataSplit, sequence_features: Sequence[str] = (), sort_by_length: bool = False):
    def dataset_fn(input_context, batch_size, skip_batches):
        data = split.dataset()
        if sort_by_length:
            # Numbered before sharding, so that every worker's outputs go back to one order.
            data = data.enumerate().map(lambda position, example: dict(example, **{POSITION: position}))
        if input_context is not None and input_context.num_input_pipelines > 1:
            data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if sort_by_length:
            data = dynamic_padding.sort_by_length(data, batch_size * dynamic_padding.GROUP_WINDOW_BATCHES)
        data = data.batch(batch_size).skip(skip_batches)
        if sequence_features:
            data = data.map(lambda batch: dynamic_padding.trim_to_longest(batch, sequence_features))
        return data.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


@functools.lru_cache(maxsize=None)
def _keeping_positions(predict_fn):
    # One function per predict_fn, so that the Trainer traces it once, not at every evaluation.
    def predict(model, batch):
        outputs = predict_fn(model, {name: value for name, value in batch.items() if name != POSITION})
        return dict(outputs, **{POSITION: batch[POSITION]})

    return predict


def _empty_outputs(model, split, predict_fn) -> Outputs:
    """predict_fn's outputs with no rows, for a split without examples: a task writes the same files, just empty.

    An empty dataset runs no prediction step, so the names, dtypes and row shapes come from tracing one.
    """
    element_spec = _finite_dataset_fn(split)(None, 1, 0).element_spec
    traced = tf.function(lambda batch: predict_fn(model, batch), autograph=False).get_concrete_function(element_spec)
    return {name: np.zeros([0] + [size or 0 for size in tensor.shape[1:]], tensor.dtype.as_numpy_dtype)
            for name, tensor in traced.structured_outputs.items()}


def with_original_names(metrics: Mapping[str, float], original_metric_names: Mapping[str, str]) -> Dict[str, float]:
    """`metrics` plus each metric that `original_metric_names` ({original: ours}) names, under its original name.

    Example:
    >>> with_original_names({"accuracy": 0.5, "loss": 0.7}, {"eval_accuracy": "accuracy", "eval_loss": "loss"})
    {'accuracy': 0.5, 'loss': 0.7, 'eval_accuracy': 0.5, 'eval_loss': 0.7}
    """
    return {**metrics, **{original: metrics[ours] for original, ours in original_metric_names.items()
                          if ours in metrics}}


def prediction_checkpoint(options: FinetuningOptions, best_checkpoint: Optional[str]) -> Optional[str]:
    """This run's best checkpoint; else the last one if this run trained; else an earlier run's best/
    (the original always predicted with model.ckpt-best); else the last checkpoint; else None."""
    if best_checkpoint:
        return best_checkpoint
    latest = tf.train.latest_checkpoint(options.output_dir)
    earlier_best = os.path.join(options.output_dir, BEST_DIR_NAME, BEST_CHECKPOINT_NAME)
    if not options.do_train and tf.io.gfile.exists(earlier_best + ".index"):
        return earlier_best
    return latest


def evaluate_checkpoints(trainer, task: FinetuningTask, options: FinetuningOptions,
                         train_steps: Optional[int]) -> Dict[str, Dict[str, object]]:
    """Evaluates the checkpoints in output_dir (or the weights the trainer holds, when there are none), writes
    eval_results.txt and .json and the eval predictions, and keeps the best checkpoint in output_dir/best/.

    Returns {"final": the last checkpoint's metrics with `global_step`, "best": the best one's, with
    `checkpoint` when there is one}.
    """
    paths = _checkpoints_to_evaluate(options, train_steps)
    if not paths:
        logging.warning("No checkpoint in %s: evaluating the initial weights (from --init_checkpoint, "
                        "--hub_module_handle or random) as global_step 0.", options.output_dir)
    text_path = os.path.join(options.output_dir, "eval_results.txt")
    final = best = None
    with tf.io.gfile.GFile(text_path, "w") as text:
        for path in paths or [None]:
            if path:
                trainer.restore(path)
            metrics, outputs_by_split = _evaluate_splits(trainer, task, options)
            metrics["global_step"] = _checkpoint_step(path) if path else 0
            logging.info("Eval of %s: %s", path or "the initial weights", metrics)
            # The original's `best` line holds the best value before this checkpoint (-1 at first).
            previous_best = best[1][task.best_metric] if best else -1
            final = (path, metrics, outputs_by_split)
            if best is None or metrics[task.best_metric] > best[1][task.best_metric]:
                best = final
            lines = with_original_names(metrics, task.original_metric_names)
            lines.update({f"best_{task.best_metric}": best[1][task.best_metric],
                          "best_global_step": best[1]["global_step"]})
            text.write("".join(f"{name} = {lines[name]}\n" for name in sorted(lines)))
            text.write(f"best = {previous_best}\n{'=' * 50}\n")
            text.flush()
    _write_json(os.path.join(options.output_dir, "eval_results.json"), final[1])
    _write_eval_predictions(task, options.output_dir, final[2])
    best_summary = dict(best[1])
    if best[0]:
        best_summary["checkpoint"] = _save_best(task, options.output_dir, best)
    return {"final": final[1], "best": best_summary}


def _checkpoint_step(path):
    match = re.search(r"-(\d+)$", path)
    return int(match.group(1)) if match else 0


def _checkpoints_to_evaluate(options, train_steps):
    state = tf.train.get_checkpoint_state(options.output_dir)
    paths = [path for path in (state.all_model_checkpoint_paths if state else [])
             if tf.io.gfile.exists(path + ".index")]
    paths.sort(key=_checkpoint_step)
    if not options.eval_every_checkpoint:
        if len(paths) > 1:
            logging.info("Evaluating the latest of %d checkpoints, %s; --eval_every_checkpoint evaluates each and "
                         "keeps the best, as the original did.", len(paths), paths[-1])
        return paths[-1:]
    if train_steps and len(paths) < train_steps // options.save_checkpoints_steps:
        logging.warning("--eval_every_checkpoint evaluates the %d checkpoint(s) that still exist; "
                        "--keep_checkpoint_max=%d deleted the older ones (0 keeps them all, as the original did).",
                        len(paths), resolve_checkpoints_kept(options))
    return paths


def _evaluate_splits(trainer, task, options):
    """Metrics of every eval split (with their suffixes) and the raw outputs, for the loaded weights."""
    metrics, outputs_by_split = {}, []
    trimmed = dynamic_padding.features_to_trim(task, options)
    predict_fn = dynamic_padding.prediction_function(task, trimmed)
    for split in task.eval_splits:
        outputs = predict_split(trainer, split, options.eval_batch_size, predict_fn, trimmed)
        split_metrics = dict(task.compute_metrics(split, outputs))
        if "per_example_loss" in outputs:
            split_metrics["loss"] = float(np.mean(outputs["per_example_loss"]))
        metrics.update({name + split.metric_suffix: float(value) for name, value in split_metrics.items()})
        outputs_by_split.append((split, outputs))
    if task.best_metric not in metrics:
        raise ValueError(f"Task {task.name!r} selects checkpoints by {task.best_metric!r}, which its metrics "
                         f"{sorted(metrics)} do not include.")
    return metrics, outputs_by_split


def _write_eval_predictions(task, directory, outputs_by_split):
    if task.write_eval_predictions is None:
        return
    for split, outputs in outputs_by_split:
        name = f"eval_predictions{split.metric_suffix}.{task.eval_predictions_extension}"
        task.write_eval_predictions(os.path.join(directory, name), split, outputs)


def _save_best(task, output_dir, best):
    """Copies the best checkpoint, its metrics and its eval predictions into output_dir/best/, atomically."""
    path, metrics, outputs_by_split = best
    best_dir = os.path.join(output_dir, BEST_DIR_NAME)
    staging = os.path.join(output_dir, f".{BEST_DIR_NAME}.tmp-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(staging)
    writing.copy_checkpoint(path, os.path.join(staging, BEST_CHECKPOINT_NAME))
    with tf.io.gfile.GFile(os.path.join(staging, "checkpoint"), "w") as handle:
        handle.write(f'model_checkpoint_path: "{BEST_CHECKPOINT_NAME}"\n'
                     f'all_model_checkpoint_paths: "{BEST_CHECKPOINT_NAME}"\n')
    _write_json(os.path.join(staging, "eval_results.json"), dict(metrics, source_checkpoint=path))
    _write_eval_predictions(task, staging, outputs_by_split)
    if tf.io.gfile.exists(best_dir):
        tf.io.gfile.rmtree(best_dir)
    tf.io.gfile.rename(staging, best_dir)
    logging.info("Best checkpoint by %s: %s (%s) -> %s", task.best_metric, path, metrics[task.best_metric],
                 best_dir)
    return os.path.join(best_dir, BEST_CHECKPOINT_NAME)


def _write_json(path, values):
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(values, indent=2, sort_keys=True) + "\n")
