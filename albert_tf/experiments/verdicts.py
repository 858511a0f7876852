"""Verdicts on the paper's claims from per-seed numbers: holds, does not hold, inside the noise, or cannot be judged.

Two arms trained with the same seed see the same data in the same order, so a claim that one beats the other is
judged on the differences of the seeds both have, by a two-sided paired t-test at the 5% level
(albert_tf.experiments.significance): it "holds" when the test rejects in the paper's direction, "does not hold"
when it rejects in the other, and is "inside the noise" otherwise, where the difference this many seeds detect at
80% power stands beside it. A "costs nothing" claim is a non-inferiority test against a margin named before the
run (ClaimRules): it holds when the one-sided 95% lower bound of (arm - reference) is above -margin. Fewer than
MIN_SEEDS seeds both arms have: no verdict. An ordering ("the smaller the group, the better") is judged pair by
adjacent pair. The tests need scipy, which only the report's process has: the functions that test import it
when called, so that the training process can import the experiment modules for their arms.

Example:
>>> judge_difference({0: 0.50, 1: 0.52, 2: 0.51}, {0: 0.40, 1: 0.41, 2: 0.39})["verdict"]
'holds'
>>> judge_difference({0: 0.40, 1: 0.41, 2: 0.39}, {0: 0.50, 1: 0.52, 2: 0.51})["verdict"]
'does not hold'
>>> judge_difference({0: 0.5}, {0: 0.4})["verdict"]
'cannot be judged (1 seed, 3 needed)'
>>> judge_non_inferiority({0: 0.499, 1: 0.518, 2: 0.510}, {0: 0.50, 1: 0.52, 2: 0.51}, margin=0.01)["verdict"]
'holds'
"""

import dataclasses
import statistics
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

MIN_SEEDS = 3
MASKED_LM_FAILED = "failed: MLM accuracy not above the majority baseline"
SIGNIFICANCE = 0.05
POWER = 0.8
# The kinds of test a claim is judged by (a claim's "test").
PAIRED_TEST = "paired t-test"
NON_INFERIORITY_TEST = "non-inferiority paired t-test"
ORDERING_TEST = "paired t-test per adjacent pair"


@dataclasses.dataclass(frozen=True)
class ClaimRules:
    """What a run fixes before its arms train about how its claims are judged: the downstream task the claims on
    the downstream score use (Budget.downstream_task), and the margins of its "costs nothing" claims by the metric
    they are judged on ("masked_lm_accuracy", "downstream"; Budget.non_inferiority_margins), in accuracy units."""

    downstream_score: str = "documents"
    non_inferiority_margins: Mapping[str, float] = dataclasses.field(default_factory=dict)


def mean_and_spread(values: Sequence[float]) -> Dict[str, float]:
    """Mean and sample standard deviation over seeds (0.0 for one seed, which has no spread)."""
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "seeds": len(values)}


def summary_text(summary: Mapping[str, float], digits: int = 3) -> str:
    """A mean_and_spread summary as the tables show it: the mean, and ± the spread when there are seeds to spread."""
    if summary["seeds"] == 1:
        return f"{summary['mean']:.{digits}f}"
    return f"{summary['mean']:.{digits}f} ± {summary['sd']:.{digits}f}"


def mean_text(values: Sequence[float], digits: int = 3) -> str:
    return summary_text(mean_and_spread(values), digits)


def masked_lm_status(accuracies: Sequence[float], baseline: float) -> str:
    """"ok", or MASKED_LM_FAILED when a seed's held-out MLM accuracy is not above the majority baseline: a run
    that has not beaten its trivial baseline is a failed run, not a result."""
    return MASKED_LM_FAILED if any(value <= baseline for value in accuracies) else "ok"


