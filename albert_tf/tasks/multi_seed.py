"""Multi-seed fine-tuning: `num_trials` runs of one task from the same weights, their spread, and the best of them.

Fine-tuning large models is unstable: the same checkpoint and hyperparameters give good and failed runs by seed
(BERT restarted BERT-large on the small GLUE sets and kept the best dev model; the ALBERT paper reports the median
over 5 runs for the GLUE sets with a large variance on dev). `run_trials` runs a task's `FinetuningTask` with
`FinetuningOptions.num_trials` seeds and lays the output directory out as:

- `trial-<k>/` for k = 0 .. num_trials - 1: an ordinary run of the driver (checkpoints, eval_results, best/) with
  seed `seed + k`, so trial-0 is the run a single `--seed` gives. `trial-<k>/trial_results.json`, written when
  the trial has finished, records its task, seed and the metrics of its best checkpoint (the one its best/ holds).
- `eval_results.json`: `trials` (each trial's index, task, seed and metrics), the `median`, `mean` and `std` (the
  sample standard deviation) of every numeric metric over the trials, `best_metric` and `best_trial`, the trial
  with the highest value of the task's metric (the one that picks its best checkpoint); `eval_results.txt` says
  the same as `name = value` lines.
- `best/`: a copy of the best trial's best/ (checkpoint, its eval_results.json and eval predictions), and
  `albert_config.json` beside it; predictions (`do_predict`) and the serving export (`export_dir`) are made once,
  from that checkpoint, into output_dir and export_dir as a single run makes them.

A rerun keeps every finished trial (it has trial_results.json), resumes a half-finished one from its checkpoint
as the driver does, and with a larger num_trials adds the trials that are missing. num_trials = 1 is the
driver's single run, unchanged.

Example:
>>> trial_seed(12345, 2), os.path.basename(trial_dir("/tmp/mrpc", 2))
(12347, 'trial-2')
"""

import dataclasses
import json
import math
import os
import time
import uuid
from typing import Dict, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import formats
from albert_tf.tasks import finetuning
from albert_tf.tasks.checkpoint_evaluation import BEST_CHECKPOINT_NAME, BEST_DIR_NAME
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.finetuning_task import FinetuningTask
from albert_tf.tasks.model_source import ModelSource, resolve_model_source

TRIAL_DIR_PREFIX = "trial-"
TRIAL_RESULTS_NAME = "trial_results.json"
EVAL_RESULTS_NAME = "eval_results"
STATISTICS = ("median", "mean", "std")


def trial_seed(seed: int, trial: int) -> int:
    """The seed of trial `trial` (0-based): `seed + trial`, so trial 0 is the single run of `seed`."""
    return seed + trial


def trial_dir(output_dir: str, trial: int) -> str:
    """Where trial `trial` (0-based) runs: output_dir/trial-<trial>."""
    return os.path.join(output_dir, f"{TRIAL_DIR_PREFIX}{trial}")


