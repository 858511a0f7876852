"""The sentence-objective experiment (paper Table 5): no sentence loss, NSP and SOP, on one model.

Each arm is evaluated on the pure, balanced held-out sets (datasets.sentence_pair_eval): masked-LM accuracy on the
SOP set's masked positions, NSP accuracy on the NSP set, SOP accuracy on the SOP set; the paper's intrinsic 3x3
table beside ours. Each is also fine-tuned for the downstream score (albert_tf.experiments.downstream), beside the
paper's downstream average. The claims: a model trained on NSP is at chance on SOP, one trained on SOP does well on
NSP, and SOP beats NSP and no sentence loss downstream (the paper: 80.1 against 79.2 and 79.0).

Example:
>>> model = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
>>> [(arm.name, arm.train_data, arm.sentence_loss_weight) for arm in sop_vs_nsp_arms(model, 100, seeds=[0])]
[('none', 'sop', 0.0), ('nsp', 'nsp', 1.0), ('sop', 'sop', 1.0)]
"""

from typing import Dict, List, Mapping, Sequence

from albert_tf.config import AlbertConfig
from albert_tf.experiments.arms import Arm, seed_results, seed_values
from albert_tf.experiments.verdicts import (ClaimRules, difference_series, downstream_accuracies,
                                            downstream_baselines_text, downstream_columns, downstream_summary,
                                            judge_unless_failed, mean_and_spread, mean_text, run_status_text,
                                            scored_downstream_tasks, summary_text)

NAME = "sop_vs_nsp"
# arm -> (training records, sentence loss weight); "none" trains the masked LM alone.
OBJECTIVES = {"none": ("sop", 0.0), "nsp": ("nsp", 1.0), "sop": ("sop", 1.0)}
# Table 5, ALBERT-base: intrinsic MLM, NSP and SOP accuracy (%), and the downstream average.
PAPER = {"none": (54.9, 52.4, 53.3, 79.0), "nsp": (54.5, 90.5, 52.0, 79.2), "sop": (54.0, 78.9, 86.5, 80.1)}
# (column, pure set, metric of that set, baseline key, the arms trained on that task).
COLUMNS = (("masked_lm_accuracy", "sop", "masked_lm_accuracy", "masked_lm_pure", ("none", "nsp", "sop")),
           ("nsp_accuracy", "nsp", "sentence_order_accuracy", "nsp_pure", ("nsp",)),
           ("sop_accuracy", "sop", "sentence_order_accuracy", "sop_pure", ("sop",)))
COLUMN_TITLES = {"masked_lm_accuracy": "MLM accuracy", "nsp_accuracy": "NSP accuracy", "sop_accuracy": "SOP accuracy"}


def sop_vs_nsp_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int]) -> List[Arm]:
    """One arm per objective and seed, all from the same model (share_type as the model says), all fine-tuned for
    the downstream score."""
    config = AlbertConfig(vocab_size=vocab_size, **model)
    return [Arm(NAME, name, seed, config, train_data=train_data, sentence_loss_weight=weight, evaluate_pure_sets=True,
                downstream=True)
            for name, (train_data, weight) in OBJECTIVES.items() for seed in seeds]


def _pure_metric(pure_set: str, metric: str):
    return lambda result: float(result["pure_eval"][pure_set][metric])


def _per_seed(results: Mapping[str, Mapping[str, object]], arm: str, pure_set: str, metric: str) -> List[float]:
    return [_pure_metric(pure_set, metric)(result) for result in seed_results(results, NAME, arm)]


def _difference_figure(results: Mapping[str, Mapping[str, object]], downstream_score: str,
                       with_downstream: bool) -> Dict[str, object]:
    """The NSP- and SOP-trained arms minus the one without a sentence loss, seed by seed (mean and paired 95%
    confidence interval, in accuracy points), on each pure set beside the paper's intrinsic figures (the same
    measure), and on the downstream score beside the paper's downstream average (another measure: its own panel)."""
    arms, reference = ("nsp", "sop"), "none"
    panels = []
    for index, (column, pure_set, metric, _, _) in enumerate(COLUMNS):
        values = {arm: seed_values(results, NAME, arm, _pure_metric(pure_set, metric)) for arm in arms}
        paper = [round(PAPER[arm][index] - PAPER[reference][index], 1) for arm in arms]
        panels.append({"kind": "bars", "title": f"{COLUMN_TITLES[column]} (pure {pure_set.upper()} set)",
                       "xlabel": "trained on", "categories": list(arms), "reference_line": 0.0,
                       "ylabel": "minus no sentence loss (points)", "series": [
                           difference_series("ours (mean, paired 95% CI)", values,
                                             seed_values(results, NAME, reference, _pure_metric(pure_set, metric))),
                           {"label": "paper (ALBERT-base, Table 5)", "values": paper, "errors": None,
                            "source": "paper"}]})
    if with_downstream:
        def score(result):
            return downstream_accuracies([result], downstream_score)[0]

        panels.append({"kind": "bars", "title": f"ours: {downstream_score} dev accuracy", "xlabel": "trained on",
                       "categories": list(arms), "ylabel": "minus no sentence loss (accuracy points)",
                       "reference_line": 0.0, "series": [difference_series(
                           "ours (mean, paired 95% CI)", {arm: seed_values(results, NAME, arm, score) for arm in arms},
                           seed_values(results, NAME, reference, score))]})
    panels.append({"kind": "bars", "title": "paper: downstream average (Table 5)", "xlabel": "trained on",
                   "categories": list(arms), "ylabel": "minus no sentence loss (points)", "reference_line": 0.0,
                   "series": [{"label": "paper (ALBERT-base, Table 5)", "errors": None, "source": "paper",
                               "values": [round(PAPER[arm][3] - PAPER[reference][3], 1) for arm in arms]}]})
    return {"file": f"{NAME}_accuracy.png", "columns": 3, "panels": panels,
            "title": "Sentence objectives (paper Table 5): NSP- and SOP-trained minus no sentence loss"}


