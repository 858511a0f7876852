"""The downstream score of an arm: its final pretraining checkpoint fine-tuned and evaluated on held-out tasks.

Always, the budget's held-out classification (`Budget.downstream_task`), through
albert_tf.tasks.text_classification: "documents" (datasets.document_classification: which of K held-out
documents a sentence comes from) or "packages" (datasets.package_classification: which of K Python packages a
sentence of an unseen docstring comes from, a dev set of thousands); no arm pretrained on either. With
`Budget.linear_probe`, also a linear probe on the frozen encoder's features for that task ("<task>_probe",
albert_tf.experiments.linear_probe). With a local GLUE copy (`glue_data_dir`), also SST-2 and MNLI (matched and
mismatched dev) through albert_tf.tasks.glue.
Every run is an ordinary output directory under the arm's training directory (another arm's, when it reuses that
training), `downstream/<task>`: it is finished when it holds downstream_result.json, and a fine-tuning run with
less resumes from its last checkpoint; arms that share a training share these runs. All fine-tuning runs share
the budget's steps (or epochs), batch and learning rate, and each arm's fine-tuning is seeded with the arm's seed.

Example (it fine-tunes, so it is not run here):
>>> scores = run_downstream(arms, {arm.key: arm_directory("out/arms", arm) for arm in arms}, budget_for("smoke"),
...                         data)  # doctest: +SKIP
>>> scores["sharing/all/seed0"]["documents"]["accuracy"]  # doctest: +SKIP
0.125
"""

import os
import time
from typing import Dict, List, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from albert_tf.experiments.budgets import Budget
from albert_tf.experiments.datasets import document_classification, package_classification
from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.arms import Arm
from albert_tf.experiments.stopping import stopped_during
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.glue import GlueOptions, run_glue
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from albert_tf.experiments.linear_probe import run_linear_probe
from data_gen.readers import glue as glue_data
from data_gen.readers import labeled_text

DOCUMENTS = "documents"
PACKAGES = "packages"
CLASSIFICATION_TASKS = (DOCUMENTS, PACKAGES)
PROBE_SUFFIX = "_probe"
GLUE_TASKS = ("sst-2", "mnli")
# The dev split each task's score and majority baseline are read on (MNLI's mismatched accuracy is kept too).
SCORE_SPLITS = {"sst-2": "dev", "mnli": "dev_matched"}
DOWNSTREAM_DIR_NAME = "downstream"
# Fine-tuning by epochs saves a checkpoint this often, and at its end.
FINETUNE_CHECKPOINT_STEPS = 1000
RESULT_NAME = "downstream_result.json"
_DOCUMENT_SCHEMA = labeled_text.LabeledTextSchema(text_field=document_classification.TEXT_FIELD,
                                                  label_field=document_classification.LABEL_FIELD)


def downstream_tasks(budget: Budget, glue_data_dir: Optional[str]) -> List[str]:
    """The tasks every downstream arm is scored on: the budget's classification, its linear probe when the
    budget asks for one, and GLUE's when given.

    Example:
    >>> from albert_tf.experiments.budgets import budget_for
    >>> downstream_tasks(budget_for("small"), None), downstream_tasks(budget_for("small"), "glue_data")
    (['documents'], ['documents', 'sst-2', 'mnli'])
    """
    task = budget.downstream_task
    if task not in CLASSIFICATION_TASKS:
        raise ValueError(f"Budget {budget.name!r} has downstream_task={task!r}; available: "
                         f"{', '.join(CLASSIFICATION_TASKS)}.")
    return [task] + ([task + PROBE_SUFFIX] if budget.linear_probe else []) + (list(GLUE_TASKS) if glue_data_dir
                                                                               else [])


def check_glue_data_dir(glue_data_dir: Optional[str]) -> None:
    """Fails before any training when `glue_data_dir` lacks a file the GLUE tasks read."""
    for name in (GLUE_TASKS if glue_data_dir else ()):
        task = glue_data.get_task(name)
        for split in ("train", SCORE_SPLITS[name]) + (("dev_mismatched",) if name == "mnli" else ()):
            path = glue_data.split_file(glue_data_dir, task, split)
            if not os.path.exists(path):
                raise ValueError(f"--glue_data_dir={glue_data_dir} has no {path}; the downstream score reads SST-2 "
                                 "and MNLI in the GLUE download's layout.")