def pretraining_summary(arm_results: Sequence[Mapping[str, object]], masked_lm_baseline: float) -> Dict[str, object]:
    """An arm's held-out MLM and SOP accuracies over its seeds' results (mean_and_spread each) and its status
    (masked_lm_status).

    Example:
    >>> seeds = [{"eval": {"masked_lm_accuracy": 0.12, "sentence_order_accuracy": 0.7}},
    ...          {"eval": {"masked_lm_accuracy": 0.05, "sentence_order_accuracy": 0.6}}]
    >>> summary = pretraining_summary(seeds, masked_lm_baseline=0.05)
    >>> summary_text(summary["sentence_order_accuracy"]), summary["status"]
    ('0.650 ± 0.071', 'failed: MLM accuracy not above the majority baseline')
    """
    mlm = masked_lm_accuracies(arm_results)
    sop = [float(result["eval"]["sentence_order_accuracy"]) for result in arm_results]
    return {"masked_lm_accuracy": mean_and_spread(mlm), "sentence_order_accuracy": mean_and_spread(sop),
            "status": masked_lm_status(mlm, masked_lm_baseline)}


def masked_lm_accuracies(arm_results: Sequence[Mapping[str, object]]) -> List[float]:
    """The held-out MLM accuracy of each seed's result."""
    return [float(result["eval"]["masked_lm_accuracy"]) for result in arm_results]


def scored_downstream_tasks(results: Mapping[str, Mapping[str, object]], judged: str) -> List[str]:
    """The downstream tasks every result of `results` has a score for, the `judged` one (ClaimRules.downstream_score)
    first.

    Example:
    >>> scored_downstream_tasks({"a": {"downstream": {"sst-2": {}, "documents": {}}}, "b": {"downstream": {
    ...     "documents": {}, "sst-2": {}, "mnli": {}}}}, judged="documents")
    ['documents', 'sst-2']
    """
    found = [set(result.get("downstream", {})) for result in results.values()]
    common = set.intersection(*found) if found else set()
    return sorted(common, key=lambda task: (task != judged, task))


def downstream_accuracies(arm_results: Sequence[Mapping[str, object]], task: str) -> List[float]:
    """The dev accuracy on `task` of each seed's result."""
    return [float(result["downstream"][task]["accuracy"]) for result in arm_results]


def downstream_summary(arm_results: Sequence[Mapping[str, object]], tasks: Sequence[str],
                       baselines: Mapping[str, float]) -> Dict[str, object]:
    """Per task of `tasks` the dev accuracy over the seeds (mean_and_spread, as "downstream/<task>"), and
    "downstream_status": "ok", or the tasks on which a seed is not above the task's majority baseline (a failed
    downstream run).

    Example:
    >>> seeds = [{"downstream": {"documents": {"accuracy": 0.5}}}, {"downstream": {"documents": {"accuracy": 0.1}}}]
    >>> downstream_summary(seeds, ["documents"], {"downstream/documents": 0.125})["downstream_status"]
    'failed: documents not above the majority baseline'
    """
    summary, failures = {}, []
    for task in tasks:
        scores = downstream_accuracies(arm_results, task)
        summary[f"downstream/{task}"] = mean_and_spread(scores)
        if any(score <= baselines[f"downstream/{task}"] for score in scores):
            failures.append(task)
    summary["downstream_status"] = (f"failed: {', '.join(failures)} not above the majority baseline" if failures
                                    else "ok")
    return summary


def downstream_columns(tasks: Sequence[str]) -> str:
    """The header cells of a table's downstream columns, one per task (its separator row takes "---|" each)."""
    return "".join(f" our {task} dev acc |" for task in tasks)


def run_status_text(summary: Mapping[str, object], tasks: Sequence[str]) -> str:
    """A table's "run" cell: the pretraining status of an arm's `summary` and, with downstream `tasks`, the
    downstream one (downstream_summary's "downstream_status")."""
    return f"pretraining {summary['status']}" + (f"; downstream {summary['downstream_status']}" if tasks else "")


def downstream_baselines_text(tasks: Sequence[str], baselines: Mapping[str, float], judged: str) -> str:
    """The sentence under a table with downstream columns: each task's dev majority baseline."""
    return ("Downstream majority baselines (dev): " + ", ".join(
        f"{task} {baselines[f'downstream/{task}']:.3f}" for task in tasks) +
        f". Claims judged on the downstream score use {judged}; with fewer than {MIN_SEEDS} seeds no claim is "
        "judged.")


def p_text(p_value: Optional[float]) -> str:
    """A p-value as the report prints it: four decimals, "<0.0001" below that, "-" for none."""
    if p_value is None:
        return "-"
    return "<0.0001" if p_value < 0.0001 else f"{p_value:.4f}"


