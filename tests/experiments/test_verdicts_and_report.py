"""Verdicts by paired t-tests seed by seed and non-inferiority against a margin, the sharing table's failed-run
rule, the report files, and a report written from kept records alone in a process without TensorFlow, on made-up
results (and on the committed small run's records)."""
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from albert_tf.experiments import layer_transitions, sharing, sop_vs_nsp
from albert_tf.experiments.kept_records import write_report_from_records
from albert_tf.experiments.learning_curves import experiment_curves, training_curve
from albert_tf.experiments.report import dev_sets_text, report_text, verdict_table, write_report
from albert_tf.experiments.report_inputs import record_report_inputs
from albert_tf.experiments.reproduce import experiment_names
from albert_tf.experiments.significance import detectable_difference
from albert_tf.experiments.budgets import budget_for
from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.verdicts import (MASKED_LM_FAILED, ClaimRules, judge_difference, pretraining_summary,
                                            summary_text)
from albert_tf.experiments.write_report import REPORT_INPUTS_NAME, write_report_in_child
from albert_tf.experiments.write_report import main as write_report_main
from albert_tf.models.sharing import build_sharing_plan
from albert_tf.training.summaries import write_scalars
from tests.helpers import REPO_ROOT

BASELINES = {"masked_lm": 0.05, "sentence_order": 0.6, "masked_lm_pure": 0.05, "sop_pure": 0.5, "nsp_pure": 0.5}
MARGINS = ClaimRules(non_inferiority_margins={"masked_lm_accuracy": 0.01, "downstream": 0.05})


def _results(mlm_by_share_type, sop=0.8, layers=2, downstream=None):
    """Made-up sharing results; `downstream` maps an arm to its per-seed documents accuracy."""
    results = {}
    for index, (share_type, values) in enumerate(mlm_by_share_type.items()):
        for seed, value in enumerate(values):
            result = {"parameters": 1000 + index, "config": {"num_hidden_layers": layers},
                      "eval": {"masked_lm_accuracy": value, "sentence_order_accuracy": sop}}
            if downstream:
                result["downstream"] = {"documents": {"accuracy": downstream[share_type][seed], "loss": 1.0}}
            results[f"sharing/{share_type}/seed{seed}"] = result
    return results


def _by_seed(values):
    return dict(enumerate(values))


def test_a_difference_is_judged_by_a_paired_t_test_seed_by_seed():
    higher, lower = _by_seed([0.30, 0.31, 0.32]), _by_seed([0.20, 0.21, 0.22])
    assert judge_difference(higher, lower)["verdict"] == "holds"
    assert judge_difference(lower, higher)["verdict"] == "does not hold"
    noisy = judge_difference(_by_seed([0.30, 0.40, 0.20]), _by_seed([0.28, 0.29, 0.30]))
    assert noisy["verdict"] == "inside the noise"
    differences = [0.02, 0.11, -0.10]
    assert noisy["spread"] == pytest.approx(np.std(differences, ddof=1))
    assert noisy["p_value"] == pytest.approx(scipy.stats.ttest_1samp(differences, 0.0).pvalue)
    assert noisy["detectable_difference"] == pytest.approx(detectable_difference(noisy["spread"] / math.sqrt(3), 2))
    # Arms whose seed spreads are large but whose per-seed differences agree: the seeds move both arms alike, and
    # the paired test sees through it (the larger seed sd, 0.1, is ten times the difference).
    shared_seed_effect = [0.30, 0.50, 0.10]
    assert judge_difference(_by_seed([value + 0.01 for value in shared_seed_effect]),
                            _by_seed(shared_seed_effect))["verdict"] == "holds"
    assert judge_difference(_by_seed([0.3, 0.4]), _by_seed([0.1, 0.2]))["verdict"] == (
        "cannot be judged (2 seeds, 3 needed)")


def test_an_arm_summary_has_mlm_and_sop_over_seeds_and_fails_at_the_baseline():
    seeds = [{"eval": {"masked_lm_accuracy": mlm, "sentence_order_accuracy": sop}}
             for mlm, sop in ((0.10, 0.70), (0.12, 0.80), (0.14, 0.90))]
    summary = pretraining_summary(seeds, masked_lm_baseline=0.09)
    assert summary["status"] == "ok"
    assert summary["masked_lm_accuracy"] == {"mean": pytest.approx(0.12), "sd": pytest.approx(0.02), "seeds": 3}
    assert summary_text(summary["sentence_order_accuracy"]) == "0.800 ± 0.100"
    # One seed at the baseline is enough: it has not beaten the trivial answer.
    assert pretraining_summary(seeds, masked_lm_baseline=0.10)["status"] == MASKED_LM_FAILED
    assert summary_text(pretraining_summary(seeds[:1], 0.0)["masked_lm_accuracy"]) == "0.100"


