"""The embedding-size and dropout experiments on made-up results: their arms, tables, claims and the report's
plots and results.json keys."""
import json
import os

import pytest

from albert_tf.experiments import dropout, embedding_size
from albert_tf.experiments.budgets import SMOKE
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.report import write_report
from albert_tf.experiments.runner import HELD_OUT_CURVE_POINTS, PREEMPTION_CHECKPOINTS_KEPT, _pretraining_options

BASELINES = {"masked_lm": 0.05, "sentence_order": 0.6}
SMALL_MODEL = dict(embedding_size=128, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                   intermediate_size=1024)


def _data():
    return PretrainingData(spm_model_file="unused.model", train_patterns={"sop": "records", "nsp": "records"},
                           eval_pattern="records", pure_eval_patterns={}, holdout_text="unused.txt",
                           document_classification_dir="unused")


def test_embedding_sizes_are_the_budgets_e_and_its_halvings_not_below_eight():
    assert embedding_size.embedding_sizes(SMALL_MODEL) == [16, 32, 64, 128]
    assert embedding_size.embedding_sizes({**SMALL_MODEL, "embedding_size": 16}) == [8, 16]
    assert embedding_size.embedding_sizes({**SMALL_MODEL, "embedding_size": 6}) == [6]
    arms = embedding_size.embedding_size_arms(SMALL_MODEL, vocab_size=500, seeds=[0, 1])
    assert len(arms) == 16 and len({arm.key for arm in arms}) == 16
    arm = next(arm for arm in arms if arm.key == "embedding_size/none_E32/seed1")
    assert (arm.config.share_type, arm.config.embedding_size, arm.config.hidden_size, arm.config.vocab_size) == (
        "none", 32, 256, 500)


def _embedding_results(mlm):
    """{(share_type, E): [MLM per seed]} as run_arm writes it."""
    return {f"embedding_size/{share_type}_E{size}/seed{seed}": {
                "parameters": 1000 * size + (share_type == "none"),
                "eval": {"masked_lm_accuracy": value, "sentence_order_accuracy": 0.7}}
            for (share_type, size), values in mlm.items() for seed, value in enumerate(values)}


def test_embedding_size_judges_best_at_the_budgets_e_and_larger_is_better_not_shared():
    mlm = {("all", 16): [0.20, 0.21, 0.22], ("all", 32): [0.24, 0.25, 0.26], ("all", 64): [0.22, 0.23, 0.24],
           ("all", 128): [0.30, 0.31, 0.32],
           ("none", 16): [0.30, 0.31, 0.32], ("none", 32): [0.30, 0.31, 0.32], ("none", 64): [0.30, 0.31, 0.32],
           ("none", 128): [0.30, 0.32, 0.34]}
    section = embedding_size.embedding_size_section(_embedding_results(mlm), BASELINES)
    best = section["claims"]["all_shared_best_at_budget_embedding_size"]
    assert best["compared"] == ["all_E128", "all_E32"]  # the best smaller E, not the next one
    assert best["verdict"] == "holds" and best["difference"] == pytest.approx(0.06)
    larger = section["claims"]["not_shared_larger_is_better"]
    assert larger["verdict"] == "inside the noise" and larger["difference"] == pytest.approx(0.01)
    # The paper's figure sits beside ours where the paper swept the same E (64 and 128), a dash elsewhere.
    assert "| all-shared | 128 | 12M | 80.1 | 128,000 | 0.310 ± 0.010 | 0.700 ± 0.000 | pretraining ok |" in section[
        "table"]
    assert "| not shared | 16 | - | - | 16,001 |" in section["table"]
    sizes, means, _ = section["line_plots"][0]["lines"]["not shared"]
    assert sizes == [16, 32, 64, 128] and means[-1] == pytest.approx(0.32)

    mlm[("all", 32)] = [0.04, 0.05, 0.06]
    failed = embedding_size.embedding_size_section(_embedding_results(mlm), BASELINES)
    assert failed["arms"]["all_E32"]["status"] == "failed: MLM accuracy not above the majority baseline"
    assert failed["claims"]["all_shared_best_at_budget_embedding_size"]["compared"] == ["all_E128", "all_E64"]
    assert failed["claims"]["all_shared_best_at_budget_embedding_size"]["verdict"] == "holds"