def _numeric(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _score(metrics: Mapping[str, object], best_metric: str) -> float:
    value = float(metrics[best_metric])
    return -math.inf if math.isnan(value) else value


def aggregate_trials(trials: Sequence[Mapping[str, object]], best_metric: str) -> Dict[str, object]:
    """The eval_results.json of a multi-seed run from its trials' records ({"trial", "seed", "metrics"}).

    `median`, `mean` and `std` cover every numeric metric that all trials report; `std` is the sample standard
    deviation (n - 1 in the denominator: the trials are a sample of the seeds one could have drawn), so it needs
    two trials. `best_trial` is the trial with the highest `best_metric` (a NaN never wins; the first of equal
    ones does).

    Example:
    >>> summary = aggregate_trials([{"trial": 0, "seed": 1, "metrics": {"accuracy": 0.5, "loss": 0.7}},
    ...                             {"trial": 1, "seed": 2, "metrics": {"accuracy": 0.9, "loss": 0.3}},
    ...                             {"trial": 2, "seed": 3, "metrics": {"accuracy": 0.7, "loss": 0.5}}], "accuracy")
    >>> summary["best_trial"], summary["median"]["accuracy"], round(summary["std"]["loss"], 6)
    (1, 0.7, 0.2)
    """
    if len(trials) < 2:
        raise ValueError(f"Aggregating trials needs at least two of them (their sample standard deviation), got "
                         f"{len(trials)}.")
    for record in trials:
        if best_metric not in record["metrics"]:
            raise ValueError(f"Trial {record['trial']} reports no {best_metric!r}, the metric that picks the best "
                             f"trial; it has {sorted(record['metrics'])}.")
    names = [name for name, value in sorted(trials[0]["metrics"].items())
             if _numeric(value) and all(_numeric(record["metrics"].get(name)) for record in trials)]
    values = {name: np.array([float(record["metrics"][name]) for record in trials]) for name in names}
    best = max(trials, key=lambda record: _score(record["metrics"], best_metric))
    return {
        "num_trials": len(trials),
        "best_metric": best_metric,
        "best_trial": best["trial"],
        "trials": [dict(record) for record in trials],
        "median": {name: float(np.median(column)) for name, column in values.items()},
        "mean": {name: float(np.mean(column)) for name, column in values.items()},
        "std": {name: float(np.std(column, ddof=1)) for name, column in values.items()},
    }


def summary_text(summary: Mapping[str, object]) -> str:
    """eval_results.txt of a multi-seed run: `name = value` lines for the run, each trial, then the statistics.

    Example:
    >>> print(summary_text({"num_trials": 2, "best_metric": "f1", "best_trial": 0, "median": {"f1": 0.8},
    ...                     "mean": {"f1": 0.8}, "std": {"f1": 0.1},
    ...                     "trials": [{"trial": 0, "seed": 7, "metrics": {"f1": 0.9}},
    ...                                {"trial": 1, "seed": 8, "metrics": {"f1": 0.7}}]}), end="")
    best_metric = f1
    best_trial = 0
    num_trials = 2
    ==================================================
    seed = 7
    trial = 0
    f1 = 0.9
    ==================================================
    seed = 8
    trial = 1
    f1 = 0.7
    ==================================================
    median_f1 = 0.8
    mean_f1 = 0.8
    std_f1 = 0.1
    """
    separator = "=" * 50 + "\n"
    blocks = ["".join(f"{name} = {summary[name]}\n" for name in ("best_metric", "best_trial", "num_trials"))]
    for record in summary["trials"]:
        blocks.append(f"seed = {record['seed']}\ntrial = {record['trial']}\n" +
                      "".join(f"{name} = {value}\n" for name, value in sorted(record["metrics"].items())))
    blocks.append("".join(f"{statistic}_{name} = {value}\n" for statistic in STATISTICS
                          for name, value in sorted(summary[statistic].items())))
    return separator.join(blocks)


# ---- the run -------------------------------------------------------------------------------------

def run_trials(task: FinetuningTask, options: FinetuningOptions,
               source: Optional[ModelSource] = None) -> Dict[str, object]:
    """Runs `task` `options.num_trials` times with seeds `options.seed + k`; returns what it measured.

    With one trial this is `finetuning.run_finetuning(task, options, source)`. With more, the result is
    eval_results.json's content plus `best` (the best trial's metrics, with `checkpoint` in output_dir/best/) and,
    when it predicted or exported, `prediction_checkpoint`. Every trial starts from `source` (resolved here
    without a tokenizer when not given).

    Example:
    >>> task = glue.build_task(glue_options, options, source.tokenizer)  # doctest: +SKIP
    >>> run_trials(task, dataclasses.replace(options, num_trials=5), source)["median"]["accuracy"]  # doctest: +SKIP
    0.87
    """
    if options.num_trials == 1:
        return finetuning.run_finetuning(task, options, source)
    if source is None:
        source = resolve_model_source(options, with_tokenizer=False)
    tf.io.gfile.makedirs(options.output_dir)
    # As a single run leaves it beside its checkpoints: a rerun that names no config finds it here.
    source.config.to_json_file(os.path.join(options.output_dir, formats.ALBERT_CONFIG_NAME))
    records, durations = [], []
    for trial in range(options.num_trials):
        records.append(_finished_trial(task, options, trial) or _run_trial(task, options, source, trial, durations))
    summary = aggregate_trials(records, task.best_metric)
    best = summary["best_trial"]
    checkpoint = _copy_best_trial(options.output_dir, trial_dir(options.output_dir, best))
    _write_summary(options.output_dir, summary)
    logging.info("%d trials of %s: median %s = %g (mean %g, std %g); the best, trial-%d (%s = %g), is in %s.",
                 options.num_trials, task.name, task.best_metric, summary["median"][task.best_metric],
                 summary["mean"][task.best_metric], summary["std"][task.best_metric], best, task.best_metric,
                 records[best]["metrics"][task.best_metric], os.path.dirname(checkpoint))
    results = dict(summary, best=dict(records[best]["metrics"], checkpoint=checkpoint))
    if options.do_predict or options.export_dir:
        final = finetuning.run_finetuning(task, dataclasses.replace(
            options, num_trials=1, seed=records[best]["seed"], do_train=False, do_eval=False), source)
        results["prediction_checkpoint"] = final["prediction_checkpoint"]
    return results


def _finished_trial(task, options, trial):
    """The record of a trial that finished in an earlier run of this task and seed, or None."""
    path = os.path.join(trial_dir(options.output_dir, trial), TRIAL_RESULTS_NAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "r") as handle:
        try:
            record = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error}); delete it to run trial-{trial} again.") from None
    if record.get("task") != task.name:
        raise ValueError(f"{path} holds a trial of task {record.get('task')!r}, not of {task.name!r}: use another "
                         "--output_dir.")
    if task.best_metric not in record.get("metrics", {}):
        raise ValueError(f"{path} has no {task.best_metric!r} among its metrics; delete it to run trial-{trial} "
                         "again.")
    seed = trial_seed(options.seed, trial)
    if record.get("seed") != seed:
        raise ValueError(f"{path} records seed {record.get('seed')}, but --seed={options.seed} gives trial-{trial} "
                         f"seed {seed}: resume with the --seed of the earlier run, or use another --output_dir.")
    logging.info("trial-%d (%d of %d, seed %d) finished earlier: keeping it (%s).", trial, trial + 1,
                 options.num_trials, seed, path)
    return record