def test_grouped_sharing_maps_m_layers_per_group_to_num_hidden_groups_and_reuses_coinciding_arms():
    model = dict(hidden_size=32, num_hidden_layers=12, num_attention_heads=2, intermediate_size=64)
    arms = sharing.sharing_arms(model, vocab_size=100, seeds=[0, 1])
    assert [arm.name for arm in arms[::2]] == ["none", "attention", "ffn", "all", "group2", "group6"]
    assert all(arm.downstream for arm in arms)
    for arm, size in ((arms[8], 2), (arms[10], 6)):
        config = arm.config
        assert (config.share_type, config.num_hidden_groups, config.inner_group_num) == ("all", 12 // size, 1)
        # Layer l runs group l // M: runs of M consecutive layers share one block.
        assert [config.group_of_layer(layer) for layer in range(12)] == [layer // size for layer in range(12)]
        plan = build_sharing_plan(config)
        assert len(plan.attention_keys) == len(plan.ffn_keys) == 12 // size
    assert sharing.group_sizes(12) == [1, 2, 6, 12]
    assert [sharing.grouped_arm_name(size, 4) for size in sharing.group_sizes(4)] == ["none", "group2", "all"]
    assert sharing.group_sizes(2) == [1, 2]
    with pytest.raises(ValueError, match="need an even num_hidden_layers; the budget's model has 3"):
        sharing.sharing_arms({**model, "num_hidden_layers": 3}, vocab_size=100, seeds=[0])


def test_sharing_judges_groups_and_the_downstream_score_and_fails_a_downstream_run_at_its_baseline():
    mlm = {"none": [0.30, 0.31, 0.32], "attention": [0.30, 0.31, 0.32], "ffn": [0.20, 0.21, 0.22],
           "all": [0.10, 0.11, 0.12], "group2": [0.20, 0.21, 0.22]}
    downstream = {"none": [0.5, 0.5, 0.5], "attention": [0.5, 0.5, 0.5], "ffn": [0.4, 0.4, 0.4],
                  "all": [0.3, 0.3, 0.3], "group2": [0.2, 0.25, 0.25]}
    baselines = {**BASELINES, "downstream/documents": 0.25}
    section = sharing.sharing_section(_results(mlm, layers=4, downstream=downstream), baselines, MARGINS)
    claims = section["claims"]
    assert claims["smaller_groups_are_better"]["verdict"] == "holds"
    pairs = claims["smaller_groups_are_better"]["pairs"]
    assert [pair["compared"] for pair in pairs] == [["none", "group2"], ["group2", "all"]]
    assert [(pair["claim"], pair["verdict"], pair["seeds"]) for pair in pairs] == [("M=1 > M=2", "holds", 3),
                                                                                   ("M=2 > M=4", "holds", 3)]
    assert pairs[0]["difference"] == pytest.approx(0.1) and pairs[0]["p_value"] == 0.0
    assert claims["ffn_sharing_costs_most_downstream"]["verdict"] == "holds"
    assert claims["ffn_sharing_costs_most_downstream"]["difference"] == pytest.approx(0.1)
    # group2 reached its baseline on two seeds: a failed downstream run, so its downstream claim is not judged.
    assert section["arms"]["group2"]["downstream_status"] == "failed: documents not above the majority baseline"
    assert section["arms"]["group2"]["status"] == "ok"
    assert claims["smaller_groups_are_better_downstream"]["verdict"] == "not judged: failed run(s) group2"
    row = "| 1 | 4 | none (the not-shared arm, reused) | 1,000 | 0.310 ± 0.010 | 0.800 ± 0.000 | 0.500 ± 0.000 |"
    assert row in section["table"]
    assert "| 4 | 1 | all (the all-shared arm, reused) |" in section["table"]
    assert "| 2 | 2 | group2 (trained) |" in section["table"]
    assert "Downstream majority baselines (dev): documents 0.250" in section["table"]
    downstream["attention"] = [0.7, 0.8, 0.6]
    noisy = sharing.sharing_section(_results(mlm, layers=4, downstream=downstream), baselines, MARGINS)
    free = noisy["claims"]["attention_sharing_is_free_downstream"]
    assert free["verdict"] == "holds" and free["margin"] == 0.05
    assert "attention-shared - not shared above -0.05, the budget's margin" in free["claim"]
    assert noisy["claims"]["ffn_sharing_costs_most_downstream"]["verdict"] == "holds"
    downstream["ffn"] = [0.6, 0.7, 0.8]
    mixed = sharing.sharing_section(_results(mlm, layers=4, downstream=downstream), baselines, MARGINS)
    assert mixed["claims"]["ffn_sharing_costs_most_downstream"]["verdict"] == "inside the noise"
    # A budget that names no margin for a metric does not judge "costs nothing" on it.
    unmargined = sharing.sharing_section(_results(mlm, layers=4, downstream=downstream), baselines)
    assert unmargined["claims"]["attention_sharing_is_free"]["verdict"] == (
        "not judged: the budget names no non-inferiority margin for this metric")


def test_sharing_without_grouped_arms_or_with_some_arms_only_judges_what_it_has():
    mlm = {"none": [0.30, 0.31, 0.32], "attention": [0.30, 0.31, 0.32], "ffn": [0.20, 0.21, 0.22],
           "all": [0.10, 0.11, 0.12]}
    ungrouped = sharing.sharing_section(_results(mlm, layers=4), BASELINES, MARGINS)
    assert set(ungrouped["claims"]) == {"attention_sharing_is_free", "ffn_sharing_costs_most"}
    assert "Grouped sharing" not in ungrouped["table"]
    gate = sharing.sharing_section(_results({"none": mlm["none"], "all": mlm["all"]}, layers=4), BASELINES, MARGINS)
    assert gate["claims"] == {} and list(gate["arms"]) == ["none", "all"]
    assert [panel["categories"] for panel in gate["figures"][0]["panels"]] == [["all"], ["all"]]


def test_sharing_gives_each_arm_minus_not_shared_as_paired_tests_outside_the_verdicts():
    mlm = {"none": [0.30, 0.32, 0.31, 0.29], "attention": [0.29, 0.33, 0.30, 0.27], "ffn": [0.32, 0.335, 0.33, 0.30],
           "all": [0.25, 0.27]}
    section = sharing.sharing_section(_results(mlm), BASELINES, MARGINS)
    ffn_minus_none = [0.02, 0.015, 0.02, 0.01]
    test = scipy.stats.ttest_1samp(ffn_minus_none, 0.0)
    interval = test.confidence_interval(0.95)
    expected = (f"FFN {np.mean(ffn_minus_none):+.4f} (95% CI {interval.low:+.4f} to {interval.high:+.4f}, "
                f"p {test.pvalue:.4f}, 4 seeds)")
    paragraph = next(line for line in section["table"].splitlines() if line.startswith("**Each arm minus not shared**"))
    assert "held-out MLM accuracy: attention -0.0075 (95% CI " in paragraph
    assert expected in paragraph and "all: fewer than 3 seeds." in paragraph
    assert "outside the Holm family" in paragraph
    # They are no claims: the verdict table and the Holm family are the named claims alone.
    assert set(section["claims"]) == {"attention_sharing_is_free", "ffn_sharing_costs_most",
                                      "smaller_groups_are_better"}
    gate = sharing.sharing_section(_results({"all": mlm["all"], "attention": mlm["attention"]}), BASELINES, MARGINS)
    assert "Each arm minus not shared" not in gate["table"]


def test_sharing_claims_use_mlm_seed_differences_and_skip_failed_arms():
    section = sharing.sharing_section(_results({"none": [0.20, 0.21, 0.22], "attention": [0.20, 0.21, 0.22],
                                                "ffn": [0.10, 0.11, 0.12], "all": [0.04, 0.05, 0.05]}), BASELINES,
                                      MARGINS)
    assert section["claims"]["ffn_sharing_costs_most"]["verdict"] == "holds"
    assert section["claims"]["ffn_sharing_costs_most"]["difference"] == pytest.approx(0.10)
    # Equal on every seed: well inside the margin, so it costs nothing.
    assert section["claims"]["attention_sharing_is_free"]["verdict"] == "holds"
    assert section["arms"]["all"]["status"] == "failed: not above the majority baseline"
    assert section["arms"]["ffn"]["status"] == "ok"
    assert "| all | 12M | 80.1 | 1,003 | 0.047 ± 0.006 |" in section["table"]
    failed = sharing.sharing_section(_results({share_type: [0.2] for share_type in sharing.SHARE_TYPES}, sop=0.6),
                                     BASELINES, MARGINS)
    assert failed["claims"]["ffn_sharing_costs_most"]["verdict"] == "not judged: failed run(s) attention, ffn"
    assert failed["claims"]["attention_sharing_is_free"]["verdict"] == "not judged: failed run(s) attention, none"


def _write_training_curve(directory, accuracies):
    with tf.summary.create_file_writer(str(directory / "train")).as_default():
        for step, accuracy in enumerate(accuracies, start=1):
            write_scalars({"masked_lm_accuracy": accuracy, "masked_lm_loss": 1 - accuracy}, step * 10)
    return str(directory)


def test_the_report_has_every_table_plot_and_results_key(tmp_path):
    mlm = {"none": [0.2, 0.21, 0.25], "attention": [0.2, 0.2, 0.2], "ffn": [0.1, 0.1, 0.1], "all": [0.1, 0.1, 0.1]}
    results = _results(mlm, downstream={arm: [0.5, 0.6, 0.7] for arm in mlm})
    for seed, accuracies in enumerate(([0.1, 0.2], [0.2, 0.3], [0.3, 0.4])):
        results[f"sharing/all/seed{seed}"]["training_curve"] = training_curve(
            _write_training_curve(tmp_path / f"all{seed}", accuracies))
    assert results["sharing/all/seed1"]["training_curve"] == {"step": [10, 20],
                                                              "masked_lm_accuracy": pytest.approx([0.2, 0.3]),
                                                              "masked_lm_loss": pytest.approx([0.8, 0.7])}
    baselines = {**BASELINES, "downstream/documents": 0.25}
    section = sharing.sharing_section(results, baselines, MARGINS)
    paths = write_report(str(tmp_path), [section], results, scale="made up", baselines=baselines,
                         margins_note="These margins were made up for a test.")
    report = open(paths["report"], encoding="utf-8").read()
    assert "## Cross-layer sharing (paper Table 4)" in report
    # Every claim once more in the table of verdicts at the top, with the numbers it was judged on.
    assert report.index("## Verdicts") < report.index("## Cross-layer sharing (paper Table 4)")
    # attention - none, seed by seed: 0, -0.01, -0.05 against the margin 0.01, by scipy's one-sided t-tests.
    differences = [0.0, -0.01, -0.05]
    error = np.std(differences, ddof=1) / math.sqrt(3)
    lower, upper = -0.02 - scipy.stats.t.ppf(0.95, 2) * error, -0.02 + scipy.stats.t.ppf(0.95, 2) * error
    p_value = scipy.stats.ttest_1samp(differences, -0.01, alternative="greater").pvalue
    free = section["claims"]["attention_sharing_is_free"]
    assert free["confidence_interval"] == pytest.approx([lower, upper]) and free["p_value"] == pytest.approx(p_value)
    assert (f"| Cross-layer sharing (paper Table 4) | sharing the attention costs nothing (MLM: attention-shared - "
            f"not shared above -0.01, the budget's margin) | **inside the noise** | -0.0200 | "
            f"{np.std(differences, ddof=1):.4f} | {lower:+.4f} to {upper:+.4f} (90%) | {p_value:.4f} | "
            f"{free['holm_p_value']:.4f} | {free['detectable_margin']:.4f} (margin) |") in report
    assert report.count("| Cross-layer sharing (paper Table 4) |") == len(section["claims"])
    assert (f"the budget's margin): **inside the noise** (difference -0.0200, one-sided 95% bounds {lower:+.4f} and "
            f"{upper:+.4f} against the margin -0.01, p {p_value:.4f}") in report
    # The family: every claim judged by a test, an ordering (here M=1 > M=2 at 2 layers) by each of its pairs.
    tested = [test for claim in section["claims"].values() for test in claim.get("pairs", [claim])
              if "p_value" in test]
    assert len(tested) == 6
    assert f"each pair of an ordering: {len(tested)} tests)" in report
    smallest = min(claim["p_value"] for claim in tested)
    assert min(claim["holm_p_value"] for claim in tested) == pytest.approx(min(1.0, len(tested) * smallest))
    assert "These margins were made up for a test." in report and "Welch's t-test" in report
    assert os.path.getsize(tmp_path / "sharing_accuracy.png") > 1000
    assert os.path.getsize(tmp_path / "sharing_learning_curves.png") > 1000
    assert "![Cross-layer sharing (paper Table 4)](sharing_learning_curves.png)" in report
    assert experiment_curves(results, "sharing") == {"all": {"steps": [10, 20],
                                                             "masked_lm_accuracy": pytest.approx([0.2, 0.3]),
                                                             "masked_lm_loss": pytest.approx([0.8, 0.7])}}
    document = json.load(open(paths["results"], encoding="utf-8"))
    assert document["arms"]["sharing/ffn"]["seed0"]["masked_lm_accuracy"] == 0.1
    assert document["arms"]["sharing/ffn"]["seed2"]["downstream/documents/accuracy"] == 0.7
    assert set(document["claims"]) == {f"sharing/{claim}{suffix}" for suffix in ("", "_downstream") for claim in (
        "attention_sharing_is_free", "ffn_sharing_costs_most", "smaller_groups_are_better")}
    assert document["claims"]["sharing/attention_sharing_is_free"]["holm_p_value"] == free["holm_p_value"]
    one_seed = _results({arm: [0.2] for arm in mlm})
    assert "cannot be judged (1 seed, 3 needed)" in report_text([sharing.sharing_section(one_seed, BASELINES)],
                                                                scale="made up", baselines=BASELINES)


def test_the_dev_sets_paragraph_gives_each_scored_tasks_binomial_sd_at_the_trainings_mean_accuracy():
    def scored(accuracy, **more):
        return {"downstream": {"packages": {"accuracy": accuracy}, "packages_probe": {"accuracy": 0.5}}, **more}

    # A reused training counts once; a task that no training scored (sst-2) is left out.
    results = {"sharing/none/seed0": scored(0.2), "sharing/all/seed0": scored(0.4),
               "dropout/dropout0/seed0": scored(0.4, trained_as="sharing/all/seed0")}
    text = dev_sets_text({"downstream/packages": 400, "downstream/packages_probe": 400, "downstream/sst-2": 872},
                         results)
    assert text.endswith(f": packages, 400 examples (at the mean accuracy 0.300, binomial sd "
                         f"{math.sqrt(0.3 * 0.7 / 400):.3f}); packages_probe, 400 examples (at the mean accuracy "
                         f"0.500, binomial sd {math.sqrt(0.25 / 400):.3f}).")
    assert dev_sets_text({}, results) == "" and dev_sets_text({"downstream/sst-2": 872}, results) == ""
    report = report_text([], scale="tiny", baselines=BASELINES, dev_sets=text)
    assert report.index("**Majority baselines.**") < report.index(text) < report.index("**Verdicts.**")


def test_unknown_experiments_are_named():
    assert experiment_names(["all"]) == ["sharing", "sop_vs_nsp", "layer_transitions", "embedding_size", "dropout",
                                         "speed"]
    assert experiment_names(["speed", "sop_vs_nsp"]) == ["sop_vs_nsp", "speed"]
    with pytest.raises(ValueError, match="--experiment=sharing,sped: sped is not available; available: sharing, "
                                         "sop_vs_nsp, layer_transitions, embedding_size, dropout, speed, all"):
        experiment_names(["sharing", "sped"])


def _pure_results(accuracies):
    """{arm: [(mlm, nsp, sop) per seed]} as run_arm writes them under pure_eval."""
    return {f"sop_vs_nsp/{arm}/seed{seed}": {"parameters": 1, "pure_eval": {
                "sop": {"masked_lm_accuracy": mlm, "sentence_order_accuracy": sop},
                "nsp": {"masked_lm_accuracy": mlm, "sentence_order_accuracy": nsp}}}
            for arm, seeds in accuracies.items() for seed, (mlm, nsp, sop) in enumerate(seeds)}


def test_sop_vs_nsp_fails_an_arm_only_on_what_it_trained_on_and_judges_the_claims():
    seeds = {"none": [(0.20, 0.50, 0.50)] * 3,
             "nsp": [(0.20, 0.80, 0.51), (0.21, 0.81, 0.50), (0.22, 0.82, 0.49)],
             "sop": [(0.20, 0.70, 0.80), (0.21, 0.71, 0.81), (0.22, 0.72, 0.82)]}
    section = sop_vs_nsp.sop_vs_nsp_section(_pure_results(seeds), BASELINES)
    assert section["arms"]["none"]["status"] == "ok"  # at chance on both sets, but it trained on neither
    assert section["claims"]["nsp_does_not_solve_sop"]["verdict"] == "holds"
    assert section["claims"]["nsp_does_not_solve_sop"]["difference"] == pytest.approx(0.31)
    assert section["claims"]["sop_solves_nsp"]["verdict"] == "holds"
    seeds["sop"] = [(0.2, 0.5, 0.5)] * 3
    failed = sop_vs_nsp.sop_vs_nsp_section(_pure_results(seeds), BASELINES)
    assert failed["arms"]["sop"]["status"] == "failed: sop_accuracy not above the majority baseline"
    assert failed["claims"]["sop_solves_nsp"]["verdict"] == "not judged: failed run(s) sop"
    assert ("| sop | 54.0 | 78.9 | 86.5 | 80.1 | 0.200 ± 0.000 | 0.500 ± 0.000 | 0.500 ± 0.000 | pretraining failed"
            in failed["table"])
    assert not [claim for claim in section["claims"] if claim.endswith("_downstream")]


def test_sop_vs_nsp_judges_the_downstream_score_and_fails_a_run_not_above_its_baseline():
    seeds = {"none": [(0.20, 0.50, 0.50)] * 3, "nsp": [(0.20, 0.80, 0.50)] * 3, "sop": [(0.20, 0.70, 0.80)] * 3}
    downstream = {"none": [0.40, 0.42, 0.41], "nsp": [0.50, 0.52, 0.51], "sop": [0.45, 0.47, 0.46]}
    results = _pure_results(seeds)
    for key, result in results.items():
        _, arm, seed = key.split("/")
        result["downstream"] = {"documents": {"accuracy": downstream[arm][int(seed[4:])]}}
    baselines = {**BASELINES, "downstream/documents": 0.25}
    section = sop_vs_nsp.sop_vs_nsp_section(results, baselines)
    assert section["claims"]["sop_beats_nsp_downstream"]["verdict"] == "does not hold"
    assert section["claims"]["sop_beats_nsp_downstream"]["difference"] == pytest.approx(-0.05)
    assert section["claims"]["sop_beats_none_downstream"]["verdict"] == "holds"
    assert section["arms"]["sop"]["downstream/documents"]["mean"] == pytest.approx(0.46)
    assert ("| sop | 54.0 | 78.9 | 86.5 | 80.1 | 0.200 ± 0.000 | 0.700 ± 0.000 | 0.800 ± 0.000 | 0.460 ± 0.010 | "
            "pretraining ok; downstream ok |") in section["table"]
    assert "| majority baseline | | | | | 0.050 | 0.500 | 0.500 | 0.250 | |" in section["table"]
    assert "Downstream majority baselines (dev): documents 0.250." in section["table"]
    failed = sop_vs_nsp.sop_vs_nsp_section(results, {**baselines, "downstream/documents": 0.405})
    assert failed["arms"]["none"]["downstream_status"] == "failed: documents not above the majority baseline"
    assert failed["claims"]["sop_beats_none_downstream"]["verdict"] == "not judged: failed run(s) none"
    assert failed["claims"]["sop_beats_nsp_downstream"]["verdict"] == "does not hold"


def _transition_results(l2_by_share_type, mlm=0.2):
    def depths(values):
        return [{"mean": value, "sd": 0.1} for value in values]

    results = {}
    for share_type, per_seed in l2_by_share_type.items():
        for seed, l2 in enumerate(per_seed):
            result = {"eval": {"masked_lm_accuracy": mlm},
                      "transitions": {"l2_distance": depths(l2), "cosine_similarity": depths([0.9] * len(l2))}}
            if share_type == "all":
                deeper = l2 + [l2[-1] / 2, l2[-1] / 4]
                result["transitions_twice_as_deep"] = {"l2_distance": depths(deeper),
                                                       "cosine_similarity": depths([0.9] * len(deeper))}
            results[f"layer_transitions/{share_type}/seed{seed}"] = result
    return results


def test_layer_transitions_measures_smoothness_and_looks_for_a_fixed_point():
    assert layer_transitions.roughness([9.1, 5.2, 3.1, 2.3]) == pytest.approx((3.9 + 2.1 + 0.8) / 3)
    results = _transition_results({"all": [[4.0, 3.0], [4.1, 3.0], [3.9, 3.0]],
                                   "none": [[6.0, 2.0], [6.1, 2.0], [5.9, 2.0]]})
    section = layer_transitions.layer_transitions_section(results, BASELINES)
    assert section["claims"]["all_shared_is_smoother"]["verdict"] == "holds"
    assert section["claims"]["all_shared_is_smoother"]["difference"] == pytest.approx(3.0)
    assert section["claims"]["no_fixed_point"]["verdict"] == (
        "holds within 4 applications: the last L2 is 18% to 19% of the first over 3 seed(s)")
    assert "| 4 |  | 0.750 ± 0.100 / 0.900 |  |" in section["table"]
    one_seed = layer_transitions.layer_transitions_section(
        _transition_results({"all": [[4.0, 0.01]], "none": [[6.0, 2.0]]}), BASELINES)
    assert one_seed["claims"]["no_fixed_point"]["verdict"] == (
        "cannot be judged (1 seed(s), 3 needed); the last L2 is 0% of the first over 1 seed(s)")
    # A fixed point is judged seed by seed: one seed reaching it is not enough either way.
    mixed = layer_transitions.layer_transitions_section(_transition_results(
        {"all": [[4.0, 3.0], [4.1, 0.01], [3.9, 3.0]], "none": [[6.0, 2.0], [6.1, 2.0], [5.9, 2.0]]}), BASELINES)
    assert mixed["claims"]["no_fixed_point"]["verdict"] == (
        "inside the noise: the last L2 is 0% to 19% of the first over 3 seed(s), below 1% on some seeds only")
    failed = layer_transitions.layer_transitions_section(
        _transition_results({"all": [[4.0, 3.0]], "none": [[6.0, 2.0]]}, mlm=0.01), BASELINES)
    assert failed["claims"]["all_shared_is_smoother"]["verdict"] == "not judged: failed run(s) all, none"


def test_a_claim_with_bars_stays_in_its_cell_of_the_verdict_table():
    claims = {"smoother": {"claim": "smoother (mean |ΔL2| between depths)", "verdict": "holds", "difference": 0.3,
                           "spread": 0.1, "confidence_interval": [0.05, 0.55], "p_value": 0.02, "holm_p_value": 0.06,
                           "detectable_difference": 0.2}}
    row = verdict_table([{"title": "Layer transitions", "claims": claims}]).splitlines()[-1]
    cells = re.split(r"(?<!\\)\|", row)[1:-1]
    assert [cell.strip() for cell in cells] == ["Layer transitions", r"smoother (mean \|ΔL2\| between depths)",
                                                "**holds**", "+0.3000", "0.1000", "+0.0500 to +0.5500", "0.0200",
                                                "0.0600", "0.2000"]


def _kept_sharing_run(output_dir, seeds=(0, 1, 2)):
    """A made-up finished sharing run at L=2 (the grouped arms are none and all) as a reproduction keeps it: each
    arm's arm_result.json and downstream_result.json, the all-shared arm's also standing for a reused arm of the
    dropout experiment, and report_inputs.json. Returns the run's results as run_arms gives them."""
    mlm = {"none": 0.30, "attention": 0.29, "ffn": 0.25, "all": 0.24}
    config = {"num_hidden_layers": 2}
    results = {}
    for arm, accuracy in mlm.items():
        for seed in seeds:
            directory = os.path.join(output_dir, "arms", "sharing", arm, f"seed{seed}")
            os.makedirs(os.path.join(directory, "downstream", "documents"))
            arm_result = {"parameters": 1000, "eval": {"masked_lm_accuracy": accuracy + 0.003 * seed,
                                                       "sentence_order_accuracy": 0.8}}
            write_json(os.path.join(directory, "arm_result.json"), arm_result)
            downstream = {"accuracy": 0.5 + 0.01 * seed}
            write_json(os.path.join(directory, "downstream", "documents", "downstream_result.json"), downstream)
            result = {**arm_result, "directory": directory, "config": config, "downstream": {"documents": downstream}}
            results[f"sharing/{arm}/seed{seed}"] = {**result, "trained_as": f"sharing/{arm}/seed{seed}"}
    return results


def test_a_report_is_written_from_the_kept_records_alone(tmp_path):
    output_dir = str(tmp_path / "run")
    results = _kept_sharing_run(output_dir)
    baselines = {**BASELINES, "downstream/documents": 0.25}
    section = {"name": "learning_rate", "title": "Learning rate (chosen before the arms)", "table": "| lr |",
               "claims": {}, "arms": {}}
    budget = dataclasses.replace(budget_for("small"), non_inferiority_margins=(
        ("masked_lm_accuracy", 0.005), ("downstream", 0.005)), non_inferiority_margins_note="Made up for a test.")
    path = record_report_inputs(output_dir, budget, ["sharing"], results, baselines, "made up", "no limits", section)
    inputs = read_json(path)
    assert inputs["arms"]["sharing/all/seed2"]["result"] == os.path.join("arms", "sharing", "all", "seed2",
                                                                         "arm_result.json")
    assert inputs["non_inferiority_margins"] == {"masked_lm_accuracy": 0.005, "downstream": 0.005}
    assert inputs["non_inferiority_margins_note"] == "Made up for a test."
    # Kept files only: the directories' checkpoints and events never existed here.
    paths = write_report_from_records(output_dir)
    report = open(paths["report"], encoding="utf-8").read()
    assert report.index("## Learning rate") < report.index("## Cross-layer sharing")
    # attention - none is -0.01 on every seed: more than the margin of 0.005, without spread.
    assert "attention-shared - not shared above -0.005, the budget's margin): **does not hold**" in report
    assert "| ffn | 38M | 80.2 | 1,000 | 0.253 ± 0.003 | 0.800 ± 0.000 | 0.510 ± 0.010 |" in report
    document = read_json(paths["results"])
    assert document["baselines"] == baselines and set(document["arms"]) == {
        f"sharing/{arm}" for arm in ("none", "attention", "ffn", "all")}
    os.remove(path)
    with pytest.raises(FileNotFoundError, match=f"holds no {REPORT_INPUTS_NAME}, which a reproduction run writes "
                                                "before its report; rerun reproduce_paper there to write it"):
        write_report_from_records(output_dir)


def test_a_damaged_record_stops_the_report_command_in_one_line_naming_it(tmp_path, capsys):
    output_dir = str(tmp_path / "run")
    record_report_inputs(output_dir, budget_for("small"), ["sharing"], _kept_sharing_run(output_dir),
                         {**BASELINES, "downstream/documents": 0.25}, "made up", "no limits")
    damaged = os.path.join(output_dir, "arms", "sharing", "ffn", "seed1", "arm_result.json")
    with open(damaged, "w", encoding="utf-8") as handle:
        handle.write('{"eval": {"masked_lm_accuracy": 0.25,\n<<<<<<< HEAD\n')
    with pytest.raises(SystemExit) as stopped:
        write_report_main([f"--output_dir={output_dir}"])
    assert str(stopped.value) == (f"error: {damaged} is damaged: it is not JSON (Expecting property name enclosed "
                                  "in double quotes at line 2, column 1); restore it from the repository that keeps "
                                  "it, or delete it and rerun to write it again.")
    assert not os.path.exists(os.path.join(output_dir, "REPORT.md"))


@pytest.mark.slow
def test_the_report_process_imports_no_tensorflow_and_finds_scipy_beside_site_packages(tmp_path):
    output_dir = str(tmp_path / "run")
    record_report_inputs(output_dir, budget_for("small"), ["sharing"], _kept_sharing_run(output_dir),
                         {**BASELINES, "downstream/documents": 0.25}, "made up", "no limits")
    paths = write_report_in_child(output_dir)
    assert paths == {"report": os.path.join(output_dir, "REPORT.md"), "results": os.path.join(output_dir,
                                                                                             "results.json")}
    assert "**does not hold**" in open(paths["report"], encoding="utf-8").read()
    # The experiment modules (their arms are declared where their sections are built) import neither TensorFlow
    # nor scipy, so that the training process can import them; the report's process imports scipy, not TensorFlow.
    check = ("import runpy, sys\n"
             "import albert_tf.experiments.sharing, albert_tf.experiments.sop_vs_nsp, albert_tf.experiments.dropout\n"
             "import albert_tf.experiments.embedding_size, albert_tf.experiments.layer_transitions\n"
             "import albert_tf.experiments.speed_report, albert_tf.experiments.report\n"
             "print('experiment modules:', sorted({'tensorflow', 'scipy'} & set(sys.modules)))\n"
             f"sys.argv = ['write_report', '--output_dir={output_dir}']\n"
             "runpy.run_module('albert_tf.experiments.write_report', run_name='__main__')\n"
             "print('report process:', sorted({'tensorflow', 'keras', 'scipy'} & set(sys.modules)))\n")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run([sys.executable, "-c", check], cwd=REPO_ROOT, env=environment, capture_output=True,
                               text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "experiment modules: []" in completed.stdout and "report process: ['scipy']" in completed.stdout


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["small", "medium"])
def test_a_committed_run_report_is_what_its_kept_records_give(tmp_path, budget):
    committed = os.path.join(REPO_ROOT, "paper_runs", budget)
    copy = str(tmp_path / budget)
    shutil.copytree(committed, copy, ignore=shutil.ignore_patterns("*.png", "data"))
    write_report_from_records(copy)
    for name in ("REPORT.md", "results.json"):
        assert open(os.path.join(copy, name), encoding="utf-8").read() == open(
            os.path.join(committed, name), encoding="utf-8").read(), name
    assert sorted(name for name in os.listdir(copy) if name.endswith(".png")) == sorted(
        name for name in os.listdir(committed) if name.endswith(".png"))
