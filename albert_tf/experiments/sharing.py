"""The sharing experiment (paper Table 4, and the grouped sharing its text describes): identical models with
share_type none, attention, ffn and all, and with M layers per group for M in {1, 2, L/2, L}.

"M layers per group" is the original's grouping: share_type="all", inner_group_num=1 and num_hidden_groups
G = L / M. Layer l runs the block of group int(l * G / L) = l // M, so each run of M consecutive layers shares one
block's attention and feed-forward weights. M=1 (G=L, a block per layer) is the not-shared model and M=L (G=1)
the all-shared one: those rows reuse the share_type none and all arms instead of training the same model twice,
and so does a size that occurs twice (L/2 = 2 at L=4). L must be even.

Per arm: encoder parameters, held-out MLM and SOP accuracy, and the downstream score (albert_tf.experiments.
downstream: held-out document classification, and SST-2 / MNLI dev with a GLUE copy), beside the paper's
parameters and downstream average at ALBERT-base, E=128. The claims: sharing the attention costs (almost) nothing,
most of the drop comes from sharing the feed-forward half, and the smaller the group, the better; each judged on
the held-out MLM accuracy and on the downstream score.

Example:
>>> model = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64)
>>> [(arm.name, arm.config.num_hidden_groups) for arm in sharing_arms(model, vocab_size=100, seeds=[0])]
[('none', 1), ('attention', 1), ('ffn', 1), ('all', 1), ('group2', 2)]
>>> [grouped_arm_name(size, 4) for size in group_sizes(4)]
['none', 'group2', 'all']
"""

from typing import Callable, Dict, List, Mapping, Sequence, Tuple

from albert_tf.config import AlbertConfig
from albert_tf.experiments.arms import Arm, seed_results, seed_values
from albert_tf.experiments.verdicts import (ClaimRules, difference_series, downstream_accuracies,
                                            downstream_baselines_text, downstream_columns, downstream_summary,
                                            judge_non_inferiority_unless_failed, judge_ordering, judge_unless_failed,
                                            mean_and_spread, mean_text, paired_comparisons_text, run_status_text,
                                            scored_downstream_tasks, summary_text)

NAME = "sharing"
SHARE_TYPES = ("none", "attention", "ffn", "all")
# Table 4, ALBERT-base, E=128: parameters and the downstream average.
PAPER = {"none": ("89M", 81.6), "attention": ("64M", 81.7), "ffn": ("38M", 80.2), "all": ("12M", 80.1)}
# The paper gives no table for grouped sharing, only this sentence.
PAPER_GROUPS = "the smaller the group size M, the better (no figures given)"
Metric = Callable[[Mapping[str, object]], float]