def _cannot_be_judged(seeds: int) -> str:
    return f"cannot be judged ({seeds} seed{'' if seeds == 1 else 's'}, {MIN_SEEDS} needed)"


def _decided(p_value: float, in_the_papers_direction: bool) -> str:
    if p_value >= SIGNIFICANCE:
        return "inside the noise"
    return "holds" if in_the_papers_direction else "does not hold"


def judge_difference(first: Mapping[int, float], second: Mapping[int, float]) -> Dict[str, object]:
    """Judges the claim "first beats second" ({seed: value} each) by the paired t-test of first - second over the
    seeds both have: the test's numbers (significance.paired_test) and the verdict."""
    # scipy is on the report process's path only (the module's docstring).
    from albert_tf.experiments.significance import paired_differences, paired_test
    differences = list(paired_differences(first, second).values())
    if len(differences) < MIN_SEEDS:
        return {"test": PAIRED_TEST, "seeds": len(differences), "verdict": _cannot_be_judged(len(differences))}
    test = paired_test(differences, SIGNIFICANCE, POWER)
    return {"test": PAIRED_TEST, **test, "verdict": _decided(test["p_value"], test["difference"] > 0)}


def judge_non_inferiority(arm: Mapping[int, float], reference: Mapping[int, float],
                          margin: Optional[float]) -> Dict[str, object]:
    """Judges the claim "arm costs nothing against reference" ({seed: value} each): it holds when the one-sided
    95% lower bound of arm - reference over the seeds both have is above -margin, does not hold when the upper one
    is below it, and is inside the noise otherwise (significance.non_inferiority_test). Without a margin (None),
    not judged."""
    if margin is None:
        return {"test": NON_INFERIORITY_TEST, "verdict": "not judged: the budget names no non-inferiority "
                                                         "margin for this metric"}
    from albert_tf.experiments.significance import non_inferiority_test, paired_differences
    differences = list(paired_differences(arm, reference).values())
    if len(differences) < MIN_SEEDS:
        return {"test": NON_INFERIORITY_TEST, "margin": margin, "seeds": len(differences),
                "verdict": _cannot_be_judged(len(differences))}
    test = non_inferiority_test(differences, margin, SIGNIFICANCE, POWER)
    verdict = ("holds" if test["p_value"] < SIGNIFICANCE else
               "does not hold" if test["p_value_inferior"] < SIGNIFICANCE else "inside the noise")
    return {"test": NON_INFERIORITY_TEST, **test, "verdict": verdict}


def _failed_compared(compared: Sequence[str], failed: Sequence[str]) -> Optional[Dict[str, object]]:
    """The verdict of a claim on a failed run ("not judged"), or None when no compared arm failed."""
    failed_compared = sorted(set(compared) & set(failed))
    return {"verdict": f"not judged: failed run(s) {', '.join(failed_compared)}"} if failed_compared else None


def judge_unless_failed(first: Mapping[int, float], second: Mapping[int, float], compared: Sequence[str],
                        failed: Sequence[str]) -> Dict[str, object]:
    """judge_difference(first, second) for the arms `compared`, unless one of them is in `failed`: a claim on a
    failed run is not judged.

    Example:
    >>> judge_unless_failed({0: 0.5}, {0: 0.4}, ["a", "b"], failed=["b", "c"])
    {'verdict': 'not judged: failed run(s) b'}
    """
    return _failed_compared(compared, failed) or judge_difference(first, second)


def judge_non_inferiority_unless_failed(arm: Mapping[int, float], reference: Mapping[int, float],
                                        compared: Sequence[str], failed: Sequence[str],
                                        margin: Optional[float]) -> Dict[str, object]:
    """judge_non_inferiority(arm, reference, margin) for the arms `compared`, unless one of them is in `failed`."""
    return _failed_compared(compared, failed) or judge_non_inferiority(arm, reference, margin)


