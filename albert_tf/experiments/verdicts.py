"""Verdicts on a claim from per-seed numbers: holds, does not hold, inside the noise, or cannot be judged.

A difference is judged only with at least MIN_SEEDS seeds per arm; it is inside the noise when it is smaller
than the larger of the two arms' standard deviations over seeds.

Example:
>>> judge_difference([0.50, 0.52, 0.51], [0.40, 0.41, 0.39], expect_positive=True)["verdict"]
'holds'
>>> judge_difference([0.5], [0.4], expect_positive=True)["verdict"]
'cannot be judged (1 seed, 3 needed)'
"""

import statistics
from typing import Dict, Sequence

MIN_SEEDS = 3


def mean_and_spread(values: Sequence[float]) -> Dict[str, float]:
    """Mean and sample standard deviation over seeds (0.0 for one seed, which has no spread)."""
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "seeds": len(values)}


def mean_text(values: Sequence[float], digits: int = 3) -> str:
    summary = mean_and_spread(values)
    if summary["seeds"] == 1:
        return f"{summary['mean']:.{digits}f}"
    return f"{summary['mean']:.{digits}f} ± {summary['sd']:.{digits}f}"


def judge_difference(first: Sequence[float], second: Sequence[float], expect_positive: bool) -> Dict[str, object]:
    """Judges the claim "mean(first) - mean(second) is positive" (expect_positive) or "is not positive".

    Returns the difference, the spread it was compared with, the seeds and the verdict.
    """
    difference = statistics.fmean(first) - statistics.fmean(second)
    seeds = min(len(first), len(second))
    spread = max(mean_and_spread(first)["sd"], mean_and_spread(second)["sd"])
    judged = {"difference": difference, "spread": spread, "seeds": seeds}
    if seeds < MIN_SEEDS:
        plural = "seed" if seeds == 1 else "seeds"
        return {**judged, "verdict": f"cannot be judged ({seeds} {plural}, {MIN_SEEDS} needed)"}
    if abs(difference) < spread:
        return {**judged, "verdict": "inside the noise"}
    return {**judged, "verdict": "holds" if (difference > 0) == expect_positive else "does not hold"}