def _with_downstream(results, accuracies):
    """`results` with a documents dev accuracy per arm ({arm: [per seed]})."""
    for key, result in results.items():
        _, arm, seed = key.split("/")
        result["downstream"] = {"documents": {"accuracy": accuracies[arm][int(seed[4:])]}}
    return results


def test_embedding_size_judges_both_claims_on_the_downstream_score_too():
    mlm = {(share_type, size): [0.20, 0.21, 0.22] for share_type in ("all", "none") for size in (16, 32, 64, 128)}
    scores = {f"{share_type}_E{size}": [0.50, 0.51, 0.52] for share_type in ("all", "none")
              for size in (16, 32, 64, 128)}
    scores["all_E64"] = [0.60, 0.61, 0.62]
    scores["none_E128"] = [0.70, 0.71, 0.72]
    baselines = {**BASELINES, "downstream/documents": 0.0625}
    section = embedding_size.embedding_size_section(_with_downstream(_embedding_results(mlm), scores), baselines)
    best = section["claims"]["all_shared_best_at_budget_embedding_size_downstream"]
    assert best["compared"] == ["all_E128", "all_E64"] and best["verdict"] == "does not hold"
    assert best["difference"] == pytest.approx(-0.10)
    assert section["claims"]["not_shared_larger_is_better_downstream"]["verdict"] == "holds"
    assert section["claims"]["all_shared_best_at_budget_embedding_size"]["verdict"] == "inside the noise"
    assert ("| not shared | 128 | 89M | 81.7 | 128,001 | 0.210 ± 0.010 | 0.700 ± 0.000 | 0.710 ± 0.010 | pretraining "
            "ok; downstream ok |") in section["table"]
    assert "Downstream majority baselines (dev): documents 0.062." in section["table"]
    scores["all_E16"] = [0.05, 0.5, 0.5]
    failed = embedding_size.embedding_size_section(_with_downstream(_embedding_results(mlm), scores), baselines)
    assert failed["arms"]["all_E16"]["downstream_status"] == "failed: documents not above the majority baseline"
    assert failed["claims"]["all_shared_best_at_budget_embedding_size"]["verdict"] == "inside the noise"
    assert failed["claims"]["not_shared_larger_is_better_downstream"]["verdict"] == "holds"


def _dropout_results(curves):
    """{rate: [MLM curve per seed]} at steps 10..40, the last point the final figure."""
    return {f"dropout/dropout{rate:g}/seed{seed}": {
                "parameters": 1, "eval": {"masked_lm_accuracy": curve[-1], "sentence_order_accuracy": 0.7},
                "curve": {"step": [10, 20, 30, 40], "masked_lm_accuracy": curve, "masked_lm_loss": [5.0] * 4}}
            for rate, per_seed in curves.items() for seed, curve in enumerate(per_seed)}


