"""Arms that need the same training are trained once (albert_tf/experiments/runner.py): which arms group together at
the smoke and small budgets, which directory holds a group's training, and a run over finished trainings that
trains nothing, adds no evaluation it already has and says in the report which rows are reused."""
import json
import os

from albert_tf.experiments.budgets import budget_for
from albert_tf.experiments.arms import reused_trainings
from albert_tf.experiments.reproduce import EXPERIMENTS
from albert_tf.experiments.report import report_text
from albert_tf.experiments.runner import (ARM_RESULT_NAME, arm_directory, held_out_curve_steps, run_arms, training_arm,
                                         trainings)


def _all_arms(budget, seeds=(0,)):
    return [arm for name in EXPERIMENTS for arm in EXPERIMENTS[name](budget.model, budget.vocab_size, seeds)]


def _groups(budget):
    return {group[0].key: [arm.key for arm in group[1:]] for group in trainings(_all_arms(budget))}


def test_the_smoke_budgets_fifteen_arms_are_nine_trainings():
    groups = _groups(budget_for("smoke"))
    assert len(groups) == 9 and sum(len(reusers) for reusers in groups.values()) == 6
    # The budget's model is all-shared at E=16 without dropout; SOP is its objective.
    assert groups["sharing/all/seed0"] == ["sop_vs_nsp/sop/seed0", "layer_transitions/all/seed0",
                                           "embedding_size/all_E16/seed0", "dropout/dropout0/seed0"]
    assert groups["sharing/none/seed0"] == ["layer_transitions/none/seed0", "embedding_size/none_E16/seed0"]
    # Another objective, sentence loss weight, embedding size or dropout is another training.
    for alone in ("sop_vs_nsp/none/seed0", "sop_vs_nsp/nsp/seed0", "embedding_size/all_E8/seed0",
                  "dropout/dropout0.1/seed0", "sharing/attention/seed0", "sharing/ffn/seed0"):
        assert groups[alone] == []


def test_the_small_budgets_twenty_arms_a_seed_are_fourteen_trainings():
    budget = budget_for("small")
    groups = trainings(_all_arms(budget, seeds=(0, 1, 2)))
    assert len(groups) == 3 * 14
    assert {arm.seed for group in groups for arm in group} == {0, 1, 2}
    assert all(len({arm.seed for arm in group}) == 1 for group in groups)
    assert [arm.key for arm in next(group for group in groups if group[0].key == "sharing/none/seed2")] == [
        "sharing/none/seed2", "layer_transitions/none/seed2", "embedding_size/none_E128/seed2"]


def _finish(directory, arm, **evaluations):
    os.makedirs(directory, exist_ok=True)
    result = {"arm": arm.name, "seed": arm.seed, "parameters": 10, "eval": {"masked_lm_accuracy": 0.2},
              "train": {"step": 40}, "curve": {"step": [40], "masked_lm_accuracy": [0.2]}, **evaluations}
    with open(os.path.join(directory, ARM_RESULT_NAME), "w", encoding="utf-8") as handle:
        json.dump(result, handle)


def test_a_finished_training_in_any_of_its_arms_directories_is_kept_for_all_of_them(tmp_path, caplog):
    budget = budget_for("smoke")
    arms = _all_arms(budget)
    arms_dir = str(tmp_path / "arms")
    groups = trainings(arms)
    # The all-shared group's training was finished by a run of the dropout experiment alone, in its directory.
    all_shared = next(group for group in groups if group[0].key == "sharing/all/seed0")
    dropout0 = next(arm for arm in all_shared if arm.experiment == "dropout")
    owner = training_arm(all_shared, arms_dir)
    assert owner.key == "sharing/all/seed0" and owner.evaluate_pure_sets and owner.measure_transitions
    for group in groups:
        first = dropout0 if group is all_shared else group[0]
        _finish(arm_directory(arms_dir, first), first, pure_eval={"sop": {}, "nsp": {}},
                transitions={"l2_distance": []}, transitions_twice_as_deep={"l2_distance": []})
    assert training_arm(all_shared, arms_dir).key == "dropout/dropout0/seed0"
    written = {group[0].key: os.path.getmtime(os.path.join(arm_directory(arms_dir, training_arm(group, arms_dir)),
                                                           ARM_RESULT_NAME)) for group in groups}

    with caplog.at_level("INFO", logger="absl"):
        results = run_arms(arms, arms_dir, budget, data=None, jit_compile=False)
    assert "Arms: 15, in 9 trainings (6 arms reuse another arm's training); trainings: 9 finished and kept, 0 to run" \
        in caplog.text
    assert set(results) == {arm.key for arm in arms}
    assert results["sop_vs_nsp/sop/seed0"]["trained_as"] == "dropout/dropout0/seed0"
    assert results["sop_vs_nsp/sop/seed0"]["directory"] == arm_directory(arms_dir, dropout0)
    assert results["sop_vs_nsp/sop/seed0"]["config"] == results["sharing/all/seed0"]["config"]
    assert results["sop_vs_nsp/nsp/seed0"]["trained_as"] == "sop_vs_nsp/nsp/seed0"
    assert {group[0].key: os.path.getmtime(os.path.join(arm_directory(arms_dir, training_arm(group, arms_dir)),
                                                        ARM_RESULT_NAME)) for group in groups} == written

    reused = reused_trainings({key: value for key, value in results.items() if key.startswith("sharing/")})
    assert reused == {"sharing/all": "dropout/dropout0"}
    section = {"name": "sharing", "title": "Sharing", "table": "| a |", "claims": {}, "reused": reused}
    assert "Reused trainings (the same model, records, objective and seed" in report_text([section], "tiny", {})
    assert "sharing/all is dropout/dropout0." in report_text([section], "tiny", {})


def test_the_held_out_curve_has_the_scheduled_steps_whatever_else_was_kept():
    assert held_out_curve_steps(2000) == [500, 1000, 1500, 2000]
    assert held_out_curve_steps(40) == [10, 20, 30, 40]
    assert held_out_curve_steps(3) == [1, 2, 3]
