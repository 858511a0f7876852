"""albert_tf.tasks.finetuning: the shared driver, on a toy task (ALBERT end to end: test_glue, test_race)."""
import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks import finetuning
from albert_tf.tasks.classification_functions import regression_loss_fn, regression_predict_fn, regression_serving_fn
from albert_tf.tasks.finetuning_options import FinetuningOptions, resolve_cached_dir, resolve_train_steps
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask
from albert_tf.tasks.model_source import resolve_tokenizer
from albert_tf.training import metrics
from tests.helpers import make_spm_model
from tests.tasks.toy_task import SEQ, ToyClassifier, toy_examples, toy_options, toy_split, toy_task


def test_resolve_train_steps_follows_the_original():
    options = FinetuningOptions("/tmp", train_step=None, num_train_epochs=3.0, warmup_proportion=0.1,
                                train_batch_size=32)
    # The original: int(len(train_examples) / train_batch_size * num_train_epochs), int(steps * proportion).
    assert resolve_train_steps(options, 1000) == (93, 9)
    assert resolve_train_steps(FinetuningOptions("/tmp", train_step=800, warmup_step=200), 10) == (800, 200)
    with pytest.raises(ValueError, match="not both"):
        resolve_train_steps(FinetuningOptions("/tmp", train_step=5, num_train_epochs=1.0), 10)
    with pytest.raises(ValueError, match="at least 1"):
        resolve_train_steps(options, 5)


def test_train_evaluate_every_checkpoint_predict_and_export(tmp_path):
    written = {}
    results = finetuning.run_finetuning(
        toy_task(written, with_mismatched=True),
        toy_options(tmp_path / "run", do_train=True, do_eval=True, do_predict=True, eval_every_checkpoint=True,
                 save_checkpoints_steps=10, steps_per_loop=10, export_dir=str(tmp_path / "export")))
    run = tmp_path / "run"
    final = json.loads((run / "eval_results.json").read_text())
    assert final["global_step"] == 60 and final["accuracy"] > 0.85 and final["accuracy_mismatched"] > 0.85
    assert set(final) == {"global_step", "accuracy", "loss", "accuracy_mismatched", "loss_mismatched"}

    # Every checkpoint is kept and evaluated, as the original did (more than the 5 kept otherwise).
    text = (run / "eval_results.txt").read_text()

    def values(name):
        return [float(line.split(" = ")[1]) for line in text.splitlines() if line.startswith(name + " = ")]

    steps, accuracies = values("global_step"), values("accuracy")
    assert steps == [10, 20, 30, 40, 50, 60]
    # The original's `best` line: the best value before each checkpoint, -1 before the first.
    assert values("best") == [-1] + [max(accuracies[:count]) for count in range(1, 6)]
    assert values("best_accuracy") == [max(accuracies[:count]) for count in range(1, 7)]
    assert values("best_global_step")[-1] == steps[int(np.argmax(accuracies))]
    best = json.loads((run / "best" / "eval_results.json").read_text())
    assert best["accuracy"] == max(accuracies)
    assert best["global_step"] == steps[int(np.argmax(accuracies))]
    assert results["best"]["checkpoint"] == str(run / "best" / "ckpt-best")
    assert (run / "best" / "ckpt-best.index").exists() and (run / "best" / "eval_predictions_mismatched.tsv").exists()
    assert tf.train.latest_checkpoint(str(run / "best")) == str(run / "best" / "ckpt-best")

    dev_predictions = np.loadtxt(run / "eval_predictions.tsv")
    assert dev_predictions.shape == (50,)
    assert written["test"]["example_index"].tolist() == list(range(23))

    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    test = toy_examples(23, 3)
    outputs = served(**{name: tf.constant(test[name]) for name in ("input_word_ids", "input_mask", "input_type_ids")})
    np.testing.assert_allclose(outputs["logits"].numpy(), written["test"]["logits"], atol=1e-5)
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(-1), np.ones(23), atol=1e-5)


def test_eval_without_checkpoint_uses_initial_weights_and_returns(tmp_path):
    results = finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_eval=True))
    assert results["eval"]["global_step"] == 0
    assert "checkpoint" not in results["best"] and not (tmp_path / "best").exists()
    assert 0.0 <= json.loads((tmp_path / "eval_results.json").read_text())["accuracy"] <= 1.0


def test_later_runs_evaluate_and_predict_with_the_checkpoints_of_earlier_ones(tmp_path):
    trained = finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_train=True, do_predict=True))
    assert trained["prediction_checkpoint"] == str(tmp_path / "ckpt-60")
    results = finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_eval=True))
    assert results["eval"]["global_step"] == 60 and results["eval"]["accuracy"] > 0.85
    # As the original predicted with model.ckpt-best, a prediction-only run uses best/ when there is one.
    predicted = finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_predict=True))
    assert predicted["prediction_checkpoint"] == str(tmp_path / "best" / "ckpt-best")
    # The config training left beside the checkpoints (and in best/) defines the model of later runs.
    assert (tmp_path / "best" / "albert_config.json").read_text() == (tmp_path / "albert_config.json").read_text()
    again = finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_eval=True, preset=None))
    assert again["eval"] == results["eval"]


def test_an_empty_predict_split_gives_every_output_with_no_rows(tmp_path):
    written = {}
    task = dataclasses.replace(toy_task(written), predict_splits=[toy_split("test", 0, 3)])
    finetuning.run_finetuning(task, toy_options(tmp_path, do_predict=True))
    outputs = written["test"]
    assert sorted(outputs) == ["example_index", "label_ids", "logits", "per_example_loss", "probabilities"]
    assert outputs["logits"].shape == outputs["probabilities"].shape == (0, 2)
    assert outputs["logits"].dtype == np.float32 and outputs["example_index"].shape == (0,)