def group_sizes(num_hidden_layers: int) -> List[int]:
    """The group sizes M in {1, 2, L/2, L}, each once, ascending."""
    if num_hidden_layers % 2 and num_hidden_layers != 1:
        raise ValueError(f"The sharing experiment's grouped arms (M in 1, 2, L/2, L layers per group) need an even "
                         f"num_hidden_layers; the budget's model has {num_hidden_layers}.")
    return sorted({size for size in (1, 2, num_hidden_layers // 2, num_hidden_layers)
                   if 1 <= size <= num_hidden_layers})


def grouped_arm_name(group_size: int, num_hidden_layers: int) -> str:
    """The arm with `group_size` layers per group: the not-shared arm for 1, the all-shared one for L, else its own."""
    if group_size == 1:
        return "none"
    if group_size == num_hidden_layers:
        return "all"
    return f"group{group_size}"


def sharing_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int],
                 grouped: bool = True) -> List[Arm]:
    """One arm per share type and seed, then (with `grouped`) one per group size that no share type already is;
    all from the same model, all fine-tuned for the downstream score."""
    layers = int(model["num_hidden_layers"])
    configs = {share_type: {**model, "share_type": share_type} for share_type in SHARE_TYPES}
    for size in group_sizes(layers) if grouped else ():
        configs.setdefault(grouped_arm_name(size, layers),
                           {**model, "share_type": "all", "num_hidden_groups": layers // size, "inner_group_num": 1})
    return [Arm(NAME, name, seed, AlbertConfig(vocab_size=vocab_size, **config), downstream=True)
            for name, config in configs.items() for seed in seeds]


def _eval_metric(name: str) -> Metric:
    return lambda result: float(result["eval"][name])


def _downstream_metric(task: str) -> Metric:
    return lambda result: downstream_accuracies([result], task)[0]


def _judge(results, first: str, second: str, metric: Metric, failed: Sequence[str], text: str) -> Dict[str, object]:
    """The claim "first beats second on metric", seed by seed; not judged when either run failed."""
    return {"claim": text, "compared": [first, second], **judge_unless_failed(
        seed_values(results, NAME, first, metric), seed_values(results, NAME, second, metric), (first, second),
        failed)}


def _judge_ordering(results, arms: Sequence[str], labels: Sequence[str], metric: Metric, failed: Sequence[str],
                    text: str) -> Dict[str, object]:
    """The claim that each arm of `arms` beats the next, each adjacent pair judged as a claim of its own
    (verdicts.judge_ordering)."""
    pairs = [_judge(results, first, second, metric, failed, f"{label} > {next_label}")
             for first, second, label, next_label in zip(arms, arms[1:], labels, labels[1:])]
    return {"claim": text, "compared": list(arms), "pairs": pairs, **judge_ordering(pairs)}


def _arm_row(results, arm: str, downstream_tasks: Sequence[str], baselines: Mapping[str, float]):
    """The arm's numbers, its pretraining status and its downstream status."""
    arm_results = seed_results(results, NAME, arm)
    mlm = [_eval_metric("masked_lm_accuracy")(result) for result in arm_results]
    sop = [_eval_metric("sentence_order_accuracy")(result) for result in arm_results]
    failed = any(value <= baselines["masked_lm"] for value in mlm) or any(
        value <= baselines["sentence_order"] for value in sop)
    numbers = {"parameters": arm_results[0]["parameters"], "masked_lm_accuracy": mean_and_spread(mlm),
               "sentence_order_accuracy": mean_and_spread(sop),
               "status": "failed: not above the majority baseline" if failed else "ok"}
    numbers.update(downstream_summary(arm_results, downstream_tasks, baselines))
    cells = [mean_text(mlm), mean_text(sop)] + [summary_text(numbers[f"downstream/{task}"])
                                                for task in downstream_tasks]
    return numbers, cells


def _margin_text(margin) -> str:
    return f"above -{margin:g}, the budget's margin" if margin is not None else "with no margin named"


def _seed_values_by_metric(results, arms: Sequence[str], metrics: Sequence[Tuple[str, Metric]]):
    """Per (name, metric) of `metrics`: its name, {arm: {seed: value}} for `arms`, and the not-shared arm's
    {seed: value}, which the difference figure and its numbers both compare."""
    return [(name, {arm: seed_values(results, NAME, arm, metric) for arm in arms},
             seed_values(results, NAME, "none", metric)) for name, metric in metrics]


def _difference_figure(arms: Sequence[str], labels: Sequence[str], by_metric) -> Dict[str, object]:
    """Each arm minus the not-shared arm, seed by seed (mean and paired 95% confidence interval, in accuracy
    points), one panel per metric of `by_metric` (_seed_values_by_metric), beside the paper's downstream average
    minus its not-shared model's."""
    panels = [{"kind": "bars", "title": f"ours: {name}", "xlabel": "arm", "categories": list(labels),
               "ylabel": "minus not shared (accuracy points)", "reference_line": 0.0,
               "series": [difference_series("ours (mean, paired 95% CI)", by_arm, reference)]}
              for name, by_arm, reference in by_metric]
    paper = [round(PAPER[arm][1] - PAPER["none"][1], 1) if arm in PAPER else None for arm in arms]
    panels.append({"kind": "bars", "title": "paper: downstream average (Table 4)", "xlabel": "arm",
                   "categories": list(labels), "ylabel": "minus not shared (points)", "reference_line": 0.0,
                   "series": [{"label": "paper (ALBERT-base, E=128)", "values": paper, "errors": None,
                               "source": "paper"}]})
    return {"file": f"{NAME}_accuracy.png", "title": "Cross-layer sharing (paper Table 4): each arm minus not shared",
            "panels": panels}


def _against_not_shared_text(arms: Sequence[str], labels: Sequence[str], by_metric) -> str:
    """The difference figure's bars as numbers: each arm minus the not-shared arm, seed by seed, per metric of
    `by_metric` (_seed_values_by_metric). These are not the claims named before the run, so they have no verdict
    and no place in the Holm family."""
    comparisons = "; ".join(f"{name}: " + paired_comparisons_text(
        {label: by_arm[arm] for arm, label in zip(arms, labels)}, reference) for name, by_arm, reference in by_metric)
    return ("**Each arm minus not shared**, the figure's bars as accuracy (two-sided paired t-tests; not claims named "
            f"before the run, so no verdicts and outside the Holm family): {comparisons}.")


def sharing_section(results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float],
                    rules: ClaimRules = ClaimRules()) -> Dict[str, object]:
    """The tables, the claims' verdicts and the numbers they used, from {arm key: result} and the baselines; the
    claims on the downstream score use rules.downstream_score, and "sharing the attention costs nothing" is a
    non-inferiority claim against rules.non_inferiority_margins. Arms absent from `results` (a run of some arms
    only) have no row, and the claims on them are left out.

    An arm whose MLM or SOP accuracy does not beat its majority baseline on every seed is a failed run, and so,
    for the downstream claims, is one whose downstream score does not beat the task's majority baseline: the
    claims that use it are not judged.
    """
    downstream_tasks = scored_downstream_tasks(results, rules.downstream_score)
    columns = downstream_columns(downstream_tasks)
    numbers, rows, failed, downstream_failed = {}, [], [], []
    present = {key.split("/")[1] for key in results}

    def add(arm):
        if arm not in numbers:
            numbers[arm], cells = _arm_row(results, arm, downstream_tasks, baselines)
            numbers[arm]["cells"] = cells
            if numbers[arm]["status"] != "ok":
                failed.append(arm)
            if numbers[arm]["downstream_status"] != "ok":
                downstream_failed.append(arm)
        return numbers[arm]

    def run_text(arm):
        return run_status_text(numbers[arm], downstream_tasks)

    for share_type in SHARE_TYPES:
        if share_type not in present:
            continue
        arm = add(share_type)
        paper_parameters, paper_average = PAPER[share_type]
        rows.append(f"| {share_type} | {paper_parameters} | {paper_average} | {arm['parameters']:,} | "
                    f"{' | '.join(arm['cells'])} | {run_text(share_type)} |")
    layers = int(seed_results(results, NAME, sorted(present)[0])[0]["config"]["num_hidden_layers"])
    sizes = group_sizes(layers)
    grouped_arms = [grouped_arm_name(size, layers) for size in sizes]
    # A run without the grouped arms (Budget.grouped_sharing) has no grouped table and no ordering claim.
    grouped = set(grouped_arms) <= present
    group_rows = []
    for size, arm_name in zip(sizes, grouped_arms) if grouped else ():
        arm = add(arm_name)
        source = {"none": "the not-shared arm, reused", "all": "the all-shared arm, reused"}.get(arm_name, "trained")
        group_rows.append(f"| {size} | {layers // size} | {arm_name} ({source}) | {arm['parameters']:,} | "
                          f"{' | '.join(arm['cells'])} | {run_text(arm_name)} |")
    claims = {}
    metrics = [("", "MLM", _eval_metric("masked_lm_accuracy"), failed, "masked_lm_accuracy")]
    if downstream_tasks:
        metrics.append(("_downstream", f"downstream {rules.downstream_score} accuracy",
                        _downstream_metric(rules.downstream_score), sorted(set(failed) | set(downstream_failed)),
                        "downstream"))
    for suffix, label, metric, metric_failed, margin_metric in metrics:
        if {"attention", "none"} <= present:
            margin = rules.non_inferiority_margins.get(margin_metric)
            claims["attention_sharing_is_free" + suffix] = {
                "claim": f"sharing the attention costs nothing ({label}: attention-shared - not shared "
                         f"{_margin_text(margin)})", "compared": ["attention", "none"],
                **judge_non_inferiority_unless_failed(
                    seed_values(results, NAME, "attention", metric), seed_values(results, NAME, "none", metric),
                    ("attention", "none"), metric_failed, margin)}
        if {"attention", "ffn"} <= present:
            claims["ffn_sharing_costs_most" + suffix] = _judge(
                results, "attention", "ffn", metric, metric_failed,
                f"most of the drop comes from the FFN ({label}: attention-shared > FFN-shared)")
        if grouped:
            claims["smaller_groups_are_better" + suffix] = _judge_ordering(
                results, grouped_arms, [f"M={size}" for size in sizes], metric, metric_failed,
                f"the smaller the group, the better ({label}: " + " > ".join(f"M={size}" for size in sizes) + ")")
    downstream_header = "---|" * len(downstream_tasks)
    lines = [f"| share_type | paper params | paper downstream avg | our params | our held-out MLM acc "
             f"| our held-out SOP acc |{columns} run |", "|---|---|---|---|---|---|" + downstream_header + "---|",
             *rows]
    if grouped:
        lines += [
            "", f"Grouped sharing, M layers per group (share_type=all, num_hidden_groups = L / M = {layers} / M); "
            f"paper: {PAPER_GROUPS}. M=1 is the not-shared model and M={layers} the all-shared one: those rows reuse "
            "the finished arms above rather than training them twice.", "",
            f"| M (layers per group) | num_hidden_groups | arm | our params | our held-out MLM acc | our held-out SOP "
            f"acc |{columns} run |", "|---|---|---|---|---|---|" + downstream_header + "---|", *group_rows]
    compared = [arm for arm in [*SHARE_TYPES[1:], *(grouped_arms[1:-1] if grouped else [])] if arm in present]
    # A grouped arm is named group<M> (grouped_arm_name).
    labels = [{"ffn": "FFN"}.get(arm, arm) if arm in SHARE_TYPES else f"M={arm[len('group'):]}" for arm in compared]
    panel_metrics = [("held-out MLM accuracy", _eval_metric("masked_lm_accuracy"))] + (
        [(f"{rules.downstream_score} dev accuracy", _downstream_metric(rules.downstream_score))]
        if downstream_tasks else [])
    by_metric = _seed_values_by_metric(results, compared, panel_metrics) if "none" in present and compared else []
    table = "\n".join(lines)
    if downstream_tasks:
        table += "\n\n" + downstream_baselines_text(downstream_tasks, baselines, rules.downstream_score)
    if by_metric:
        table += "\n\n" + _against_not_shared_text(compared, labels, by_metric)
    for arm in numbers.values():
        del arm["cells"]
    figures = [_difference_figure(compared, labels, by_metric)] if by_metric else []
    return {"name": NAME, "title": "Cross-layer sharing (paper Table 4)", "table": table,
            "arms": numbers, "claims": claims, "figures": figures}