def _run_trial(task, options, source, trial, durations):
    directory, seed = trial_dir(options.output_dir, trial), trial_seed(options.seed, trial)
    logging.info("trial-%d (%d of %d, seed %d) in %s; %s.", trial, trial + 1, options.num_trials, seed, directory,
                 _eta(durations, options.num_trials - trial))
    started = time.monotonic()
    results = finetuning.run_finetuning(task, dataclasses.replace(
        options, output_dir=directory, seed=seed, num_trials=1, do_predict=False, export_dir=None), source)
    # The next trial builds its model afresh: drop this one's Keras state, so N trials take the memory of one.
    keras.backend.clear_session()
    durations.append(time.monotonic() - started)
    metrics = {name: value for name, value in results["best"].items() if name != "checkpoint"}
    record = {"trial": trial, "seed": seed, "task": task.name, "metrics": metrics}
    _write_json(os.path.join(directory, TRIAL_RESULTS_NAME), record)
    logging.info("trial-%d (%d of %d) finished in %s: %s = %g.", trial, trial + 1, options.num_trials,
                 _duration(durations[-1]), task.best_metric, metrics[task.best_metric])
    return record


def _eta(durations, remaining):
    if not durations:
        return "the time left is estimated once a trial of this run has finished"
    mean = sum(durations) / len(durations)
    return f"about {_duration(mean * remaining)} left for {remaining} trial(s) at {_duration(mean)} each"


def _duration(seconds):
    """Seconds as 1h02m, 4m05s or 12s.

    Example:
    >>> _duration(3725), _duration(245), _duration(12.4)
    ('1h02m', '4m05s', '12s')
    """
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _copy_best_trial(output_dir, best_trial_dir):
    """Copies the best trial's best/ to output_dir/best/ (atomically) and its albert_config.json to output_dir;
    returns the copied checkpoint's path."""
    source = os.path.join(best_trial_dir, BEST_DIR_NAME)
    if not tf.io.gfile.exists(os.path.join(source, BEST_CHECKPOINT_NAME + ".index")):
        raise ValueError(f"{source} holds no {BEST_CHECKPOINT_NAME}: the trial finished without a checkpoint to "
                         "keep; delete its trial_results.json to run it again.")
    best_dir = os.path.join(output_dir, BEST_DIR_NAME)
    staging = os.path.join(output_dir, f".{BEST_DIR_NAME}.tmp-{uuid.uuid4().hex}")
    _copy_tree(source, staging)
    if tf.io.gfile.exists(best_dir):
        tf.io.gfile.rmtree(best_dir)
    tf.io.gfile.rename(staging, best_dir)
    config_file = os.path.join(best_trial_dir, formats.ALBERT_CONFIG_NAME)
    if tf.io.gfile.exists(config_file):
        tf.io.gfile.copy(config_file, os.path.join(output_dir, formats.ALBERT_CONFIG_NAME), overwrite=True)
    return os.path.join(best_dir, BEST_CHECKPOINT_NAME)


def _copy_tree(source, destination):
    for directory, _, files in tf.io.gfile.walk(source):
        target = os.path.join(destination, os.path.relpath(directory, source))
        tf.io.gfile.makedirs(target)
        for name in files:
            tf.io.gfile.copy(os.path.join(directory, name), os.path.join(target, name), overwrite=True)


def _write_summary(output_dir, summary):
    _write_json(os.path.join(output_dir, EVAL_RESULTS_NAME + ".json"), summary)
    with tf.io.gfile.GFile(os.path.join(output_dir, EVAL_RESULTS_NAME + ".txt"), "w") as handle:
        handle.write(summary_text(summary))


def _write_json(path, values):
    """Writes `values` as JSON through a temporary file, so a reader never sees half of it."""
    staging = f"{path}.tmp-{uuid.uuid4().hex}"
    with tf.io.gfile.GFile(staging, "w") as handle:
        handle.write(json.dumps(values, indent=2, sort_keys=True) + "\n")
    tf.io.gfile.rename(staging, path, overwrite=True)

