"""The small budget's plan (every experiment's arms at its model, steps, batch and precision) and the learning-rate
choice before the arms (albert_tf/experiments/learning_rate.py), with the training replaced by a made-up result so
nothing trains."""
import json
import os

import pytest

from albert_tf.experiments import learning_rate
from albert_tf.experiments.budgets import budget_for
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.report import report_text
from albert_tf.experiments.reproduce import EXPERIMENTS
from albert_tf.experiments.runner import ARM_RESULT_NAME, HELD_OUT_CURVE_POINTS, _pretraining_options

SMALL = budget_for("small")
DATA = PretrainingData(spm_model_file="unused.model", train_patterns={"sop": "sop-records", "nsp": "nsp-records"},
                       eval_pattern="eval-records", pure_eval_patterns={}, holdout_text="unused.txt",
                       document_classification_dir="unused")


def test_the_small_budget_plans_every_experiment_at_bert_mini_size():
    assert (SMALL.model["num_hidden_layers"], SMALL.model["hidden_size"], SMALL.model["embedding_size"],
            SMALL.max_seq_length) == (4, 256, 128, 128)
    arms = [arm for name in EXPERIMENTS for arm in EXPERIMENTS[name](SMALL.model, SMALL.vocab_size, [0, 1, 2])]
    assert len(arms) == 3 * 20 and {arm.seed for arm in arms} == {0, 1, 2}
    assert {arm.config.num_hidden_layers for arm in arms} == {4}
    assert sorted({arm.config.embedding_size for arm in arms}) == [16, 32, 64, 128]
    for arm in arms:
        options = _pretraining_options("out", arm, SMALL, DATA, "auto")
        assert (options.train_batch_size, options.max_seq_length, options.num_train_steps, options.num_warmup_steps,
                options.mixed_precision, options.optimizer) == (32, 128, 2000, 200, "mixed_bfloat16", "lamb"), arm.key
        assert (options.save_checkpoints_steps, options.keep_checkpoint_max) == (500, HELD_OUT_CURVE_POINTS + 8)
        assert options.input_file == f"{arm.train_data}-records"
    assert len(SMALL.learning_rate_candidates) >= 3 and SMALL.learning_rate_steps < SMALL.num_train_steps


def _fake_run_arm(scores, calls):
    def run_arm(arm, directory, budget, data, jit_compile):
        calls.append((arm.key, budget.learning_rate, budget.num_train_steps, budget.num_warmup_steps))
        result = {"eval": {"masked_lm_accuracy": scores[budget.learning_rate]}}
        os.makedirs(directory)
        with open(os.path.join(directory, ARM_RESULT_NAME), "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        return result
    return run_arm


def test_the_best_candidate_on_one_seed_is_every_arms_rate_and_a_rerun_keeps_the_trials(tmp_path, monkeypatch):
    scores = {0.0025: 0.20, 0.005: 0.26, 0.01: 0.26, 0.02: 0.05}
    calls = []
    monkeypatch.setattr(learning_rate, "run_arm", _fake_run_arm(scores, calls))
    budget, choice = learning_rate.choose_learning_rate(SMALL, str(tmp_path), DATA, seed=7)
    # A tie goes to the smaller rate; the trials are short runs of the budget's model with their own warm-up.
    assert budget.learning_rate == choice["chosen"] == 0.005
    assert budget.num_train_steps == SMALL.num_train_steps
    steps = SMALL.learning_rate_steps
    assert calls == [(f"learning_rate/lr{rate:g}/seed7", rate, steps, steps // 10) for rate in sorted(scores)]
    assert os.path.exists(tmp_path / "learning_rate" / "lr0.005" / "seed7" / ARM_RESULT_NAME)
    assert (choice["share_type"], choice["num_hidden_layers"], choice["steps"]) == ("all", 4, steps)

    monkeypatch.setattr(learning_rate, "run_arm", lambda *args: pytest.fail("a finished trial was trained again"))
    assert learning_rate.choose_learning_rate(SMALL, str(tmp_path), DATA, seed=7) == (budget, choice)

    section = learning_rate.learning_rate_section(choice)
    assert "| 0.005 | 0.2600 | chosen |" in section["table"] and "| 0.01 | 0.2600 |  |" in section["table"]
    assert set(section["measurements"]) == {f"learning_rate/lr{rate:g}" for rate in scores}
    assert "## Learning rate (chosen before the arms)" in report_text([section], "tiny", {})


def test_a_budget_without_candidates_keeps_its_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(learning_rate, "run_arm", lambda *args: pytest.fail("nothing should train"))
    smoke = budget_for("smoke")
    assert learning_rate.choose_learning_rate(smoke, str(tmp_path), DATA, seed=0) == (smoke, {})
