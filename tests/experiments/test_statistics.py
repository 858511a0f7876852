"""The rule the paper's claims are judged by, on simulated per-seed results: how often it calls noise decisive, how
often it finds a planted effect, the non-inferiority test at planted values, Holm's adjustment and the difference
detectable at 80% power, each against a reference computed here with scipy or by simulation."""
import math

import numpy as np
import pytest
import scipy.stats

from albert_tf.experiments import speed_report
from albert_tf.experiments.significance import (detectable_difference, holm_adjusted, non_inferiority_test,
                                                paired_test)
from albert_tf.experiments.verdicts import judge_difference, judge_non_inferiority
from albert_tf.training.compile_choice import PATH_NAMES


def _by_seed(values):
    return dict(enumerate(values))


def _verdicts(first, second):
    """The verdict of every simulated run, each a row of per-seed values of the two arms."""
    return [judge_difference(_by_seed(a), _by_seed(b))["verdict"] for a, b in zip(first, second)]


@pytest.mark.parametrize("seed_effect_sd", [0.0, 1.0], ids=["independent arms", "arms sharing a seed effect"])
def test_noise_is_called_decisive_about_five_percent_of_the_time_at_three_seeds(seed_effect_sd):
    # 8,000 runs of 3 seeds with no true effect; each arm's result is its seed's effect (shared by the arms of that
    # seed: the same data and initialization) plus its own noise (sd 1). The old rule ("holds" past the larger
    # seed sd) was decisive in about 21% of such runs with independent arms, 12% with the seed effect; a test
    # at the 5% level must be within three Monte Carlo standard errors (3 x sqrt(0.05 x 0.95 / 8,000) = 0.0073) of
    # 5% either way.
    runs, seeds = 8_000, 3
    generator = np.random.default_rng(21)
    seed_effect = generator.normal(0.0, seed_effect_sd, (runs, seeds))
    first = 0.15 + 0.01 * (seed_effect + generator.normal(0.0, 1.0, (runs, seeds)))
    second = 0.15 + 0.01 * (seed_effect + generator.normal(0.0, 1.0, (runs, seeds)))
    verdicts = _verdicts(first, second)
    decisive = np.mean([verdict in ("holds", "does not hold") for verdict in verdicts])
    assert abs(decisive - 0.05) <= 3 * math.sqrt(0.05 * 0.95 / runs)
    # Two-sided: the two wrong verdicts are about equally common.
    assert verdicts.count("holds") == pytest.approx(verdicts.count("does not hold"), rel=0.3)


def test_an_effect_of_three_seed_sds_is_found_at_five_seeds():
    # 2,000 runs of 5 seeds, independent arms (no seed-to-seed correlation: the hardest case for a paired test;
    # correlated arms only shrink the paired differences' spread), the first arm 3 seed sds better. Its exact power
    # is 0.94 (noncentral t, 4 degrees of freedom); the rule must find it in at least 80% of the runs.
    runs, seeds = 2_000, 5
    generator = np.random.default_rng(5)
    first = generator.normal(3.0, 1.0, (runs, seeds))
    second = generator.normal(0.0, 1.0, (runs, seeds))
    verdicts = _verdicts(first, second)
    assert verdicts.count("holds") / runs >= 0.8
    assert "does not hold" not in verdicts


def test_arms_are_compared_on_the_seeds_both_have():
    judged = judge_difference({0: 0.30, 1: 0.31, 2: 0.33, 7: 0.9}, {0: 0.20, 1: 0.20, 2: 0.21, 5: 0.0})
    assert judged["seeds"] == 3
    assert judged["difference"] == pytest.approx((0.10 + 0.11 + 0.12) / 3)
    assert judge_difference({0: 0.3, 1: 0.3, 2: 0.3}, {0: 0.2, 1: 0.2, 5: 0.2})["verdict"] == (
        "cannot be judged (2 seeds, 3 needed)")


def test_the_paired_test_is_scipys_and_its_interval_uses_t_quantiles():
    differences = [0.004, 0.001, 0.006, 0.002]
    test = paired_test(differences)
    reference = scipy.stats.ttest_rel([0.154, 0.151, 0.156, 0.152], [0.15] * 4)
    assert test["p_value"] == pytest.approx(reference.pvalue, rel=1e-9)
    half_width = scipy.stats.t.ppf(0.975, 3) * np.std(differences, ddof=1) / 2
    assert test["confidence_interval"] == pytest.approx([0.00325 - half_width, 0.00325 + half_width], rel=1e-9)


