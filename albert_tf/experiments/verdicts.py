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
from typing import Dict, Mapping, Optional, Sequence

MIN_SEEDS = 3
MASKED_LM_FAILED = "failed: MLM accuracy not above the majority baseline"
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
    mlm = [float(result["eval"]["masked_lm_accuracy"]) for result in arm_results]
    sop = [float(result["eval"]["sentence_order_accuracy"]) for result in arm_results]
    return {"masked_lm_accuracy": mean_and_spread(mlm), "sentence_order_accuracy": mean_and_spread(sop),
            "status": masked_lm_status(mlm, masked_lm_baseline)}


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
