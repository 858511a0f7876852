"""The dropout experiment (paper section 4.8, Table 8): one model trained with dropout 0 and 0.1 (hidden and
attention probabilities both) for the same steps, with held-out MLM accuracy curves over evenly spaced checkpoints,
the final figures and the downstream score (albert_tf.experiments.downstream: every arm is fine-tuned).

The paper's claim is about its largest model: ALBERT-xxlarge, after 1M steps, still did not overfit its data, and
removing dropout raised both its MLM accuracy and its downstream average (90.4 -> 90.7); the paper adds that
further experimentation is needed. A small model on a small corpus is another regime: it can overfit, where dropout
may help, and at equal steps dropout slows learning, where it hurts. So the verdict here says which way dropout
went at this scale, and the report says it cannot speak for the largest models.

Example:
>>> model = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
>>> [(arm.name, arm.config.hidden_dropout_prob) for arm in dropout_arms(model, 100, seeds=[0])]
[('dropout0', 0.0), ('dropout0.1', 0.1)]
"""

from typing import Dict, List, Mapping, Sequence

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.experiments.arms import Arm, seed_results, seed_values
from albert_tf.experiments.verdicts import (ClaimRules, difference_series, downstream_accuracies,
                                            downstream_baselines_text, downstream_columns, downstream_summary,
                                            judge_unless_failed, paired_interval, pretraining_summary,
                                            run_status_text, scored_downstream_tasks, summary_text)

NAME = "dropout"
RATES = (0.0, 0.1)
# Table 8, ALBERT-xxlarge at 1M steps: the downstream average with and without dropout.
PAPER = {0.0: 90.7, 0.1: 90.4}


def _arm_name(rate: float) -> str:
    return f"dropout{rate:g}"


def dropout_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int]) -> List[Arm]:
    """One arm per dropout rate and seed, all else from the same model, all fine-tuned for the downstream score."""
    return [Arm(NAME, _arm_name(rate), seed,
                AlbertConfig(vocab_size=vocab_size, **{**model, "hidden_dropout_prob": rate,
                                                       "attention_probs_dropout_prob": rate}), downstream=True)
            for rate in RATES for seed in seeds]


def _masked_lm(result: Mapping[str, object]) -> float:
    return float(result["eval"]["masked_lm_accuracy"])


def _held_out_at(index: int):
    return lambda result: float(result["curve"]["masked_lm_accuracy"][index])


def _figure(results: Mapping[str, Mapping[str, object]], lines, downstream_metric, baseline: float,
            downstream_score: str) -> Dict[str, object]:
    """The held-out MLM accuracy of both arms along the run (mean ± seed spread); dropout 0 minus dropout 0.1,
    seed by seed, along the run and on the downstream score (mean and paired 95% confidence interval, in accuracy
    points); and the paper's downstream average without dropout minus with it."""
    first, second = _arm_name(0.0), _arm_name(0.1)
    steps = lines["dropout 0"][0]
    along = [paired_interval(seed_values(results, NAME, first, _held_out_at(index)),
                             seed_values(results, NAME, second, _held_out_at(index))) for index in range(len(steps))]
    panels = [
        {"kind": "lines", "title": "ours: held-out MLM accuracy", "xlabel": "training step",
         "ylabel": "accuracy (fraction)", "baseline": baseline, "series": [
             {"label": f"ours, {label} (mean ± sd over seeds)", "x": xs, "values": means,
              "band": [[mean - sd for mean, sd in zip(means, sds)], [mean + sd for mean, sd in zip(means, sds)]]}
             for label, (xs, means, sds) in lines.items()]},
        {"kind": "lines", "title": "ours: held-out MLM, dropout 0 minus 0.1", "xlabel": "training step",
         "ylabel": "difference (accuracy points)", "reference_line": 0.0, "series": [
             {"label": "ours, dropout 0 minus 0.1 (mean, paired 95% CI)", "x": steps,
              "values": [interval[0] for interval in along],
              "band": [[interval[1] for interval in along], [interval[2] for interval in along]]}]}]
    if downstream_metric is not None:
        panels.append({"kind": "bars", "title": f"ours: {downstream_score} dev accuracy", "xlabel": "",
                       "categories": ["dropout 0 minus 0.1"], "ylabel": "difference (accuracy points)",
                       "reference_line": 0.0, "series": [difference_series(
                           "ours (mean, paired 95% CI)", {first: seed_values(results, NAME, first, downstream_metric)},
                           seed_values(results, NAME, second, downstream_metric))]})
    panels.append({"kind": "bars", "title": "paper: downstream average (Table 8)", "xlabel": "",
                   "categories": ["dropout 0 minus 0.1"], "ylabel": "difference (points)", "reference_line": 0.0,
                   "series": [{"label": "paper (ALBERT-xxlarge, 1M steps)", "errors": None, "source": "paper",
                               "values": [round(PAPER[0.0] - PAPER[0.1], 1)]}]})
    return {"file": f"{NAME}_curves.png", "columns": 2, "panels": panels,
            "title": "Dropout (paper section 4.8): dropout 0 against dropout 0.1"}