def test_bad_options_are_named(tmp_path):
    with pytest.raises(ValueError, match="Nothing to do"):
        finetuning.run_finetuning(toy_task({}), toy_options(tmp_path))
    task = toy_task({})
    task.train_data = None
    with pytest.raises(ValueError, match="--do_train is set but task 'toy' was given no data"):
        finetuning.run_finetuning(task, toy_options(tmp_path, do_train=True))
    with pytest.raises(ValueError, match="max_position_embeddings=512"):
        finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_eval=True, max_seq_length=1024))
    with pytest.raises(ValueError, match="--albert_config_file or --preset"):
        finetuning.run_finetuning(toy_task({}), toy_options(tmp_path, do_eval=True, preset=None))


def test_regression_functions_fit_a_linear_score(tmp_path):
    """STS-B's path: one output, MSE loss, `predictions` out; Pearson from the outputs."""
    def split(name, count, seed):
        data = toy_examples(count, seed)
        data["label_ids"] = (data["input_word_ids"][:, 0] - data["input_word_ids"][:, 1]).astype(np.float32) / 2
        return DataSplit(name, lambda: tf.data.Dataset.from_tensor_slices(data), count)

    sequence = tf.TensorSpec([None, SEQ], tf.int32)
    task = FinetuningTask(
        name="toy_regression",
        build_model=lambda config, dropout_rate, recompute_blocks: ToyClassifier(1, name="toy_regressor"),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=regression_loss_fn, predict_fn=regression_predict_fn, serving_fn=regression_serving_fn,
        compute_metrics=lambda split, outputs: {
            "pearson": metrics.pearson_correlation(outputs["predictions"], outputs["label_ids"])},
        best_metric="pearson", train_data=split("train", 200, 0), eval_splits=[split("dev", 50, 1)])
    results = finetuning.run_finetuning(task, toy_options(tmp_path, do_train=True, do_eval=True, learning_rate=0.1,
                                                       warmup_step=0))
    assert results["eval"]["pearson"] > 0.99
    # The evaluation loss is the mean squared error, as the original's per_example_loss = (logit - label)^2.
    assert 0.0 <= results["eval"]["loss"] < 0.1


def test_the_tokenizer_comes_from_the_options_or_beside_the_checkpoint(tmp_path):
    spm_model = make_spm_model(str(tmp_path))
    given = resolve_tokenizer(FinetuningOptions("/tmp", spm_model_file=spm_model, do_lower_case=False))
    assert given.spm_model_file == spm_model and not given.do_lower_case
    # Beside --init_checkpoint, as in the released tarballs.
    checkpoint = tf.train.Checkpoint(step=tf.Variable(1)).write(str(tmp_path / "ckpt"))
    beside = resolve_tokenizer(FinetuningOptions("/tmp", init_checkpoint=checkpoint))
    assert beside.spm_model_file == spm_model
    alone = tf.train.Checkpoint(step=tf.Variable(1)).write(str(tmp_path / "no_vocabulary" / "ckpt"))
    with pytest.raises(ValueError, match=r"Found 0 SentencePiece models with .*give --spm_model_file"):
        resolve_tokenizer(FinetuningOptions("/tmp", init_checkpoint=alone))
    with pytest.raises(ValueError, match=r"Give --spm_model_file \(or --vocab_file\) to tokenize the input."):
        resolve_tokenizer(FinetuningOptions("/tmp"))
    # The digit-comma rule: the original's by default, Hugging Face's on request, wherever the model comes from.
    assert given.digit_comma_rule == beside.digit_comma_rule == "keep_added_marker"
    for source in (dict(spm_model_file=spm_model), dict(init_checkpoint=checkpoint)):
        options = FinetuningOptions("/tmp", digit_comma_rule="drop_added_marker", **source)
        assert resolve_tokenizer(options).digit_comma_rule == "drop_added_marker"
    assert resolve_cached_dir(FinetuningOptions("/tmp/run")) == "/tmp/run"
    cached = FinetuningOptions("/tmp/run", cached_dir="/tmp/cache")
    assert resolve_cached_dir(cached) == "/tmp/cache"


def test_a_run_says_what_it_will_train_and_warns_when_that_is_too_short_to_move_the_model(tmp_path, monkeypatch):
    logged = {"info": [], "warning": []}
    for level in logged:
        monkeypatch.setattr(finetuning.logging, level,
                            lambda message, *arguments, level=level: logged[level].append(message % arguments))
    task = dataclasses.replace(toy_task({}), train_data=dataclasses.replace(
        toy_split("train", 200, 0), label_counts={"first larger": 90, "not": 110}))
    # The original's defaults on 200 examples: 3 epochs in batches of 32.
    finetuning.run_finetuning(task, toy_options(tmp_path / "short", do_train=True, train_step=None,
                                                num_train_epochs=3.0, warmup_proportion=0.1, train_batch_size=32))
    assert ("Fine-tuning toy on 200 training examples (first larger 90, not 110) in batches of 32: 18 steps (2.9 "
            "epochs), the first 1 warming up, adamw at learning rate 0.05.") in logged["info"]
    assert [message for message in logged["warning"] if "steps after warmup" in message] == [
        "Only 17 training steps after warmup (18 in all): too few for the model to move far from its initial "
        "weights at learning rate 0.05. On a small training set, train for more epochs in smaller batches, e.g. "
        "--num_train_epochs=20 --train_batch_size=16 (docs/fine-tuning.md, \"Small datasets\")."]
    logged["warning"].clear()
    finetuning.run_finetuning(task, toy_options(tmp_path / "long", do_train=True, train_step=None,
                                                num_train_epochs=20.0, warmup_proportion=0.1, train_batch_size=16))
    assert not [message for message in logged["warning"] if "steps after warmup" in message]
