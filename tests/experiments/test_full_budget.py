"""The full budget (the paper's settings) constructs for every experiment, and starts: an arm trains one step
through the runner with the full model, optimizer and schedule, but batch and sequence overridden tiny (a step of
4096 x 512 tokens at ALBERT-base is hours on a CPU)."""
import dataclasses

import pytest

from albert_tf.config import AlbertConfig
from albert_tf.experiments import embedding_size, speed
from albert_tf.experiments.budgets import budget_for
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.reproduce import EXPERIMENT_NAMES, EXPERIMENTS, _limits_text
from albert_tf.experiments.runner import ARM_RESULT_NAME, _pretraining_options, run_arm
from albert_tf.models.param_count import encoder_parameters
from tests.helpers import write_pretraining_records

FULL = budget_for("full")
ALBERT_BASE = AlbertConfig.from_preset("albert-base")


def _data(pattern):
    return PretrainingData(spm_model_file="unused.model", train_patterns={"sop": pattern, "nsp": pattern},
                           eval_pattern=pattern, pure_eval_patterns={"sop": pattern, "nsp": pattern},
                           holdout_text="unused.txt", document_classification_dir="unused")


def _plan():
    return {name: EXPERIMENTS[name](FULL.model, FULL.vocab_size, seeds=[0, 1, 2]) for name in EXPERIMENTS}


def test_the_full_budget_plans_every_experiment_at_the_papers_settings(tmp_path):
    assert set(EXPERIMENT_NAMES) == set(EXPERIMENTS) | {speed.NAME}
    # Every arm is ALBERT-base but for what its experiment changes.
    changed = {"share_type", "num_hidden_groups", "embedding_size", "hidden_dropout_prob",
               "attention_probs_dropout_prob"}
    for name, arms in _plan().items():
        assert len(arms) >= 6 and {arm.seed for arm in arms} == {0, 1, 2}, name
        for arm in arms:
            values = arm.config.to_dict()
            assert {key: value for key, value in values.items() if key not in changed} == {
                key: value for key, value in ALBERT_BASE.to_dict().items() if key not in changed}, arm.key
            options = _pretraining_options(str(tmp_path / arm.name), arm, FULL, _data("records"), "auto")
            assert (options.train_batch_size, options.max_seq_length, options.max_predictions_per_seq,
                    options.num_train_steps, options.num_warmup_steps, options.learning_rate, options.optimizer) == (
                4096, 512, 20, 125000, 3125, 0.00176, "lamb"), arm.key
    plan = {arm.key: arm for arms in _plan().values() for arm in arms}
    # ALBERT-base's exact counts (the paper's Table 4: 89M and 12M; BUILD_NOTES: its not-shared rows are ~1M low).
    assert encoder_parameters(plan["sharing/none/seed0"].config) == 89_650_176
    assert encoder_parameters(plan["sharing/all/seed0"].config) == 11_683_584
    assert embedding_size.embedding_sizes(FULL.model) == [16, 32, 64, 128]
    assert plan["dropout/dropout0.1/seed0"].config.hidden_dropout_prob == 0.1
    dropout_options = _pretraining_options("out", plan["dropout/dropout0/seed0"], FULL, _data("records"), "auto")
    assert (dropout_options.save_checkpoints_steps, dropout_options.keep_checkpoint_max) == (31250, 4 + 8)
    assert speed.speed_configs(FULL.speed)["albert-xxlarge"] == AlbertConfig.from_preset("albert-xxlarge")
    assert (FULL.speed.batch_size, FULL.speed.seq_length, FULL.speed.full_size) == (32, 512, True)


@pytest.mark.slow
def test_the_full_budget_starts_training(tmp_path):
    records = write_pretraining_records(str(tmp_path / "records.tfrecord"), num_records=16)
    tiny_shapes = dataclasses.replace(FULL, train_batch_size=2, max_seq_length=16, max_predictions_per_seq=3,
                                      num_train_steps=1, eval_batch_size=8, max_eval_steps=1)
    # ALBERT-base as the budget gives it, with dropout and a curve's checkpoints: one step (about 20 s on 2 cores;
    # the other arms differ only in what the plan test checks).
    arm = next(arm for arm in _plan()["dropout"] if arm.key == "dropout/dropout0.1/seed0")
    result = run_arm(arm, str(tmp_path / "arm"), tiny_shapes, _data(records), jit_compile=False)
    assert result["train"]["step"] == 1 and result["eval"]["global_step"] == 1
    assert (tmp_path / "arm" / ARM_RESULT_NAME).exists()
    assert result["parameters"] == 11_683_584
    assert result["curve"]["step"] == [1]


def test_the_report_says_what_each_budgets_scale_cannot_show():
    full, small, medium = _limits_text(FULL), _limits_text(budget_for("small")), _limits_text(budget_for("medium"))
    assert "The model, the data's size and the steps are the paper's; the downstream tasks are not." in full
    assert "fraction of ALBERT-base's size (4 of its 12 layers, H=256 of its 768, 4 of its 12 heads)" in small
    assert "the steps are the paper's" not in small and "At the paper's depth" not in small
    assert "one small classification task (and two GLUE tasks with --glue_data_dir)" in small
    # The medium budget has the paper's depth: it asks the sharing question as the paper does, at its own width.
    assert "(12 of its 12 layers, H=128 of its 768, 2 of its 12 heads)" in medium
    assert "a 20-way classification of held-out sentences with a linear probe beside it" in medium
    assert "At the paper's depth, sharing removes nearly the share of the parameters" in medium
    for text in (full, small, medium):
        assert "'inside the noise' says this run could not resolve a difference, not that the paper's claim is false" \
            in text
