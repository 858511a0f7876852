"""What a reproduction run records, beside its arms' and speed records, so that its report can be written from the
kept files alone (albert_tf.experiments.write_report): OUTPUT_DIR/report_inputs.json, kept with them (committed
under paper_runs/).

It holds the experiments of the run in order; per arm key the training it reads (`trained_as`: an arm that
reuses another's training has no directory of its own), its model config and the paths of its arm_result.json and
downstream_result.json files relative to the output directory; the majority baselines and the size of each
downstream dev set, which only the data can give; the budget's claim rules (the downstream task the claims use,
the non-inferiority margins); the report's scale and limits texts; the learning-rate section; and where the speed
records are, with the shapes and repeats they were measured at.

Example (it needs a finished run, so it is not run here):
>>> record_report_inputs("paper_runs/small", budget, ["sharing"], results, baselines, scale, limits)  # doctest: +SKIP
'paper_runs/small/report_inputs.json'
"""

import dataclasses
import os
from typing import Mapping, Optional, Sequence

from albert_tf.experiments.budgets import Budget
from albert_tf.experiments.downstream import DOWNSTREAM_DIR_NAME, RESULT_NAME
from albert_tf.experiments.atomic_json import write_json
from albert_tf.experiments.runner import ARM_RESULT_NAME
from albert_tf.experiments.speed_report import NAME as SPEED
from albert_tf.experiments.write_report import REPORT_INPUTS_NAME


def record_report_inputs(output_dir: str, budget: Budget, experiments: Sequence[str],
                         results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float], scale: str,
                         limits: str, learning_rate_section: Optional[Mapping[str, object]] = None,
                         downstream_dev_sizes: Optional[Mapping[str, int]] = None) -> str:
    """Writes OUTPUT_DIR/report_inputs.json for the run's `experiments` (in report order) from run_arms' `results`
    (each with its `directory`, `trained_as` and `config`, and with `downstream` scores where it was fine-tuned),
    the majority `baselines`, the report's `scale` and `limits` texts, the learning-rate section (None without
    candidates), the examples of each downstream dev set ({"downstream/<task>": count}) and the budget's
    non-inferiority margins with its sentence on when they were named; returns its path."""
    arms = {}
    for key, result in sorted(results.items()):
        directory = os.path.relpath(result["directory"], output_dir)
        arms[key] = {"trained_as": result["trained_as"], "config": result["config"],
                     "result": os.path.join(directory, ARM_RESULT_NAME),
                     "downstream": {task: os.path.join(directory, DOWNSTREAM_DIR_NAME, task, RESULT_NAME)
                                    for task in result.get("downstream", {})}}
    inputs = {"experiments": list(experiments), "arms": arms, "baselines": dict(baselines),
              "downstream_dev_sizes": dict(downstream_dev_sizes or {}),
              "downstream_score": budget.downstream_task,
              "non_inferiority_margins": dict(budget.non_inferiority_margins), "non_inferiority_margins_note":
                  budget.non_inferiority_margins_note, "scale": scale, "limits": limits,
              "learning_rate_section": learning_rate_section,
              "speed_dir": SPEED if SPEED in experiments else None,
              "speed_budget": dataclasses.asdict(budget.speed) if SPEED in experiments else None}
    path = os.path.join(output_dir, REPORT_INPUTS_NAME)
    write_json(path, inputs)
    return path