def _classification_dir(data: PretrainingData, task: str) -> str:
    return os.path.join(os.path.dirname(data.document_classification_dir), task)


def prepare_classification(data: PretrainingData, budget: Budget) -> str:
    """Writes the budget's held-out classification set (kept on a rerun); returns its directory."""
    task = budget.downstream_task
    directory = _classification_dir(data, task)
    if not os.path.exists(_classification_file(data, task, "dev")):
        if task == PACKAGES:
            if not data.holdout_packages:
                raise ValueError(f"Budget {budget.name!r} scores arms on the package classification, which needs the "
                                 "built-in corpus (it knows each docstring's package); --corpus has no packages.")
            counts = package_classification.write_package_classification_set(
                data.holdout_text, data.holdout_packages, directory, budget.downstream_packages,
                budget.downstream_sentences_per_package)
        else:
            counts = document_classification.write_document_classification_set(data.holdout_text, directory,
                                                                                budget.downstream_documents)
        logging.info("Held-out %s classification set: %s", task, counts)
    return directory


def _classification_file(data: PretrainingData, task: str, split: str) -> str:
    return os.path.join(_classification_dir(data, task), document_classification.SPLIT_FILES[split])


def majority_baseline(labels: Sequence[object]) -> float:
    """The accuracy of always predicting the most frequent of `labels`.

    Example:
    >>> majority_baseline(["a", "b", "a", "c"])
    0.5
    """
    labels = list(labels)
    return max(labels.count(label) for label in set(labels)) / len(labels) if labels else 0.0


def _dev_labels(data: PretrainingData, budget: Budget, glue_data_dir: Optional[str]) -> Dict[str, List[object]]:
    """Per task ("downstream/<task>"), the labels of its dev set (the probe's are its task's)."""
    dev = [example.label for example in labeled_text.read_examples(
        _classification_file(data, budget.downstream_task, "dev"), _DOCUMENT_SCHEMA)]
    labels = {f"{DOWNSTREAM_DIR_NAME}/{name}": dev for name in downstream_tasks(budget, None)}
    for name in (GLUE_TASKS if glue_data_dir else ()):
        labels[f"{DOWNSTREAM_DIR_NAME}/{name}"] = [
            example.label for example in glue_data.read_examples(glue_data_dir, glue_data.get_task(name),
                                                                 SCORE_SPLITS[name])]
    return labels


def downstream_baselines(data: PretrainingData, budget: Budget, glue_data_dir: Optional[str]) -> Dict[str, float]:
    """Per task, the dev accuracy of always predicting its most frequent label ({"downstream/<task>": value}; the
    probe's is its task's), once `run_downstream` has written the classification set."""
    return {task: majority_baseline(labels) for task, labels in _dev_labels(data, budget, glue_data_dir).items()}


def downstream_dev_sizes(data: PretrainingData, budget: Budget, glue_data_dir: Optional[str]) -> Dict[str, int]:
    """Per task ("downstream/<task>"), how many examples its dev set holds: what bounds the precision of its
    accuracy, once `run_downstream` has written the classification set."""
    return {task: len(labels) for task, labels in _dev_labels(data, budget, glue_data_dir).items()}


