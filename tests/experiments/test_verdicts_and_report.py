"""Verdicts from seed spreads, the sharing table's failed-run rule and the report files, on made-up results."""
import json
import os

import pytest

from albert_tf.experiments import layer_transitions, sharing, sop_vs_nsp
from albert_tf.experiments.report import write_report
from albert_tf.experiments.reproduce import experiment_names
from albert_tf.experiments.verdicts import judge_difference

BASELINES = {"masked_lm": 0.05, "sentence_order": 0.6, "masked_lm_pure": 0.05, "sop_pure": 0.5, "nsp_pure": 0.5}


def _results(mlm_by_share_type, sop=0.8):
    return {f"sharing/{share_type}/seed{seed}": {"parameters": 1000 + index, "eval": {
                "masked_lm_accuracy": value, "sentence_order_accuracy": sop}}
            for index, (share_type, values) in enumerate(mlm_by_share_type.items())
            for seed, value in enumerate(values)}


def test_a_difference_is_judged_against_the_larger_seed_spread():
    assert judge_difference([0.30, 0.31, 0.32], [0.20, 0.21, 0.22], expect_positive=True)["verdict"] == "holds"
    assert judge_difference([0.30, 0.31, 0.32], [0.20, 0.21, 0.22], expect_positive=False)["verdict"] == (
        "does not hold")
    noisy = judge_difference([0.30, 0.40, 0.20], [0.28, 0.29, 0.30], expect_positive=True)
    assert noisy["verdict"] == "inside the noise"
    assert noisy["spread"] == pytest.approx(0.1)
    assert judge_difference([0.3, 0.4], [0.1, 0.2], expect_positive=True)["verdict"] == (
        "cannot be judged (2 seeds, 3 needed)")


def test_sharing_claims_use_mlm_means_and_skip_failed_arms():
    section = sharing.sharing_section(_results({"none": [0.20, 0.21, 0.22], "attention": [0.20, 0.21, 0.22],
                                                "ffn": [0.10, 0.11, 0.12], "all": [0.04, 0.05, 0.05]}), BASELINES)
    assert section["claims"]["ffn_sharing_costs_most"]["verdict"] == "holds"
    assert section["claims"]["ffn_sharing_costs_most"]["difference"] == pytest.approx(0.10)
    assert section["claims"]["attention_sharing_is_free"]["verdict"] == "inside the noise"
    assert section["arms"]["all"]["status"] == "failed: not above the majority baseline"
    assert section["arms"]["ffn"]["status"] == "ok"
    assert "| all | 12M | 80.1 | 1,003 | 0.047 ± 0.006 |" in section["table"]
    failed = sharing.sharing_section(_results({share_type: [0.2] for share_type in sharing.SHARE_TYPES}, sop=0.6),
                                     BASELINES)
    assert failed["claims"]["ffn_sharing_costs_most"]["verdict"] == "not judged: failed run(s) attention, ffn"


def test_the_report_has_every_table_plot_and_results_key(tmp_path):
    results = _results({"none": [0.2], "attention": [0.2], "ffn": [0.1], "all": [0.1]})
    section = sharing.sharing_section(results, BASELINES)
    paths = write_report(str(tmp_path), [section], results, scale="made up", baselines=BASELINES)
    report = open(paths["report"], encoding="utf-8").read()
    assert "## Cross-layer sharing (paper Table 4)" in report and "cannot be judged (1 seed, 3 needed)" in report
    assert os.path.getsize(tmp_path / "sharing_accuracy.png") > 1000
    document = json.load(open(paths["results"], encoding="utf-8"))
    assert document["arms"]["sharing/ffn"]["seed0"]["masked_lm_accuracy"] == 0.1
    assert set(document["claims"]) == {"sharing/attention_sharing_is_free", "sharing/ffn_sharing_costs_most"}


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
    assert ("| sop | 54.0 | 78.9 | 86.5 | 80.1 | 0.200 ± 0.000 | 0.500 ± 0.000 | 0.500 ± 0.000 | failed"
            in failed["table"])


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
    assert section["claims"]["no_fixed_point"]["verdict"] == "holds: the distance stays above 0"
    assert "| 4 |  | 0.750 ± 0.100 / 0.900 |  |" in section["table"]
    one_seed = layer_transitions.layer_transitions_section(
        _transition_results({"all": [[4.0, 0.01]], "none": [[6.0, 2.0]]}), BASELINES)
    assert one_seed["claims"]["no_fixed_point"]["verdict"] == (
        "cannot be judged (1 seed(s), 3 needed); the distance approaches 0")
    failed = layer_transitions.layer_transitions_section(
        _transition_results({"all": [[4.0, 3.0]], "none": [[6.0, 2.0]]}, mlm=0.01), BASELINES)
    assert failed["claims"]["all_shared_is_smoother"]["verdict"] == "not judged: failed run(s) all, none"
