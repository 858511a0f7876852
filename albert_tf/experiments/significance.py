"""The tests a reproduction's claims are judged by (scipy.stats): two arms compared seed by seed, a "costs nothing"
claim against a margin, two models' timed repeats, the difference a test detects at 80% power, and Holm's
adjustment of a family of p-values.

Arms trained with the same seed see the same data in the same order, so two arms are compared on the difference
of each seed both have: Student's t on those differences, n - 1 degrees of freedom (a paired t-test). The timed
repeats of two models are not paired: Welch's t-test compares the logarithms of their rates, so that a ratio of
rates is a difference. This module needs scipy, which the training processes must not import (TensorFlow
imports it whenever it can): only the report's process imports it (albert_tf.experiments.write_report).

Example:
>>> test = paired_test([0.10, 0.12, 0.11])
>>> test["seeds"], round(test["difference"], 3), round(test["p_value"], 4)
(3, 0.11, 0.0027)
>>> [round(bound, 3) for bound in test["confidence_interval"]]
[0.085, 0.135]
>>> round(paired_test([0.01, -0.02, 0.02])["p_value"], 2)
0.81
"""

import functools
import math
from typing import Dict, List, Mapping, Sequence

import numpy as np
import scipy.optimize
import scipy.stats

SIGNIFICANCE = 0.05
POWER = 0.8
# Differences equal to this relative precision have no spread: float rounding, not seeds, made them differ.
_NO_SPREAD = 1e-12


def paired_differences(first: Mapping[int, float], second: Mapping[int, float]) -> Dict[int, float]:
    """first[seed] - second[seed] for every seed both have, in seed order.

    Example:
    >>> paired_differences({0: 0.5, 1: 0.6, 2: 0.7}, {1: 0.4, 2: 0.4, 3: 0.1})
    {1: 0.19999999999999996, 2: 0.29999999999999993}
    """
    return {seed: first[seed] - second[seed] for seed in sorted(set(first) & set(second))}


@functools.lru_cache(maxsize=None)
def _detectable_noncentrality(degrees_of_freedom: float, significance: float, power: float,
                              two_sided: bool) -> float:
    """The noncentrality at which a t-test with these degrees of freedom rejects with probability `power`."""
    critical = scipy.stats.t.ppf(1 - significance / 2 if two_sided else 1 - significance, degrees_of_freedom)

    def shortfall(noncentrality):
        # The lower tail as the upper tail of the mirrored distribution: nct.cdf far below its mean returns nan.
        lower = scipy.stats.nct.sf(critical, degrees_of_freedom, -noncentrality) if two_sided else 0.0
        return scipy.stats.nct.sf(critical, degrees_of_freedom, noncentrality) + lower - power

    upper = critical + 1.0
    while shortfall(upper) < 0:
        upper *= 2
    return scipy.optimize.brentq(shortfall, 0.0, upper, xtol=1e-10)


def detectable_difference(standard_error: float, degrees_of_freedom: float, significance: float = SIGNIFICANCE,
                          power: float = POWER, two_sided: bool = True) -> float:
    """The true difference a t-test of this standard error and these degrees of freedom finds with probability
    `power` at level `significance`: the noncentrality of the noncentral t distribution (scipy.stats.nct) at
    which the test's power is `power`, times the standard error. `two_sided=False`: a one-sided test.

    Example: 3 seeds (2 degrees of freedom) need 5.65 standard errors, where the normal closed form says 2.80 and
    the usual t approximation, t_0.975 + t_0.8, 5.36.
    >>> round(detectable_difference(1.0, 2), 2), round(detectable_difference(1.0, 9), 2)
    (5.65, 3.15)
    """
    return standard_error * _detectable_noncentrality(float(degrees_of_freedom), significance, power, two_sided)


def _has_no_spread(values: Sequence[float]) -> bool:
    return max(values) - min(values) <= _NO_SPREAD * max(1.0, max(abs(value) for value in values))


def paired_test(differences: Sequence[float], significance: float = SIGNIFICANCE,
                power: float = POWER) -> Dict[str, object]:
    """The two-sided paired t-test of per-seed `differences` against 0 (scipy.stats.ttest_1samp): their mean, their
    standard deviation ("spread"), the seeds, the p-value, the (1 - significance) confidence interval and the
    difference this many seeds detect at `power` with that spread. Differences without spread (all equal) have
    p-value 0, or 1 when they are all 0. At least two seeds."""
    seeds = len(differences)
    mean = float(np.mean(differences))
    if _has_no_spread(differences):
        spread, p_value, interval = 0.0, float(mean == 0.0), [mean, mean]
    else:
        test = scipy.stats.ttest_1samp(differences, 0.0)
        bounds = test.confidence_interval(1 - significance)
        spread, p_value, interval = float(np.std(differences, ddof=1)), float(test.pvalue), [float(bounds.low),
                                                                                           float(bounds.high)]
    return {"difference": mean, "spread": spread, "seeds": seeds, "p_value": p_value, "confidence_interval": interval,
            "detectable_difference": detectable_difference(spread / math.sqrt(seeds), seeds - 1, significance, power)}


