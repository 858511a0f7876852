"""Arms and the resumable run over them: every arm is an ordinary pretraining output directory.

An arm is finished when its directory holds `arm_result.json`, written after its evaluation: a rerun keeps it
untouched. An arm without it is trained by run_pretraining, which resumes from the directory's last checkpoint,
then evaluated. Progress logs the arms done and remaining, with an ETA from the arms trained in this run.

Example (it trains, so it is not run here):
>>> arm = Arm(experiment="sharing", name="share_all", seed=0, config=AlbertConfig(vocab_size=1000))  # doctest: +SKIP
>>> results = run_arms([arm], "out/arms", budget_for("smoke"), data)  # doctest: +SKIP
>>> results[arm.key]["eval"]["masked_lm_accuracy"]  # doctest: +SKIP
0.08
"""

import dataclasses
import json
import os
import time
from typing import Dict, List, Mapping, Sequence

from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.experiments.budgets import Budget
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.transitions import block_transitions, deeper_shared_encoder
from albert_tf.models.param_count import encoder_parameters
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions, run_pretraining
from albert_tf.training.summaries import read_scalars
from data_gen.pretraining_input import pretraining_dataset_fn

ARM_RESULT_NAME = "arm_result.json"
# Held-out batches the block transitions are measured on.
TRANSITION_BATCHES = 8
# The held-out metrics of an arm's held-out curve (`Arm.curve_points`).
CURVE_METRICS = ("masked_lm_accuracy", "masked_lm_loss")
# Points of each arm's learning curve: the training loss and metrics are logged (to train/'s TensorBoard events)
# this many times over the run.
CURVE_POINTS = 20


@dataclasses.dataclass(frozen=True)
class Arm:
    """One model of one experiment, trained with one seed: on the `train_data` records ("sop" or "nsp") with the
    sentence loss weighted by `sentence_loss_weight` (0: the masked LM alone), evaluated on the original
    generator's held-out records and, with `evaluate_pure_sets`, on the pure SOP and NSP sets; with
    `measure_transitions`, its block transitions are measured on the held-out records (and, for one shared block,
    at twice the trained depth); with `curve_points`, it keeps that many evenly spaced checkpoints and its result
    holds the held-out metrics of each (a held-out learning curve); with `downstream`, it is fine-tuned for the
    downstream score (albert_tf.experiments.downstream)."""

    experiment: str
    name: str
    seed: int
    config: AlbertConfig
    train_data: str = "sop"
    sentence_loss_weight: float = 1.0
    evaluate_pure_sets: bool = False
    measure_transitions: bool = False
    curve_points: int = 0
    downstream: bool = False

    @property
    def key(self) -> str:
        return f"{self.experiment}/{self.name}/seed{self.seed}"


def arm_directory(arms_dir: str, arm: Arm) -> str:
    return os.path.join(arms_dir, arm.experiment, arm.name, f"seed{arm.seed}")


def seed_results(results: Mapping[str, Mapping[str, object]], experiment: str,
                arm: str) -> List[Mapping[str, object]]:
    """The results of one arm of `experiment`, one per seed, in key order."""
    return [result for key, result in sorted(results.items()) if key.startswith(f"{experiment}/{arm}/")]