def sop_vs_nsp_section(results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float],
                       rules: ClaimRules = ClaimRules()) -> Dict[str, object]:
    """The 3x3 table with the downstream score, the claims' verdicts and their numbers. An arm fails when, on some
    seed, its MLM accuracy or the accuracy on the task it trained on is not above that set's majority baseline; its
    downstream run fails when a seed's score is not above the task's majority baseline. The claims on the
    downstream score use rules.downstream_score."""
    downstream_score = rules.downstream_score
    downstream_tasks = scored_downstream_tasks(results, downstream_score)
    rows, numbers, failed, downstream_failed = [], {}, [], []
    for arm in OBJECTIVES:
        values = {column: _per_seed(results, arm, pure_set, metric) for column, pure_set, metric, _, _ in COLUMNS}
        failures = [column for column, _, _, baseline, trained in COLUMNS
                    if arm in trained and any(value <= baselines[baseline] for value in values[column])]
        status = f"failed: {', '.join(failures)} not above the majority baseline" if failures else "ok"
        if failures:
            failed.append(arm)
        downstream = downstream_summary(seed_results(results, NAME, arm), downstream_tasks, baselines)
        if downstream["downstream_status"] != "ok":
            downstream_failed.append(arm)
        numbers[arm] = {**{column: mean_and_spread(value) for column, value in values.items()}, "status": status,
                        **downstream}
        paper = PAPER[arm]
        ours = " | ".join([mean_text(values[column]) for column, *_ in COLUMNS] +
                          [summary_text(downstream[f"downstream/{task}"]) for task in downstream_tasks])
        rows.append(f"| {arm} | {paper[0]} | {paper[1]} | {paper[2]} | {paper[3]} | {ours} | "
                    f"{run_status_text(numbers[arm], downstream_tasks)} |")
    claims = {}
    for claim, arm, other, pure_set, text in (
            ("nsp_does_not_solve_sop", "sop", "nsp", "sop",
             "NSP does not solve SOP (SOP accuracy: SOP-trained > NSP-trained)"),
            ("sop_solves_nsp", "sop", "none", "nsp",
             "SOP solves NSP well (NSP accuracy: SOP-trained > no sentence loss)")):
        metric = _pure_metric(pure_set, "sentence_order_accuracy")
        claims[claim] = {"claim": text, "compared": [arm, other], **judge_unless_failed(
            seed_values(results, NAME, arm, metric), seed_values(results, NAME, other, metric), (arm, other),
            failed)}
    with_downstream = downstream_score in downstream_tasks
    if with_downstream:
        def score(result):
            return downstream_accuracies([result], downstream_score)[0]

        for other, paper_text in (("nsp", "80.1 against 79.2"), ("none", "80.1 against 79.0")):
            claims[f"sop_beats_{other}_downstream"] = {
                "claim": f"SOP beats {'NSP' if other == 'nsp' else 'no sentence loss'} downstream ({downstream_score} "
                         f"dev accuracy: SOP-trained > {other}-trained; the paper's average {paper_text})",
                "compared": ["sop", other], **judge_unless_failed(
                    seed_values(results, NAME, "sop", score), seed_values(results, NAME, other, score),
                    ("sop", other), failed + downstream_failed)}
    columns = downstream_columns(downstream_tasks)
    table = "\n".join([
        "| trained on | paper MLM | paper NSP | paper SOP | paper downstream avg | our MLM acc | our NSP acc "
        f"(pure set) | our SOP acc (pure set) |{columns} run |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(downstream_tasks) + "---|", *rows,
        f"| majority baseline | | | | | {baselines['masked_lm_pure']:.3f} | {baselines['nsp_pure']:.3f} | "
        f"{baselines['sop_pure']:.3f} |" + "".join(f" {baselines[f'downstream/{task}']:.3f} |"
                                                   for task in downstream_tasks) + " |"])
    if downstream_tasks:
        table += "\n\n" + downstream_baselines_text(downstream_tasks, baselines, downstream_score)
    return {"name": NAME, "title": "Sentence objectives: none, NSP, SOP (paper Table 5)", "table": table,
            "arms": numbers, "claims": claims,
            "figures": [_difference_figure(results, downstream_score, with_downstream)]}
