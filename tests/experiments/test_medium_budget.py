"""The medium budget (albert_tf/experiments/budgets.py MEDIUM) as a plan: the sharing experiment's four share types
at the paper's depth, their runs' options, and what the budget's comment promises of its size."""
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.experiments.budgets import budget_for
from albert_tf.experiments.downstream import downstream_tasks
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.reproduce import ReproduceOptions, _experiment_arms, run_reproduction
from albert_tf.experiments.runner import _pretraining_options, training_order
from albert_tf.models.param_count import encoder_parameters

MEDIUM = budget_for("medium")
DATA = PretrainingData(spm_model_file="spm.model", train_patterns={"sop": "sop.tfrecord", "nsp": "nsp.tfrecord"},
                       eval_pattern="eval.tfrecord", pure_eval_patterns={}, holdout_text="unused.txt",
                       document_classification_dir="unused", holdout_packages="packages.txt")


def test_the_sharing_arms_are_the_four_share_types_at_twelve_layers():
    arms = _experiment_arms("sharing", MEDIUM, [0, 1])
    # Seed blocks, each in its own shuffled order.
    assert [arm.name + str(arm.seed) for arm in sorted(arms, key=training_order)] == [
        "all0", "none0", "ffn0", "attention0", "all1", "none1", "attention1", "ffn1"]
    assert {arm.name for arm in arms} == {"none", "attention", "ffn", "all"}
    for arm in arms:
        config = arm.config
        assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size, config.embedding_size,
                config.num_attention_heads, config.vocab_size) == (12, 128, 512, 64, 2, 8000)
        assert config.share_type == arm.name and arm.downstream
        options = _pretraining_options("out", arm, MEDIUM, DATA, "auto")
        assert (options.num_train_steps, options.train_batch_size, options.max_seq_length) == (12000, 32, 128)
        assert (options.num_warmup_steps, options.mixed_precision, options.optimizer) == (1200, "mixed_bfloat16",
                                                                                           "lamb")
    assert downstream_tasks(MEDIUM, None) == ["packages", "packages_probe"]


def test_sharing_removes_about_the_papers_share_of_parameters_and_each_sees_many_tokens():
    parameters = {share_type: encoder_parameters(AlbertConfig(vocab_size=MEDIUM.vocab_size, share_type=share_type,
                                                              **MEDIUM.model))
                  for share_type in ("none", "attention", "ffn", "all")}
    removed = {share_type: 1 - count / parameters["none"] for share_type, count in parameters.items()}
    assert removed == {"none": 0.0, "attention": pytest.approx(0.25, abs=0.01), "ffn": pytest.approx(0.49, abs=0.01),
                       "all": pytest.approx(0.74, abs=0.01)}
    tokens = MEDIUM.num_train_steps * MEDIUM.train_batch_size * MEDIUM.max_seq_length
    assert tokens / parameters["none"] == pytest.approx(16.7, abs=0.1)


def test_arms_that_name_no_arm_are_refused_before_anything_is_written(tmp_path):
    options = ReproduceOptions(str(tmp_path / "out"), experiments=["sharing"], budget="medium", arms=["group2"])
    with pytest.raises(ValueError, match=r"--arms=group2 names no arm of --experiment=sharing at --budget=medium\."):
        run_reproduction(options)
    assert not (tmp_path / "out").exists()