@pytest.mark.parametrize("seeds", [3, 5, 10])
def test_the_detectable_difference_has_80_percent_power_under_scipys_noncentral_t(seeds):
    standard_error = 0.002 / math.sqrt(seeds)
    detectable = detectable_difference(standard_error, seeds - 1)
    critical = scipy.stats.t.ppf(0.975, seeds - 1)
    noncentrality = detectable / standard_error
    power = (scipy.stats.nct.sf(critical, seeds - 1, noncentrality)
             + scipy.stats.nct.cdf(-critical, seeds - 1, noncentrality))
    assert power == pytest.approx(0.8, abs=1e-6)
    # The usual closed form (t_0.975 + t_0.8) * se is close to it, a little short at few seeds, and the normal one
    # (z_0.975 + z_0.8 = 2.80) far shorter.
    closed_form = (critical + scipy.stats.t.ppf(0.8, seeds - 1)) * standard_error
    assert closed_form == pytest.approx(detectable, rel=0.06)
    assert detectable > 2.8 * standard_error * (1.5 if seeds == 3 else 1.05)


def test_a_planted_effect_of_the_detectable_difference_is_found_80_percent_of_the_time():
    # Monte Carlo check of the noncentral t: 4,000 runs of 5 paired differences with sd 1 and mean the detectable
    # difference reject at 80% within three standard errors (3 x sqrt(0.8 x 0.2 / 4,000) = 0.019).
    runs, seeds = 4_000, 5
    effect = detectable_difference(1 / math.sqrt(seeds), seeds - 1)
    differences = np.random.default_rng(80).normal(effect, 1.0, (runs, seeds))
    rejected = np.mean(scipy.stats.ttest_1samp(differences, 0.0, axis=1).pvalue < 0.05)
    assert abs(rejected - 0.8) <= 3 * math.sqrt(0.8 * 0.2 / runs)
    assert np.mean([paired_test(row)["p_value"] < 0.05 for row in differences[:500]]) == pytest.approx(
        np.mean(scipy.stats.ttest_1samp(differences[:500], 0.0, axis=1).pvalue < 0.05))


def test_non_inferiority_holds_when_the_lower_bound_clears_the_margin():
    reference = {0: 0.150, 1: 0.152, 2: 0.148, 3: 0.151}
    margin = 0.005

    def arm(shifts):
        return {seed: value + shift for (seed, value), shift in zip(reference.items(), shifts)}

    equal = judge_non_inferiority(arm([-0.001, 0.001, 0.0, -0.0005]), reference, margin)
    assert equal["verdict"] == "holds"
    differences = [-0.001, 0.001, 0.0, -0.0005]
    lower = np.mean(differences) - scipy.stats.t.ppf(0.95, 3) * np.std(differences, ddof=1) / 2
    assert equal["confidence_interval"][0] == pytest.approx(lower, rel=1e-6)
    assert equal["p_value"] == pytest.approx(
        scipy.stats.ttest_1samp(differences, -margin, alternative="greater").pvalue, rel=1e-9)
    # Worse by twice the margin, tightly: shown worse than the margin allows.
    assert judge_non_inferiority(arm([-0.010, -0.011, -0.009, -0.010]), reference, margin)["verdict"] == (
        "does not hold")
    # Worse by half the margin with a spread as large as the margin: neither shown.
    assert judge_non_inferiority(arm([-0.008, 0.004, -0.006, 0.0]), reference, margin)["verdict"] == (
        "inside the noise")
    # A margin the run cannot resolve is reported with the margin it could.
    noisy = non_inferiority_test([-0.008, 0.004, -0.006, 0.0], margin)
    assert noisy["detectable_margin"] > margin
    assert judge_non_inferiority(arm([0.0] * 4), reference, None)["verdict"] == (
        "not judged: the budget names no non-inferiority margin for this metric")


def test_holm_on_known_inputs():
    # The textbook case (Holm 1979's step-down: p_(k) x (m - k + 1), kept monotone, capped at 1).
    assert holm_adjusted([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert holm_adjusted([0.5, 0.02, 0.6]) == pytest.approx([1.0, 0.06, 1.0])
    assert holm_adjusted([0.04]) == [0.04]
    assert holm_adjusted([]) == []


def test_speed_ratios_are_judged_by_welch_on_log_rates_and_name_their_compile_paths_as_training_does():
    assert speed_report.PATH_NAMES == PATH_NAMES
    reference = {"seq_per_s_min": 0.95, "seq_per_s_median": 1.0, "seq_per_s_max": 1.05}
    faster = {"seq_per_s_min": 1.5, "seq_per_s_median": 1.6, "seq_per_s_max": 1.7}
    test = speed_report._ratio_test(faster, reference)
    welch = scipy.stats.ttest_ind(np.log([1.5, 1.6, 1.7]), np.log([0.95, 1.0, 1.05]), equal_var=False)
    assert test["p_value"] == pytest.approx(welch.pvalue, rel=1e-9)
    assert test["ratio"] == pytest.approx(math.exp(np.mean(np.log([1.5, 1.6, 1.7])) - np.mean(np.log([0.95, 1.0,
                                                                                                      1.05]))))
    assert speed_report._judge(test, faster=True) == "holds"
    assert speed_report._judge(test, faster=False) == "does not hold"