def _finetuning_options(output_dir: str, arm: Arm, arm_dir: str, budget: Budget, data: PretrainingData,
                        cached_dir: str, jit_compile) -> FinetuningOptions:
    checkpoint = tf.train.latest_checkpoint(arm_dir)
    if checkpoint is None:
        raise ValueError(f"Arm {arm.key} has no checkpoint in {arm_dir} to fine-tune; rerun to train it.")
    if budget.finetune_epochs:
        length = dict(train_step=None, num_train_epochs=budget.finetune_epochs, warmup_proportion=0.1,
                      save_checkpoints_steps=FINETUNE_CHECKPOINT_STEPS, steps_per_loop=100)
    else:
        length = dict(train_step=budget.finetune_steps, warmup_step=max(1, budget.finetune_steps // 10),
                      save_checkpoints_steps=budget.finetune_steps, steps_per_loop=min(budget.finetune_steps, 100))
    return FinetuningOptions(
        output_dir=output_dir, albert_config_file=os.path.join(arm_dir, "albert_config.json"),
        init_checkpoint=checkpoint, spm_model_file=data.spm_model_file, cached_dir=cached_dir,
        max_seq_length=budget.max_seq_length, do_train=True, do_eval=True,
        train_batch_size=budget.finetune_batch_size, eval_batch_size=budget.eval_batch_size,
        learning_rate=budget.finetune_learning_rate, keep_checkpoint_max=1, jit_compile=jit_compile,
        mixed_precision=budget.mixed_precision, seed=arm.seed, **length)


def _finetune(task: str, options: FinetuningOptions, data: PretrainingData,
              glue_data_dir: Optional[str]) -> Dict[str, float]:
    if task in CLASSIFICATION_TASKS:
        results = run_text_classification(TextClassificationOptions(
            options, text_field=document_classification.TEXT_FIELD, label_field=document_classification.LABEL_FIELD,
            train_file=_classification_file(data, task, "train"), eval_file=_classification_file(data, task, "dev")))
    else:
        results = run_glue(GlueOptions(options, task_name=task, data_dir=glue_data_dir))
    return results["eval"]


def _probe(task: str, arm: Arm, arm_dir: str, budget: Budget, data: PretrainingData) -> Dict[str, float]:
    checkpoint = tf.train.latest_checkpoint(arm_dir)
    if checkpoint is None:
        raise ValueError(f"Arm {arm.key} has no checkpoint in {arm_dir} to probe; rerun to train it.")
    classification = task[:-len(PROBE_SUFFIX)]
    return run_linear_probe(arm.config, checkpoint, data.spm_model_file,
                            _classification_file(data, classification, "train"),
                            _classification_file(data, classification, "dev"), budget.max_seq_length,
                            _DOCUMENT_SCHEMA)


def run_downstream(arms: Sequence[Arm], directories: Mapping[str, str], budget: Budget, data: PretrainingData,
                   glue_data_dir: Optional[str] = None, jit_compile="auto") -> Dict[str, Dict[str, Mapping]]:
    """Fine-tunes every arm's training (in `directories[arm.key]`) on every downstream task not yet finished, once
    per training directory; returns {arm.key: {task: dev metrics}}."""
    tasks = downstream_tasks(budget, glue_data_dir)
    if arms:
        prepare_classification(data, budget)
    # One run per training directory and task: the first arm of a directory stands for the others.
    owners: Dict[str, Arm] = {}
    for arm in arms:
        owners.setdefault(directories[arm.key], arm)
    runs: Dict[str, Dict[str, Mapping]] = {directory: {} for directory in owners}
    pending = []
    for directory, arm in owners.items():
        for task in tasks:
            path = os.path.join(directory, DOWNSTREAM_DIR_NAME, task, RESULT_NAME)
            if os.path.exists(path):
                runs[directory][task] = read_json(path)
            else:
                pending.append((directory, arm, task))
    logging.info("Downstream runs: %d finished and kept, %d to run", len(owners) * len(tasks) - len(pending),
                 len(pending))
    started = time.time()
    cached_dir = os.path.join(os.path.dirname(data.document_classification_dir), "features")
    for index, (arm_dir, arm, task) in enumerate(pending):
        output_dir = os.path.join(arm_dir, DOWNSTREAM_DIR_NAME, task)
        logging.info("Downstream %s on %s (%d of %d to run)", arm.key, task, index + 1, len(pending))
        started_at = time.time()
        if task.endswith(PROBE_SUFFIX):
            with stopped_during(f"probing {arm.key} on {task}"):
                metrics = _probe(task, arm, arm_dir, budget, data)
            os.makedirs(output_dir, exist_ok=True)
        else:
            options = _finetuning_options(output_dir, arm, arm_dir, budget, data, cached_dir, jit_compile)
            with stopped_during(f"fine-tuning {arm.key} on {task}"):
                metrics = _finetune(task, options, data, glue_data_dir)
        metrics["seconds"] = round(time.time() - started_at, 1)
        write_json(os.path.join(output_dir, RESULT_NAME), metrics)
        runs[arm_dir][task] = metrics
        done = index + 1
        eta = (time.time() - started) / done * (len(pending) - done)
        logging.info("Downstream runs done: %d of %d to run, ETA %.0f s", done, len(pending), eta)
    return {arm.key: runs[directories[arm.key]] for arm in arms}