def _pretraining_options(output_dir: str, arm: Arm, budget: Budget, data: PretrainingData,
                         jit_compile) -> PretrainingOptions:
    save_every = budget.num_train_steps // arm.curve_points if arm.curve_points else budget.num_train_steps
    # A loop as long as the log interval: each logged point is the mean over the steps since the previous one.
    curve_interval = max(1, budget.num_train_steps // CURVE_POINTS)
    return PretrainingOptions(
        output_dir=output_dir, input_file=data.train_patterns[arm.train_data], eval_input_file=data.eval_pattern,
        do_train=True, do_eval=True, max_seq_length=budget.max_seq_length,
        max_predictions_per_seq=budget.max_predictions_per_seq,
        train_batch_size=budget.train_batch_size, eval_batch_size=budget.eval_batch_size, optimizer="lamb",
        learning_rate=budget.learning_rate, num_train_steps=budget.num_train_steps,
        num_warmup_steps=budget.num_warmup_steps, save_checkpoints_steps=max(1, save_every),
        keep_checkpoint_max=max(1, arm.curve_points), max_eval_steps=budget.max_eval_steps,
        log_every_steps=curve_interval, steps_per_loop=curve_interval,
        jit_compile=jit_compile, seed=arm.seed, sentence_loss_weight=arm.sentence_loss_weight)


def _read_result(path: str) -> Dict[str, object]:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def run_arm(arm: Arm, output_dir: str, budget: Budget, data: PretrainingData, jit_compile="auto") -> Dict[str, object]:
    """Trains (or resumes) and evaluates one arm, writes its arm_result.json and returns it."""
    options = _pretraining_options(output_dir, arm, budget, data, jit_compile)
    results = run_pretraining(arm.config, options)
    result = {"arm": arm.name, "seed": arm.seed, "parameters": encoder_parameters(arm.config),
              "eval": results["eval"], "train": results["train"]}
    if arm.curve_points:
        # What run_pretraining's evaluation of every kept checkpoint wrote for TensorBoard (a rerun's last value).
        eval_dir = os.path.join(output_dir, "eval")
        curves = {key: read_scalars(eval_dir, key) for key in CURVE_METRICS}
        result["curve"] = {"step": list(curves[CURVE_METRICS[0]]),
                           **{key: list(values.values()) for key, values in curves.items()}}
    lengths = dict(max_seq_length=budget.max_seq_length, max_predictions_per_seq=budget.max_predictions_per_seq)
    if arm.evaluate_pure_sets or arm.measure_transitions:
        run = Pretraining(arm.config, options)
    if arm.evaluate_pure_sets:
        result["pure_eval"] = {task: run.evaluate_latest(pretraining_dataset_fn(pattern, is_training=False, **lengths))
                               for task, pattern in sorted(data.pure_eval_patterns.items())}
    if arm.measure_transitions:
        run.trainer.restore()
        dataset_fn = pretraining_dataset_fn(data.eval_pattern, is_training=False, **lengths)
        batches = list(dataset_fn(None, budget.eval_batch_size, 0).take(TRANSITION_BATCHES))
        result["transitions"] = block_transitions(run.model.encoder, batches)
        if arm.config.share_type == "all":
            deeper = deeper_shared_encoder(run.model.encoder, 2 * arm.config.num_hidden_layers, batches[0])
            result["transitions_twice_as_deep"] = block_transitions(deeper, batches)
    temporary = os.path.join(output_dir, ARM_RESULT_NAME + ".incomplete")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2, sort_keys=True, default=float)
    os.replace(temporary, os.path.join(output_dir, ARM_RESULT_NAME))
    return result


def _eta_text(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def run_arms(arms: Sequence[Arm], arms_dir: str, budget: Budget, data: PretrainingData,
             jit_compile="auto") -> Dict[str, Dict[str, object]]:
    """Runs every arm that is not finished, in order, and returns {arm.key: its result} for all of them, each with
    its `directory` (where its training curves are) and its model `config` added."""
    keys = [arm.key for arm in arms]
    if len(set(keys)) != len(keys):
        raise ValueError(f"Two arms share a key: {sorted(key for key in keys if keys.count(key) > 1)}.")
    results: Dict[str, Dict[str, object]] = {}
    pending: List[Arm] = []
    for arm in arms:
        path = os.path.join(arm_directory(arms_dir, arm), ARM_RESULT_NAME)
        if os.path.exists(path):
            results[arm.key] = _read_result(path)
        else:
            pending.append(arm)
    logging.info("Arms: %d finished and kept, %d to run", len(results), len(pending))
    started = time.time()
    for index, arm in enumerate(pending):
        logging.info("Arm %s: training (%d of %d to run)", arm.key, index + 1, len(pending))
        results[arm.key] = run_arm(arm, arm_directory(arms_dir, arm), budget, data, jit_compile)
        done = index + 1
        eta = (time.time() - started) / done * (len(pending) - done)
        logging.info("Arms done: %d of %d; remaining %d, ETA %s", len(results), len(arms), len(pending) - done,
                     _eta_text(eta))
    return {arm.key: {**results[arm.key], "directory": arm_directory(arms_dir, arm), "config": arm.config.to_dict()}
            for arm in arms}
