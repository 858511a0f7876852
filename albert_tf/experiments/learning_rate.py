"""The learning rate every arm trains at, chosen by one rule on one seed before any arm trains.

Issue 21's pilot: 8-layer models trained at the 4-layer learning rate stalled, so the rate is chosen per depth,
with the same rule for every arm, before comparing. At a budget with `learning_rate_candidates`, the budget's
model (its share_type and depth: every arm of every experiment has the budget's depth, so one depth, one choice)
is trained at each candidate for `learning_rate_steps` steps (warm-up a tenth of them, decay to their end) with
the run's first seed, on the SOP records; the candidate with the highest held-out MLM accuracy (a tie: the smaller
rate) is the learning rate of every arm. Each candidate run is an ordinary arm directory under
OUTPUT_DIR/learning_rate/lr<rate>/seed<seed>, kept on a rerun. A budget without candidates keeps its own rate.

Example (it trains, so it is not run here):
>>> budget, choice = choose_learning_rate(budget_for("small"), "out", data, seed=0)  # doctest: +SKIP
>>> choice["chosen"] == budget.learning_rate  # doctest: +SKIP
True
"""

import dataclasses
import os
from typing import Dict, Tuple

from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.experiments.budgets import Budget
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.atomic_json import read_json
from albert_tf.experiments.arms import Arm
from albert_tf.experiments.runner import ARM_RESULT_NAME, arm_directory, run_arm

NAME = "learning_rate"


def _arm_name(rate: float) -> str:
    return f"lr{rate:g}"


def choose_learning_rate(budget: Budget, output_dir: str, data: PretrainingData, seed: int,
                         jit_compile="auto") -> Tuple[Budget, Dict[str, object]]:
    """The budget at the chosen learning rate and the choice ({} without candidates): the candidates' held-out MLM
    accuracies, the chosen rate, the steps, the seed and the model's share_type and depth."""
    candidates = sorted(budget.learning_rate_candidates)
    if not candidates:
        return budget, {}
    trial = dataclasses.replace(budget, num_train_steps=budget.learning_rate_steps, warmup_steps=None)
    config = AlbertConfig(vocab_size=budget.vocab_size, **budget.model)
    scores = {}
    for index, rate in enumerate(candidates):
        arm = Arm(NAME, _arm_name(rate), seed, config)
        directory = arm_directory(output_dir, arm)
        path = os.path.join(directory, ARM_RESULT_NAME)
        if os.path.exists(path):
            result = read_json(path)
        else:
            logging.info("Learning rate %g: training %d of %d candidates for %d steps", rate, index + 1,
                         len(candidates), trial.num_train_steps)
            result = run_arm(arm, directory, dataclasses.replace(trial, learning_rate=rate), data, jit_compile)
        scores[rate] = float(result["eval"]["masked_lm_accuracy"])
    chosen = max(candidates, key=lambda rate: (scores[rate], -rate))
    logging.info("Learning rate %g chosen (held-out MLM accuracy after %d steps: %s)", chosen, trial.num_train_steps,
                 ", ".join(f"{rate:g} {score:.4f}" for rate, score in scores.items()))
    choice = {"candidates": {_arm_name(rate): score for rate, score in scores.items()}, "chosen": chosen,
              "steps": trial.num_train_steps, "seed": seed, "share_type": config.share_type,
              "num_hidden_layers": config.num_hidden_layers}
    return dataclasses.replace(budget, learning_rate=chosen), choice


def learning_rate_section(choice: Dict[str, object]) -> Dict[str, object]:
    """The report's section on the choice: each candidate's held-out MLM accuracy, the chosen one marked."""
    chosen = _arm_name(choice["chosen"])
    rows = [f"| {name[2:]} | {score:.4f} | {'chosen' if name == chosen else ''} |"
            for name, score in choice["candidates"].items()]
    table = "\n".join([
        "| learning rate (LAMB peak) | held-out MLM acc | |", "|---|---|---|", *rows, "",
        f"Every arm trains at {choice['chosen']:g}: the candidate with the highest held-out MLM accuracy after "
        f"{choice['steps']} steps (warm-up a tenth, decay to the end) of the budget's model (share_type "
        f"{choice['share_type']}, {choice['num_hidden_layers']} layers, the depth of every arm) with seed "
        f"{choice['seed']}; a tie goes to the smaller rate. No arm is tuned on its own."])
    return {"name": NAME, "title": "Learning rate (chosen before the arms)", "table": table, "claims": {},
            "arms": {}, "measurements": {f"{NAME}/{name}": {"masked_lm_accuracy": score}
                                         for name, score in choice["candidates"].items()}}