def dropout_section(results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float],
                    rules: ClaimRules = ClaimRules()) -> Dict[str, object]:
    """The final figures beside the paper's, the curves (mean and seed spread per step), the downstream score
    (rules.downstream_score) and the verdicts, on the final MLM accuracy and on the downstream score."""
    downstream_score = rules.downstream_score
    downstream_tasks = scored_downstream_tasks(results, downstream_score)
    rows, arms, failed, downstream_failed, lines = [], {}, [], [], {}
    for rate in RATES:
        arm = _arm_name(rate)
        arm_results = seed_results(results, NAME, arm)
        summary = pretraining_summary(arm_results, baselines["masked_lm"])
        if summary["status"] != "ok":
            failed.append(arm)
        steps = arm_results[0]["curve"]["step"]
        curves = np.asarray([result["curve"]["masked_lm_accuracy"] for result in arm_results])
        curve = {"step": steps, "mean": curves.mean(axis=0).tolist(),
                 "sd": (curves.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(len(steps))).tolist()}
        lines[f"dropout {rate:g}"] = (steps, curve["mean"], curve["sd"])
        downstream = downstream_summary(arm_results, downstream_tasks, baselines)
        if downstream["downstream_status"] != "ok":
            downstream_failed.append(arm)
        arms[arm] = {"dropout": rate, **summary, "curve": curve, **downstream}
        along = ", ".join(f"{value:.3f}" for value in curve["mean"])
        cells = "".join(f" {summary_text(downstream[f'downstream/{task}'])} |" for task in downstream_tasks)
        rows.append(f"| {rate:g} | {PAPER[rate]} | {summary_text(summary['masked_lm_accuracy'])} | "
                    f"{summary_text(summary['sentence_order_accuracy'])} | {along} |{cells} "
                    f"{run_status_text(arms[arm], downstream_tasks)} |")
    first, second = _arm_name(0.0), _arm_name(0.1)
    metrics = [("", "final MLM", _masked_lm, failed)]
    downstream_metric = None
    if downstream_score in downstream_tasks:
        def downstream_metric(result):
            return downstream_accuracies([result], downstream_score)[0]

        metrics.append(("_downstream", f"downstream {downstream_score} accuracy", downstream_metric,
                        failed + downstream_failed))
    claims = {}
    for suffix, label, metric, metric_failed in metrics:
        judged = judge_unless_failed(seed_values(results, NAME, first, metric),
                                     seed_values(results, NAME, second, metric), (first, second), metric_failed)
        claims["removing_dropout_helps" + suffix] = {
            "claim": f"removing dropout helps at equal steps ({label}: dropout 0 - dropout 0.1); the paper's claim "
                     "is for ALBERT-xxlarge after 1M steps, which this scale cannot test",
            "compared": [first, second], **judged}
    steps_text = ", ".join(str(step) for step in lines["dropout 0"][0])
    columns = downstream_columns(downstream_tasks)
    table = "\n".join([
        "| dropout | paper downstream avg | our held-out MLM acc | our held-out SOP acc | our MLM acc along the "
        f"run (steps {steps_text}) |{columns} run |", "|---|---|---|---|---|" + "---|" * len(downstream_tasks) + "---|",
        *rows, "",
        "Paper (section 4.8, Table 8: ALBERT-xxlarge at 1M steps, which had not overfit its data): removing dropout "
        "raised the MLM accuracy and the downstream average (90.4 -> 90.7), and the paper calls for further "
        "experiments. What this shows: the effect of dropout on held-out MLM accuracy and on a small downstream "
        "task for this model at equal steps. What it cannot show: anything about the largest models."])
    if downstream_tasks:
        table += "\n\n" + downstream_baselines_text(downstream_tasks, baselines, downstream_score)
    return {"name": NAME, "title": "Dropout (paper section 4.8)", "table": table, "arms": arms, "claims": claims,
            "figures": [_figure(results, lines, downstream_metric, baselines["masked_lm"], downstream_score)]}
