"""Learning curves of an experiment's arms: the training masked-LM accuracy and loss against step.

The Trainer logs each training loop's mean metrics to the TensorBoard event files under an arm's train/ directory,
and an arm's loop is a twentieth of its run (runner.CURVE_POINTS), so each point is the masked-LM accuracy and loss
over the training batches since the previous point, not a held-out figure. The runner copies an arm's curve into
its arm_result.json (`training_curve`) once it has trained, so the report needs nothing else from the arm's
directory; the curve per arm is the mean over its seeds at each step.

Example (it needs trained arms, so it is not run here):
>>> curves = experiment_curves(results, "sharing")  # doctest: +SKIP
>>> sorted(curves["all"])  # doctest: +SKIP
['masked_lm_accuracy', 'masked_lm_loss', 'steps']
"""

import os
from typing import Dict, List, Mapping

import numpy as np

from albert_tf.experiments.plotting import PANEL_TITLE_FONT_SIZE, panels

# (metric, panel title, unit).
CURVE_METRICS = (("masked_lm_accuracy", "training masked-LM accuracy", "fraction of masked tokens"),
                 ("masked_lm_loss", "training masked-LM loss", "nats per masked token"))
TRAIN_SUMMARY_DIR = "train"


def training_curve(arm_dir: str) -> Dict[str, List]:
    """{"step": [...], metric: [...] for each of CURVE_METRICS} from the arm's train/ event files (the steps every
    metric was logged at; a step logged twice, by a resumed run, keeps its last value)."""
    # Reading event files needs TensorFlow, which the report's process, plotting these curves from the kept
    # records, must not import.
    from albert_tf.training.summaries import read_scalars
    summary_dir = os.path.join(arm_dir, TRAIN_SUMMARY_DIR)
    values = {metric: read_scalars(summary_dir, metric) for metric, *_ in CURVE_METRICS}
    steps = sorted(set.intersection(*(set(by_step) for by_step in values.values())))
    return {"step": steps, **{metric: [by_step[step] for step in steps] for metric, by_step in values.items()}}


def experiment_curves(results: Mapping[str, Mapping[str, object]], experiment: str) -> Dict[str, Dict[str, List]]:
    """Per arm of `experiment` ({key: result} with each result's `training_curve`), the steps every seed logged
    and, per metric, the mean over seeds at those steps."""
    per_arm: Dict[str, List[Dict[str, Dict[int, float]]]] = {}
    for key, result in sorted(results.items()):
        found_experiment, arm, _ = key.split("/")
        if found_experiment == experiment and result.get("training_curve"):
            curve = result["training_curve"]
            per_arm.setdefault(arm, []).append({metric: dict(zip(curve["step"], curve[metric]))
                                                for metric, *_ in CURVE_METRICS})
    curves = {}
    for arm, seeds in per_arm.items():
        steps = sorted(set.intersection(*(set(seed[CURVE_METRICS[0][0]]) for seed in seeds)))
        curves[arm] = {"steps": steps, **{metric: [float(np.mean([seed[metric][step] for seed in seeds]))
                                                   for step in steps] for metric, *_ in CURVE_METRICS}}
    return curves


def plot_learning_curves(curves: Mapping[str, Mapping[str, List]], title: str, path: str, caption: str = "") -> str:
    """One panel per metric of CURVE_METRICS against the training step, a line per arm; `caption` (where the arms
    trained) under the title."""
    with panels(path, f"{title}: learning curves", [("training step (optimizer updates)", unit)
                                                     for *_, unit in CURVE_METRICS],
                panel_size=(4.2, 3.4), legend_title="arm (mean over seeds)", note=caption) as axes:
        for axis, (metric, panel_title, _) in zip(axes, CURVE_METRICS):
            axis.set_title(panel_title, fontsize=PANEL_TITLE_FONT_SIZE)
            for arm, curve in curves.items():
                axis.plot(curve["steps"], curve[metric], marker=".", label=arm)
    return path
