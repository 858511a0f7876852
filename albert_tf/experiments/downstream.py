"""The downstream score of an arm: its final pretraining checkpoint fine-tuned and evaluated on held-out tasks.

Always: the held-out document classification (data_gen.document_classification: which of K held-out documents
a sentence comes from, documents no arm pretrained on) through albert_tf.tasks.text_classification. With a
local GLUE copy (`glue_data_dir`), also SST-2 and MNLI (matched and mismatched dev) through albert_tf.tasks.glue.
Every fine-tuning run is an ordinary fine-tuning output directory under the arm's training directory (another
arm's, when it reuses that training), `downstream/<task>`: it is finished when it holds downstream_result.json, and
anything less resumes from its last checkpoint; arms that share a training share its fine-tuning runs. All runs share
the budget's steps, batch and learning rate, and each arm's fine-tuning is seeded with the arm's seed.

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
from albert_tf.experiments.json_files import read_json, write_json
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.runner import Arm
from albert_tf.experiments.stopping import stopped_during
from albert_tf.tasks.finetuning import FinetuningOptions
from albert_tf.tasks.glue import GlueOptions, run_glue
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from data_gen import document_classification, labeled_text
from data_gen import glue as glue_data

DOCUMENTS = "documents"
GLUE_TASKS = ("sst-2", "mnli")
# The dev split each task's score and majority baseline are read on (MNLI's mismatched accuracy is kept too).
SCORE_SPLITS = {"sst-2": "dev", "mnli": "dev_matched"}
DOWNSTREAM_DIR_NAME = "downstream"
RESULT_NAME = "downstream_result.json"
_DOCUMENT_SCHEMA = labeled_text.LabeledTextSchema(text_field=document_classification.TEXT_FIELD,
                                                  label_field=document_classification.LABEL_FIELD)


def downstream_tasks(glue_data_dir: Optional[str]) -> List[str]:
    """The tasks every downstream arm is fine-tuned on: the document classification, and GLUE's when given.

    Example:
    >>> downstream_tasks(None), downstream_tasks("glue_data")
    (['documents'], ['documents', 'sst-2', 'mnli'])
    """
    return [DOCUMENTS] + (list(GLUE_TASKS) if glue_data_dir else [])


def check_glue_data_dir(glue_data_dir: Optional[str]) -> None:
    """Fails before any training when `glue_data_dir` lacks a file the GLUE tasks read."""
    for name in downstream_tasks(glue_data_dir)[1:]:
        task = glue_data.get_task(name)
        for split in ("train", SCORE_SPLITS[name]) + (("dev_mismatched",) if name == "mnli" else ()):
            path = glue_data.split_file(glue_data_dir, task, split)
            if not os.path.exists(path):
                raise ValueError(f"--glue_data_dir={glue_data_dir} has no {path}; the downstream score reads SST-2 "
                                 "and MNLI in the GLUE download's layout.")


def prepare_document_classification(data: PretrainingData, budget: Budget) -> str:
    """Writes the held-out document classification set (kept on a rerun); returns its directory."""
    directory = data.document_classification_dir
    if not os.path.exists(_document_file(data, "dev")):
        counts = document_classification.write_document_classification_set(data.holdout_text, directory,
                                                                            budget.downstream_documents)
        logging.info("Held-out document classification set: %s", counts)
    return directory


def _document_file(data: PretrainingData, split: str) -> str:
    return os.path.join(data.document_classification_dir, document_classification.SPLIT_FILES[split])


def majority_baseline(labels: Sequence[object]) -> float:
    """The accuracy of always predicting the most frequent of `labels`.

    Example:
    >>> majority_baseline(["a", "b", "a", "c"])
    0.5
    """
    labels = list(labels)
    return max(labels.count(label) for label in set(labels)) / len(labels) if labels else 0.0


def downstream_baselines(data: PretrainingData, glue_data_dir: Optional[str]) -> Dict[str, float]:
    """Per task, the dev accuracy of always predicting its most frequent label ({"downstream/<task>": value}), once
    `run_downstream` has written the document classification set."""
    dev = labeled_text.read_examples(_document_file(data, "dev"), _DOCUMENT_SCHEMA)
    baselines = {f"{DOWNSTREAM_DIR_NAME}/{DOCUMENTS}": majority_baseline(example.label for example in dev)}
    for name in downstream_tasks(glue_data_dir)[1:]:
        examples = glue_data.read_examples(glue_data_dir, glue_data.get_task(name), SCORE_SPLITS[name])
        baselines[f"{DOWNSTREAM_DIR_NAME}/{name}"] = majority_baseline(example.label for example in examples)
    return baselines


def _finetuning_options(output_dir: str, arm: Arm, arm_dir: str, budget: Budget, data: PretrainingData,
                        cached_dir: str, jit_compile) -> FinetuningOptions:
    checkpoint = tf.train.latest_checkpoint(arm_dir)
    if checkpoint is None:
        raise ValueError(f"Arm {arm.key} has no checkpoint in {arm_dir} to fine-tune; rerun to train it.")
    return FinetuningOptions(
        output_dir=output_dir, albert_config_file=os.path.join(arm_dir, "albert_config.json"),
        init_checkpoint=checkpoint, spm_model_file=data.spm_model_file, cached_dir=cached_dir,
        max_seq_length=budget.max_seq_length, do_train=True, do_eval=True,
        train_batch_size=budget.finetune_batch_size, eval_batch_size=budget.eval_batch_size,
        learning_rate=budget.finetune_learning_rate, train_step=budget.finetune_steps,
        warmup_step=max(1, budget.finetune_steps // 10), save_checkpoints_steps=budget.finetune_steps,
        steps_per_loop=min(budget.finetune_steps, 100), keep_checkpoint_max=1, jit_compile=jit_compile,
        mixed_precision=budget.mixed_precision, seed=arm.seed)


def _finetune(task: str, options: FinetuningOptions, data: PretrainingData,
              glue_data_dir: Optional[str]) -> Dict[str, float]:
    if task == DOCUMENTS:
        results = run_text_classification(TextClassificationOptions(
            options, text_field=document_classification.TEXT_FIELD, label_field=document_classification.LABEL_FIELD,
            train_file=_document_file(data, "train"), eval_file=_document_file(data, "dev")))
    else:
        results = run_glue(GlueOptions(options, task_name=task, data_dir=glue_data_dir))
    return results["eval"]


def run_downstream(arms: Sequence[Arm], directories: Mapping[str, str], budget: Budget, data: PretrainingData,
                   glue_data_dir: Optional[str] = None, jit_compile="auto") -> Dict[str, Dict[str, Mapping]]:
    """Fine-tunes every arm's training (in `directories[arm.key]`) on every downstream task not yet finished, once
    per training directory; returns {arm.key: {task: dev metrics}}."""
    tasks = downstream_tasks(glue_data_dir)
    if arms:
        prepare_document_classification(data, budget)
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
        logging.info("Downstream %s on %s: fine-tuning (%d of %d to run)", arm.key, task, index + 1, len(pending))
        options = _finetuning_options(output_dir, arm, arm_dir, budget, data, cached_dir, jit_compile)
        with stopped_during(f"fine-tuning {arm.key} on {task}"):
            metrics = _finetune(task, options, data, glue_data_dir)
        write_json(os.path.join(output_dir, RESULT_NAME), metrics)
        runs[arm_dir][task] = metrics
        done = index + 1
        eta = (time.time() - started) / done * (len(pending) - done)
        logging.info("Downstream runs done: %d of %d to run, ETA %.0f s", done, len(pending), eta)
    return {arm.key: runs[directories[arm.key]] for arm in arms}