def non_inferiority_test(differences: Sequence[float], margin: float, significance: float = SIGNIFICANCE,
                         power: float = POWER) -> Dict[str, object]:
    """The non-inferiority test of per-seed `differences` (arm - reference) against `margin` (> 0): "p_value" of
    the one-sided t-test that the mean difference is above -margin, "p_value_inferior" of the one that it is
    below, and the two one-sided (1 - significance) bounds as "confidence_interval"; the claim holds when the
    lower bound is above -margin. "detectable_margin": the smallest margin this many seeds show at `power` when the
    arms are equal, at this spread.

    Example:
    >>> test = non_inferiority_test([-0.001, -0.002, 0.0], margin=0.005)
    >>> round(test["p_value"], 4), round(test["confidence_interval"][0], 4)
    (0.0101, -0.0027)
    """
    seeds = len(differences)
    mean = float(np.mean(differences))
    if _has_no_spread(differences):
        spread, bounds = 0.0, [mean, mean]
        p_value, p_value_inferior = float(mean <= -margin), float(mean >= -margin)
    else:
        above = scipy.stats.ttest_1samp(differences, -margin, alternative="greater")
        below = scipy.stats.ttest_1samp(differences, -margin, alternative="less")
        spread = float(np.std(differences, ddof=1))
        p_value, p_value_inferior = float(above.pvalue), float(below.pvalue)
        bounds = [float(above.confidence_interval(1 - significance).low),
                  float(below.confidence_interval(1 - significance).high)]
    return {"difference": mean, "spread": spread, "seeds": seeds, "margin": margin, "p_value": p_value,
            "p_value_inferior": p_value_inferior, "confidence_interval": bounds,
            "detectable_margin": detectable_difference(spread / math.sqrt(seeds), seeds - 1, significance, power,
                                                       two_sided=False)}


def welch_test(first: Sequence[float], second: Sequence[float], significance: float = SIGNIFICANCE,
               power: float = POWER) -> Dict[str, object]:
    """Welch's two-sided t-test of mean(first) - mean(second) (scipy.stats.ttest_ind, unequal variances), its
    (1 - significance) confidence interval, its Welch-Satterthwaite degrees of freedom and the difference it
    detects at `power`. Two samples without spread have p-value 0 (1 when their means are equal).

    Example:
    >>> test = welch_test([1.0, 1.1, 1.2], [0.0, 0.1, 0.2])
    >>> round(test["difference"], 3), round(test["p_value"], 4), round(test["degrees_of_freedom"], 6)
    (1.0, 0.0003, 4.0)
    """
    difference = float(np.mean(first) - np.mean(second))
    if _has_no_spread(first) and _has_no_spread(second):
        return {"difference": difference, "p_value": float(difference == 0.0),
                "confidence_interval": [difference, difference], "degrees_of_freedom": None,
                "detectable_difference": 0.0}
    test = scipy.stats.ttest_ind(first, second, equal_var=False)
    bounds = test.confidence_interval(1 - significance)
    standard_error = math.sqrt(np.var(first, ddof=1) / len(first) + np.var(second, ddof=1) / len(second))
    return {"difference": difference, "p_value": float(test.pvalue),
            "confidence_interval": [float(bounds.low), float(bounds.high)], "degrees_of_freedom": float(test.df),
            "detectable_difference": detectable_difference(standard_error, float(test.df), significance, power)}


def holm_adjusted(p_values: Sequence[float]) -> List[float]:
    """Holm's step-down adjustment (scipy.stats has none): sorted ascending, the k-th smallest of m p-values is
    multiplied by m - k + 1, kept at least as large as the one before it, and capped at 1. A family's adjusted
    p-value below the level rejects with a family-wise error rate at most that level.

    Example:
    >>> holm_adjusted([0.01, 0.04, 0.03, 0.5])
    [0.04, 0.09, 0.09, 0.5]
    """
    adjusted = [0.0] * len(p_values)
    largest = 0.0
    for rank, index in enumerate(sorted(range(len(p_values)), key=lambda index: p_values[index])):
        largest = max(largest, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = largest
    return adjusted