def test_dropout_arms_differ_only_in_dropout_and_keep_a_curve():
    arms = dropout.dropout_arms(SMALL_MODEL, vocab_size=500, seeds=[0])
    assert [arm.name for arm in arms] == ["dropout0", "dropout0.1"]
    assert [(arm.config.hidden_dropout_prob, arm.config.attention_probs_dropout_prob) for arm in arms] == [
        (0.0, 0.0), (0.1, 0.1)]
    assert arms[0].config.to_dict() == {**arms[1].config.to_dict(), "hidden_dropout_prob": 0.0,
                                        "attention_probs_dropout_prob": 0.0}
    # Their held-out curve: the scheduled checkpoints every arm keeps (runner.HELD_OUT_CURVE_POINTS), each
    # evaluated, with room for checkpoints a SIGTERM saves in between.
    options = [_pretraining_options("out", arm, SMOKE, _data(), "auto") for arm in arms]
    assert {(option.save_checkpoints_steps, option.keep_checkpoint_max) for option in options} == {
        (SMOKE.num_train_steps // HELD_OUT_CURVE_POINTS, HELD_OUT_CURVE_POINTS + PREEMPTION_CHECKPOINTS_KEPT)}


def test_dropout_section_has_curves_final_figures_and_a_verdict(tmp_path):
    curves = {0.0: [[0.1, 0.2, 0.3, 0.40], [0.1, 0.2, 0.3, 0.41], [0.1, 0.2, 0.3, 0.42]],
              0.1: [[0.1, 0.15, 0.2, 0.30], [0.1, 0.15, 0.2, 0.31], [0.1, 0.15, 0.2, 0.32]]}
    results = _dropout_results(curves)
    section = dropout.dropout_section(results, BASELINES)
    claim = section["claims"]["removing_dropout_helps"]
    assert claim["verdict"] == "holds" and claim["difference"] == pytest.approx(0.10)
    assert section["arms"]["dropout0.1"]["curve"]["mean"] == pytest.approx([0.1, 0.15, 0.2, 0.31])
    assert section["arms"]["dropout0.1"]["curve"]["sd"][-1] == pytest.approx(0.01)
    assert ("| 0.1 | 90.4 | 0.310 ± 0.010 | 0.700 ± 0.000 | 0.100, 0.150, 0.200, 0.310 | pretraining ok |"
            in section["table"])
    assert "(steps 10, 20, 30, 40)" in section["table"] and "cannot show" in section["table"]
    assert "removing_dropout_helps_downstream" not in section["claims"]
    with_downstream = dropout.dropout_section(_with_downstream(
        _dropout_results(curves), {"dropout0": [0.3, 0.3, 0.3], "dropout0.1": [0.4, 0.41, 0.42]}),
        {**BASELINES, "downstream/documents": 0.25})
    downstream_claim = with_downstream["claims"]["removing_dropout_helps_downstream"]
    assert downstream_claim["verdict"] == "does not hold" and downstream_claim["difference"] == pytest.approx(-0.11)
    assert with_downstream["claims"]["removing_dropout_helps"]["verdict"] == "holds"
    assert "| 0.300 ± 0.000 | pretraining ok; downstream ok |" in with_downstream["table"]
    reversed_curves = {0.0: curves[0.1], 0.1: curves[0.0]}
    assert dropout.dropout_section(_dropout_results(reversed_curves), BASELINES)["claims"][
        "removing_dropout_helps"]["verdict"] == "does not hold"

    embedding_results = _embedding_results({(share_type, size): [0.2] for share_type in ("all", "none")
                                            for size in (8, 16)})
    sections = [embedding_size.embedding_size_section(embedding_results, BASELINES), section]
    paths = write_report(str(tmp_path), sections, {**results, **embedding_results}, "made up", BASELINES)
    for plot in ("embedding_size_mlm.png", "dropout_curves.png"):
        assert os.path.getsize(tmp_path / plot) > 1000
    report = open(paths["report"], encoding="utf-8").read()
    assert "## Embedding size (paper Table 3)" in report
    assert "![Dropout (paper section 4.8)](dropout_curves.png)" in report
    document = json.load(open(paths["results"], encoding="utf-8"))
    assert document["arms"]["dropout/dropout0"]["seed2"]["curve/masked_lm_accuracy"] == [0.1, 0.2, 0.3, 0.42]
    assert set(document["claims"]) == {"dropout/removing_dropout_helps",
                                       "embedding_size/all_shared_best_at_budget_embedding_size",
                                       "embedding_size/not_shared_larger_is_better"}
