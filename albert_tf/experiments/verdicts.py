"""Verdicts on a claim from per-seed numbers: holds, does not hold, inside the noise, or cannot be judged.

A difference is judged only with at least MIN_SEEDS seeds per arm; it is inside the noise when it is smaller
than the larger of the two arms' standard deviations over seeds. Beside each verdict stands the difference a
two-sample comparison of that many seeds per arm would detect at 80% power (`detectable_difference`).

Example:
>>> judge_difference([0.50, 0.52, 0.51], [0.40, 0.41, 0.39], expect_positive=True)["verdict"]
'holds'
>>> judge_difference([0.5], [0.4], expect_positive=True)["verdict"]
'cannot be judged (1 seed, 3 needed)'
>>> round(detectable_difference(0.35, seeds=3), 3)  # the issue's pilot: MLM seed SD 0.35 points, 3 seeds
0.801
"""

import math
import statistics
from typing import Dict, List, Mapping, Optional, Sequence

MIN_SEEDS = 3
MASKED_LM_FAILED = "failed: MLM accuracy not above the majority baseline"
# The downstream task the claims on the downstream score are judged on (albert_tf.experiments.downstream).
DOWNSTREAM_SCORE = "documents"
# The detectable difference: a two-sided test at this significance level, with this power.
SIGNIFICANCE = 0.05
POWER = 0.8


def detectable_difference(spread: float, seeds: int, significance: float = SIGNIFICANCE,
                          power: float = POWER) -> Optional[float]:
    """The smallest difference of two means, each over `seeds` runs with standard deviation `spread`, that a
    two-sided two-sample test at `significance` finds with probability `power`: (z_{1-a/2} + z_power) * spread
    * sqrt(2 / seeds), the normal-quantile closed form. With few seeds it understates what a t-test needs: at 3
    seeds, Student's t quantiles with 4 degrees of freedom (2.776 + 0.941 against 1.960 + 0.842) give about 1.33
    times as much. None below two seeds, where there is no spread.
    """
    if seeds < 2:
        return None
    quantile = statistics.NormalDist().inv_cdf
    return (quantile(1 - significance / 2) + quantile(power)) * spread * math.sqrt(2 / seeds)


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


def scored_downstream_tasks(results: Mapping[str, Mapping[str, object]]) -> List[str]:
    """The downstream tasks every result of `results` has a score for, DOWNSTREAM_SCORE first.

    Example:
    >>> scored_downstream_tasks({"a": {"downstream": {"sst-2": {}, "documents": {}}}, "b": {"downstream": {
    ...     "documents": {}, "sst-2": {}, "mnli": {}}}})
    ['documents', 'sst-2']
    """
    found = [set(result.get("downstream", {})) for result in results.values()]
    common = set.intersection(*found) if found else set()
    return sorted(common, key=lambda task: (task != DOWNSTREAM_SCORE, task))


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


def downstream_baselines_text(tasks: Sequence[str], baselines: Mapping[str, float]) -> str:
    """The sentence under a table with downstream columns: each task's dev majority baseline."""
    return ("Downstream majority baselines (dev): " + ", ".join(
        f"{task} {baselines[f'downstream/{task}']:.3f}" for task in tasks) +
        f". Claims judged on the downstream score use {DOWNSTREAM_SCORE}; with fewer than {MIN_SEEDS} seeds no "
        "claim is judged.")


def judge_unless_failed(first: Sequence[float], second: Sequence[float], compared: Sequence[str],
                        failed: Sequence[str]) -> Dict[str, object]:
    """judge_difference(first, second, expect_positive=True) for the arms `compared`, unless one of them is in
    `failed`: a claim on a failed run is not judged.

    Example:
    >>> judge_unless_failed([0.5] * 3, [0.4] * 3, ["a", "b"], failed=["b", "c"])
    {'verdict': 'not judged: failed run(s) b'}
    """
    failed_compared = sorted(set(compared) & set(failed))
    if failed_compared:
        return {"verdict": f"not judged: failed run(s) {', '.join(failed_compared)}"}
    return judge_difference(first, second, expect_positive=True)


def judge_difference(first: Sequence[float], second: Sequence[float], expect_positive: bool) -> Dict[str, object]:
    """Judges the claim "mean(first) - mean(second) is positive" (expect_positive) or "is not positive".

    Returns the difference, the spread it was compared with, the seeds, the difference detectable at 80% power
    and the verdict.
    """
    difference = statistics.fmean(first) - statistics.fmean(second)
    seeds = min(len(first), len(second))
    spread = max(mean_and_spread(first)["sd"], mean_and_spread(second)["sd"])
    judged = {"difference": difference, "spread": spread, "seeds": seeds,
              "detectable_difference": detectable_difference(spread, seeds)}
    if seeds < MIN_SEEDS:
        plural = "seed" if seeds == 1 else "seeds"
        return {**judged, "verdict": f"cannot be judged ({seeds} {plural}, {MIN_SEEDS} needed)"}
    if abs(difference) < spread:
        return {**judged, "verdict": "inside the noise"}
    return {**judged, "verdict": "holds" if (difference > 0) == expect_positive else "does not hold"}