def judge_ordering(pairs: Sequence[Mapping[str, object]]) -> Dict[str, object]:
    """The verdict of an ordering from the verdicts of its adjacent pairs (each "first beats second"): it holds
    when every pair holds, does not hold when one does not, cannot be judged (or is not judged) when a pair cannot
    (or is not), and is inside the noise otherwise.

    Example:
    >>> judge_ordering([{"verdict": "holds"}, {"verdict": "inside the noise"}])
    {'test': 'paired t-test per adjacent pair', 'verdict': 'inside the noise'}
    """
    verdicts = [pair["verdict"] for pair in pairs]
    not_judged = [verdict for verdict in verdicts if verdict.startswith(("not judged", "cannot be judged"))]
    if not pairs:
        verdict = "cannot be judged (a single arm)"
    elif not_judged:
        verdict = not_judged[0]
    elif "does not hold" in verdicts:
        verdict = "does not hold"
    else:
        verdict = "holds" if all(verdict == "holds" for verdict in verdicts) else "inside the noise"
    return {"test": ORDERING_TEST, "verdict": verdict}


def paired_interval(first: Mapping[int, float], second: Mapping[int, float],
                    scale: float = 100.0) -> Optional[Tuple[float, float, float]]:
    """(mean, low, high) of `scale` * (first - second) over the seeds both have ({seed: value} each), the bounds the
    paired 95% confidence interval; with one such seed the bounds are the difference, with none, None.

    Example:
    >>> [round(value, 2) for value in paired_interval({0: 0.3, 1: 0.5}, {0: 0.1, 1: 0.2})]
    [25.0, -38.53, 88.53]
    >>> paired_interval({0: 0.3}, {1: 0.1}) is None
    True
    """
    from albert_tf.experiments.significance import paired_differences, paired_test
    differences = [scale * value for value in paired_differences(first, second).values()]
    if len(differences) < 2:
        return (differences[0],) * 3 if differences else None
    test = paired_test(differences, SIGNIFICANCE, POWER)
    return (test["difference"], *test["confidence_interval"])


def paired_comparisons_text(by_label: Mapping[str, Mapping[int, float]], reference: Mapping[int, float]) -> str:
    """Each series of `by_label` ({label: {seed: value}}) minus `reference`, seed by seed, by the verdicts'
    two-sided paired t-test: the mean difference, its 95% confidence interval and p-value, or that too few seeds
    are shared. For comparisons that are not claims: no verdict, and no place in the Holm family.

    Example:
    >>> paired_comparisons_text({"b": {0: 0.52, 1: 0.55, 2: 0.53}, "c": {0: 0.5}}, {0: 0.50, 1: 0.51, 2: 0.50})
    'b +0.0300 (95% CI +0.0052 to +0.0548, p 0.0351, 3 seeds), c: fewer than 3 seeds'
    """
    from albert_tf.experiments.significance import paired_differences, paired_test
    parts = []
    for label, values in by_label.items():
        differences = list(paired_differences(values, reference).values())
        if len(differences) < MIN_SEEDS:
            parts.append(f"{label}: fewer than {MIN_SEEDS} seeds")
            continue
        test = paired_test(differences, SIGNIFICANCE, POWER)
        low, high = test["confidence_interval"]
        parts.append(f"{label} {test['difference']:+.4f} (95% CI {low:+.4f} to {high:+.4f}, "
                     f"p {p_text(test['p_value'])}, {test['seeds']} seeds)")
    return ", ".join(parts)


def difference_series(label: str, by_arm: Mapping[object, Mapping[int, float]], reference: Mapping[int, float],
                      scale: float = 100.0) -> Dict[str, object]:
    """A figure's bar series (albert_tf.experiments.report.plot_figure): per arm of `by_arm` ({arm: {seed: value}},
    in its order), `scale` times the mean of arm - reference over the seeds both have (accuracy points), with its
    paired 95% confidence interval as the error bar (paired_interval; None for an arm without a common seed).

    Example:
    >>> series = difference_series("ours", {"a": {0: 0.3, 1: 0.5}, "b": {2: 0.1}}, {0: 0.1, 1: 0.2})
    >>> [round(value, 1) for value in series["values"][:1]], series["values"][1], series["errors"][0][1]
    ([25.0], None, 0.0)
    """
    intervals = [paired_interval(values, reference, scale) for values in by_arm.values()]
    return {"label": label, "values": [None if interval is None else interval[0] for interval in intervals],
            "errors": [[0.0 if interval is None else interval[0] - interval[1] for interval in intervals],
                       [0.0 if interval is None else interval[2] - interval[0] for interval in intervals]],
            "source": "ours"}
