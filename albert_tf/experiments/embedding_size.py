"""The embedding-size experiment (paper Table 3): the vocabulary embedding E swept under all-shared and not-shared.

E takes the budget's own embedding size and its halvings, at most four values and none below MIN_EMBEDDING_SIZE:
{16, 32, 64, 128} for a budget at E=128, {8, 16} at the smoke budget's E=16. The paper swept {64, 128, 256, 768} on
ALBERT-base (H=768). Its claims: under all-shared, E=128 is best; not shared, a larger E is better, but not by much
(+1.0 points from 64 to 768). Here the held-out MLM accuracy and the downstream score (albert_tf.experiments.
downstream: every arm is fine-tuned) stand in for the downstream average, each judged, and the budget's E stands
for the paper's 128, so "best at 128" is judged as "the budget's E beats the best smaller E".

Example:
>>> model = dict(embedding_size=128, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
...              intermediate_size=1024)
>>> embedding_sizes(model)
[16, 32, 64, 128]
>>> [arm.name for arm in embedding_size_arms(model, vocab_size=100, seeds=[0])][:2]
['all_E16', 'all_E32']
"""

import statistics
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

from albert_tf.config import AlbertConfig
from albert_tf.experiments.arms import Arm, seed_results, seed_values
from albert_tf.experiments.verdicts import (ClaimRules, difference_series, downstream_accuracies,
                                            downstream_baselines_text, downstream_columns, downstream_summary,
                                            judge_unless_failed, pretraining_summary, run_status_text,
                                            scored_downstream_tasks, summary_text)

NAME = "embedding_size"
SHARE_TYPES = ("all", "none")
SHARE_LABELS = {"all": "all-shared", "none": "not shared"}
# Narrower embeddings than this carry too few dimensions per piece to say anything about E.
MIN_EMBEDDING_SIZE = 8
HALVINGS = 3
# Table 3, ALBERT-base: share type -> E -> (parameters, downstream average).
PAPER = {"none": {64: ("87M", 81.3), 128: ("89M", 81.7), 256: ("93M", 81.8), 768: ("108M", 82.3)},
         "all": {64: ("10M", 79.8), 128: ("12M", 80.1), 256: ("16M", 79.6), 768: ("31M", 79.8)}}


def embedding_sizes(model: Mapping[str, object]) -> List[int]:
    """The budget's embedding size and its halvings (smallest first), none below MIN_EMBEDDING_SIZE."""
    largest = int(model["embedding_size"])
    sizes = [largest >> halving for halving in range(HALVINGS, -1, -1)]
    return [size for size in sizes if size >= MIN_EMBEDDING_SIZE] or [largest]


def _arm_name(share_type: str, size: int) -> str:
    return f"{share_type}_E{size}"


def embedding_size_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int]) -> List[Arm]:
    """One arm per share type, embedding size and seed, all else from the same model, all fine-tuned for the
    downstream score."""
    return [Arm(NAME, _arm_name(share_type, size), seed,
                AlbertConfig(vocab_size=vocab_size, **{**model, "share_type": share_type, "embedding_size": size}),
                downstream=True)
            for share_type in SHARE_TYPES for size in embedding_sizes(model) for seed in seeds]


def _sizes_in(results: Mapping[str, Mapping[str, object]]) -> List[int]:
    return sorted({int(key.split("/")[1].split("_E")[1]) for key in results if key.startswith(f"{NAME}/")})


Metric = Callable[[Mapping[str, object]], float]


def _masked_lm(result: Mapping[str, object]) -> float:
    return float(result["eval"]["masked_lm_accuracy"])


def _downstream_metric(task: str) -> Metric:
    return lambda result: downstream_accuracies([result], task)[0]


def _judge(results, first: str, second: str, failed: Sequence[str], metric: Metric) -> Dict[str, object]:
    return judge_unless_failed(seed_values(results, NAME, first, metric), seed_values(results, NAME, second, metric),
                               (first, second), failed)


def _difference_figure(results, sizes: Sequence[int], metrics: Sequence[Tuple[str, Metric]]) -> Dict[str, object]:
    """Each smaller E minus the budget's E, seed by seed, under each share type (mean and paired 95% confidence
    interval, in accuracy points), one panel per (label, metric) of `metrics`, beside the paper's downstream
    average at its E minus at its 128."""
    largest, smaller = sizes[-1], sizes[:-1]
    panels = [{"kind": "bars", "title": f"ours: {label}", "xlabel": "embedding size E",
               "categories": [f"E={size}" for size in smaller], "ylabel": f"minus E={largest} (accuracy points)",
               "reference_line": 0.0, "series": [difference_series(
                   f"ours, {SHARE_LABELS[share_type]} (paired 95% CI)",
                   {size: seed_values(results, NAME, _arm_name(share_type, size), metric) for size in smaller},
                   seed_values(results, NAME, _arm_name(share_type, largest), metric)) for share_type in SHARE_TYPES]}
              for label, metric in metrics]
    paper_sizes = [size for size in PAPER["all"] if size != 128]
    panels.append({"kind": "bars", "title": "paper: downstream average (Table 3)", "xlabel": "embedding size E",
                   "categories": [f"E={size}" for size in paper_sizes], "ylabel": "minus E=128 (points)",
                   "reference_line": 0.0, "series": [
                       {"label": f"paper, {SHARE_LABELS[share_type]} (ALBERT-base)", "errors": None, "source": "paper",
                        "values": [round(PAPER[share_type][size][1] - PAPER[share_type][128][1], 1)
                                   for size in paper_sizes]} for share_type in SHARE_TYPES]})
    return {"file": f"{NAME}_differences.png", "panels": panels,
            "title": f"Embedding size (paper Table 3): each E minus the budget's E={largest} (the paper: minus 128)"}


def embedding_size_section(results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float],
                           rules: ClaimRules = ClaimRules()) -> Dict[str, object]:
    """The table (the paper's figure beside ours where the paper swept the same E), each E's difference from the
    budget's, and the two claims' verdicts, on the MLM accuracy and on the downstream score (rules.downstream_score).
    An arm whose MLM accuracy is not above the majority baseline on every seed fails; its downstream run fails when
    a seed's score is not above the task's majority baseline."""
    sizes = _sizes_in(results)
    downstream_score = rules.downstream_score
    downstream_tasks = scored_downstream_tasks(results, downstream_score)
    rows, arms, failed, downstream_failed, lines = [], {}, [], [], {}
    for share_type in SHARE_TYPES:
        means, spreads = [], []
        for size in sizes:
            arm = _arm_name(share_type, size)
            arm_results = seed_results(results, NAME, arm)
            summary = pretraining_summary(arm_results, baselines["masked_lm"])
            if summary["status"] != "ok":
                failed.append(arm)
            means.append(summary["masked_lm_accuracy"]["mean"])
            spreads.append(summary["masked_lm_accuracy"]["sd"])
            downstream = downstream_summary(arm_results, downstream_tasks, baselines)
            if downstream["downstream_status"] != "ok":
                downstream_failed.append(arm)
            arms[arm] = {"share_type": share_type, "embedding_size": size, "parameters": arm_results[0]["parameters"],
                         **summary, **downstream}
            paper_parameters, paper_average = PAPER[share_type].get(size, ("-", "-"))
            cells = "".join(f" {summary_text(downstream[f'downstream/{task}'])} |" for task in downstream_tasks)
            rows.append(f"| {SHARE_LABELS[share_type]} | {size} | {paper_parameters} | {paper_average} | "
                        f"{arms[arm]['parameters']:,} | {summary_text(summary['masked_lm_accuracy'])} | "
                        f"{summary_text(summary['sentence_order_accuracy'])} |{cells} "
                        f"{run_status_text(arms[arm], downstream_tasks)} |")
        lines[SHARE_LABELS[share_type]] = (sizes, means, spreads)
    largest, smallest = sizes[-1], sizes[0]
    claims = {}
    metrics = [("", "MLM", _masked_lm, failed)]
    if downstream_score in downstream_tasks:
        metrics.append(("_downstream", f"downstream {downstream_score} accuracy", _downstream_metric(downstream_score),
                        failed + downstream_failed))
    for suffix, label, metric, metric_failed in metrics if len(sizes) > 1 else []:
        means = {size: statistics.fmean(seed_values(results, NAME, _arm_name("all", size), metric).values())
                 for size in sizes[:-1]}
        best_smaller = max(sizes[:-1], key=lambda size: means[size])
        claims["all_shared_best_at_budget_embedding_size" + suffix] = {
            "claim": f"under all-shared, the budget's E={largest} (the paper's 128) is best ({label}: E={largest} - "
                     f"the best smaller, E={best_smaller})",
            "compared": [_arm_name("all", largest), _arm_name("all", best_smaller)],
            **_judge(results, _arm_name("all", largest), _arm_name("all", best_smaller), metric_failed, metric)}
        claims["not_shared_larger_is_better" + suffix] = {
            "claim": f"not shared, a larger E is better ({label}: E={largest} - E={smallest}); the paper's gain is "
                     "small, +1.0 points of downstream average from 64 to 768",
            "compared": [_arm_name("none", largest), _arm_name("none", smallest)],
            **_judge(results, _arm_name("none", largest), _arm_name("none", smallest), metric_failed, metric)}
    paper_text = "; ".join(f"{SHARE_LABELS[share_type]}: " + ", ".join(
        f"E={size} {parameters} {average}" for size, (parameters, average) in PAPER[share_type].items())
        for share_type in ("none", "all"))
    columns = downstream_columns(downstream_tasks)
    table = "\n".join([
        "| share | E | paper params | paper downstream avg | our params | our held-out MLM acc | "
        f"our held-out SOP acc |{columns} run |", "|---|---|---|---|---|---|---|" + "---|" * len(downstream_tasks)
        + "---|", *rows, "",
        f"Paper (Table 3, ALBERT-base, H=768): {paper_text}. Our E values are the budget's E and its halvings; "
        "the paper's figure is shown where it swept the same E. Held-out MLM accuracy and the downstream score "
        "stand in for the downstream average."])
    if downstream_tasks:
        table += "\n\n" + downstream_baselines_text(downstream_tasks, baselines, downstream_score)
    paper_lines = {SHARE_LABELS[share_type]: (list(PAPER[share_type]), [average for _, average in
                                                                        PAPER[share_type].values()])
                   for share_type in SHARE_TYPES}
    return {"name": NAME, "title": "Embedding size (paper Table 3)", "table": table, "arms": arms,
            "claims": claims, "line_plots": [{
                "file": f"{NAME}_mlm.png", "title": "Embedding size (paper Table 3): accuracy against E",
                "xlabel": "embedding size E (dimensions, log scale)", "ylabel": "held-out MLM accuracy (fraction)",
                "xscale": "log", "lines": lines, "baseline": baselines["masked_lm"],
                "paper": {"title": "paper: ALBERT-base (Table 3)", "lines": paper_lines,
                          "ylabel": "downstream average (points)"}}],
            "figures": [_difference_figure(results, sizes, [
                ("held-out MLM accuracy" if not suffix else f"{downstream_score} dev accuracy", metric)
                for suffix, _, metric, _ in metrics])] if len(sizes) > 1 else []}
