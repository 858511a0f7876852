"""Dynamic padding (albert_tf/tasks/dynamic_padding.py): batches cut to their longest member give the padded run's
losses, metrics and predictions to float rounding, and only the columns no example uses are cut."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks import checkpoint_evaluation, dynamic_padding, finetuning
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask
from albert_tf.tasks.ner import NerOptions, run_ner
from albert_tf.tasks.squad import SquadOptions, run_squad
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from tests.helpers import tiny_config_values
from tests.tasks.task_data import squad_json, write_keyword_conll, write_labeled_text


def test_a_batch_loses_only_the_columns_no_example_uses_rounded_up_to_a_power_of_two():
    lengths = [3, 19, 7]
    mask = np.array([[1] * length + [0] * (64 - length) for length in lengths], np.int32)
    batch = {"input_word_ids": tf.constant(mask * 5), "input_mask": tf.constant(mask),
             "input_type_ids": tf.zeros_like(mask), "label_ids": tf.constant([0, 1, 0])}
    cut = dynamic_padding.trim_to_longest(batch, INPUT_NAMES)
    assert cut["input_mask"].shape == (3, 32) and cut["label_ids"].shape == (3,)
    np.testing.assert_array_equal(cut["input_word_ids"].numpy(), mask[:, :32] * 5)
    # Choices of a multiple-choice batch ([batch, choices, sequence]) count together.
    choices = tf.constant(mask[None])
    assert dynamic_padding.trim_to_longest({"input_mask": choices}, ["input_mask"])["input_mask"].shape == (1, 3, 32)
    full = tf.constant(np.ones([2, 48], np.int32))
    assert dynamic_padding.trim_to_longest({"input_mask": full}, ["input_mask"])["input_mask"].shape == (2, 48)


def test_outputs_along_the_sequence_come_back_at_the_tasks_length_with_their_padding_values():
    def predict_fn(model, batch):
        return {"predictions": batch["input_mask"] * 7, "word_ids": batch["input_mask"] - 1,
                "example_index": tf.range(tf.shape(batch["input_mask"])[0])}

    sequence = tf.TensorSpec([None, 8], tf.int32)
    task = FinetuningTask("tokens", None, {"input_word_ids": sequence}, None, predict_fn, None, "f1",
                          sequence_features=INPUT_NAMES, sequence_outputs={"predictions": 0, "word_ids": -1})
    predict = dynamic_padding.prediction_function(task, INPUT_NAMES)
    assert predict is dynamic_padding.prediction_function(task, INPUT_NAMES)  # traced once, not per evaluation
    outputs = predict(None, {"input_mask": tf.constant([[1, 1, 0], [1, 0, 0]])})
    assert outputs["predictions"].numpy().tolist() == [[7, 7, 0, 0, 0, 0, 0, 0], [7, 0, 0, 0, 0, 0, 0, 0]]
    assert outputs["word_ids"].numpy().tolist() == [[0, 0, -1, -1, -1, -1, -1, -1], [0, -1, -1, -1, -1, -1, -1, -1]]
    assert outputs["example_index"].numpy().tolist() == [0, 1]
    assert dynamic_padding.prediction_function(task, ()) is predict_fn


def test_grouping_by_length_batches_each_shuffled_window_longest_first_with_the_same_examples():
    lengths = np.random.default_rng(0).integers(1, 64, size=200)
    masks = np.array([[1] * length + [0] * (64 - length) for length in lengths], np.int32)
    split = DataSplit("train", lambda: tf.data.Dataset.from_tensor_slices(
        {"input_mask": masks, "example_index": np.arange(200)}), 200)
    window = 4 * dynamic_padding.GROUP_WINDOW_BATCHES

    def first_window(group_by_length):
        dataset_fn = finetuning._train_dataset_fn(split, seed=3, group_by_length=group_by_length)
        batches = list(dataset_fn(None, 4, 0).take(dynamic_padding.GROUP_WINDOW_BATCHES))
        return [batch["example_index"].numpy() for batch in batches], [
            dynamic_padding.example_lengths(batch["input_mask"]).numpy() for batch in batches]

    plain_indices, plain_lengths = first_window(False)
    grouped_indices, grouped_lengths = first_window(True)
    # The window holds the shuffled stream's first examples (the epoch's 200, then the next epoch's).
    assert sorted(np.concatenate(grouped_indices)) == sorted(np.concatenate(plain_indices))
    assert len(np.concatenate(grouped_indices)) == window
    flat = np.concatenate(grouped_lengths)
    assert (np.diff(flat) <= 0).all()
    # Grouped batches pad less: the sum of each batch's longest over the window.
    assert sum(map(max, grouped_lengths)) < 0.7 * sum(map(max, plain_lengths))


class _EagerTrainer:
    """Trainer.predict's contract, eagerly: predict_fn over dataset_fn's batches, outputs concatenated."""

    model = None

    def __init__(self):
        self.batch_lengths = []

    def predict(self, dataset_fn, predict_fn, global_batch_size):
        chunks = []
        for batch in dataset_fn(None, global_batch_size, 0):
            self.batch_lengths.append(int(batch["input_mask"].shape[-1]))
            chunks.append(predict_fn(self.model, batch))
        return {name: np.concatenate([chunk[name].numpy() for chunk in chunks]) for name in chunks[0]}


def test_prediction_sorts_each_window_by_length_and_returns_the_examples_order():
    lengths = np.random.default_rng(1).integers(1, 64, size=300)
    masks = np.array([[1] * length + [0] * (64 - length) for length in lengths], np.int32)
    split = DataSplit("dev", lambda: tf.data.Dataset.from_tensor_slices(
        {"input_word_ids": masks * 7, "input_mask": masks, "input_type_ids": np.zeros_like(masks),
         "row": np.arange(300)}), 300)

    def predict_fn(model, batch):
        return {"row": batch["row"], "length": dynamic_padding.example_lengths(batch["input_mask"])}

    sorted_trainer, plain_trainer = _EagerTrainer(), _EagerTrainer()
    sorted_outputs = checkpoint_evaluation.predict_split(sorted_trainer, split, 8, predict_fn, INPUT_NAMES)
    plain_outputs = checkpoint_evaluation.predict_split(plain_trainer, split, 8, predict_fn)
    assert sorted_outputs.keys() == {"row", "length"}
    np.testing.assert_array_equal(sorted_outputs["row"], np.arange(300))
    np.testing.assert_array_equal(sorted_outputs["length"], lengths)
    np.testing.assert_array_equal(plain_outputs["row"], np.arange(300))
    assert sum(sorted_trainer.batch_lengths) < 0.7 * 64 * len(plain_trainer.batch_lengths)
    assert len(sorted_trainer.batch_lengths) == len(plain_trainer.batch_lengths) == 38


def _finetuning_options(tmp_path, name, tokenizer, **changes):
    """A 12-step run of a tiny model without dropout at max_seq_length 64, in tmp_path/name."""
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(tiny_config_values(vocab_size=tokenizer.vocab_size, max_position_embeddings=64,
                                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
    return FinetuningOptions(
        str(tmp_path / name), albert_config_file=str(config_file), spm_model_file=tokenizer.spm_model_file,
        max_seq_length=64, do_train=True, do_eval=True, do_predict=True, train_step=12, warmup_step=2,
        learning_rate=1e-3, train_batch_size=8, eval_batch_size=16, predict_batch_size=16, dropout_prob=0.0,
        jit_compile=False, **changes)


@pytest.mark.slow
def test_a_run_with_dynamic_padding_ends_as_the_padded_run(tmp_path, tokenizer, monkeypatch):
    for split, count, seed in (("train", 64, 0), ("dev", 40, 1), ("test", 12, 2)):
        write_labeled_text(tmp_path / f"{split}.tsv", "single_label", count, seed=seed)
    cuts = []
    trim = dynamic_padding.trim_to_longest
    monkeypatch.setattr(dynamic_padding, "trim_to_longest",
                        lambda batch, names, *rest: cuts.append(names) or trim(batch, names, *rest))

    def run(name, **changes):
        finetuning = _finetuning_options(tmp_path, name, tokenizer, **changes)
        results = run_text_classification(TextClassificationOptions(
            finetuning, text_field="text", label_field="topic", train_file=str(tmp_path / "train.tsv"),
            eval_file=str(tmp_path / "dev.tsv"), predict_file=str(tmp_path / "test.tsv")))
        return results["eval"], np.loadtxt(tmp_path / name / "test_results.tsv", ndmin=2)

    padded, padded_probabilities = run("padded", pad_to_max_seq_length=True)
    assert not cuts
    dynamic, dynamic_probabilities = run("dynamic")
    assert cuts and all(names == INPUT_NAMES for names in cuts)
    assert dynamic["global_step"] == padded["global_step"] == 12
    assert dynamic["loss"] == pytest.approx(padded["loss"], rel=1e-4)
    assert dynamic["accuracy"] == padded["accuracy"]
    np.testing.assert_allclose(dynamic_probabilities, padded_probabilities, atol=1e-4)

    grouped_batches = []
    group = dynamic_padding.group_by_length
    monkeypatch.setattr(dynamic_padding, "group_by_length",
                        lambda examples, batch_size: grouped_batches.append(batch_size) or group(examples, batch_size))
    grouped, _ = run("grouped", group_by_length=True)
    assert grouped["global_step"] == 12 and grouped_batches == [8]


@pytest.mark.slow
def test_an_ner_run_with_dynamic_padding_ends_as_the_padded_run(tmp_path, tokenizer):
    """Per-token outputs come back at max_seq_length, so the scores and prediction files are the padded run's."""
    write_keyword_conll(tmp_path / "conll", sizes=(("train", 48), ("valid", 24), ("test", 12)))

    def run(name, **changes):
        finetuning = _finetuning_options(tmp_path, name, tokenizer, **changes)
        results = run_ner(NerOptions(finetuning, data_dir=str(tmp_path / "conll")))
        return results["eval"], (tmp_path / name / "test_predictions.txt").read_text()

    padded, padded_predictions = run("padded", pad_to_max_seq_length=True)
    dynamic, dynamic_predictions = run("dynamic")
    assert dynamic["global_step"] == padded["global_step"] == 12
    assert dynamic["loss"] == pytest.approx(padded["loss"], rel=1e-4)
    assert {name: value for name, value in dynamic.items() if name != "loss"} == pytest.approx(
        {name: value for name, value in padded.items() if name != "loss"}, abs=1e-9)
    assert dynamic_predictions == padded_predictions and len(padded_predictions.splitlines()) > 12


@pytest.mark.slow
def test_a_squad_v2_run_with_dynamic_padding_ends_as_the_padded_run(tmp_path, tokenizer):
    """v2's beams exclude padding through p_mask: the answers, n-best lists and null odds are the padded run's."""
    for split, count, seed in (("train", 48, 0), ("dev", 16, 1)):
        squad_json(tmp_path / f"{split}.json", count, 0.3, seed=seed)

    def run(name, **changes):
        finetuning = _finetuning_options(tmp_path, name, tokenizer, **changes)
        results = run_squad(SquadOptions(finetuning, train_file=str(tmp_path / "train.json"),
                                         predict_file=str(tmp_path / "dev.json"), version_2_with_negative=True,
                                         doc_stride=16, max_query_length=16))
        files = {path.name: json.loads(path.read_text()) for path in sorted((tmp_path / name).glob("*.json"))
                 if path.name.startswith(("predictions", "nbest", "null_odds"))}
        return results["eval"], files

    padded, padded_files = run("padded", pad_to_max_seq_length=True)
    dynamic, dynamic_files = run("dynamic")
    assert dynamic["global_step"] == padded["global_step"] == 12
    assert dynamic == pytest.approx(padded, rel=1e-4, abs=1e-6)
    assert len(padded_files) == 3 and dynamic_files.keys() == padded_files.keys()
    assert dynamic_files["predictions.json"] == padded_files["predictions.json"]
    assert dynamic_files["null_odds.json"] == pytest.approx(padded_files["null_odds.json"], abs=1e-4)
    for question, entries in padded_files["nbest_predictions.json"].items():
        assert [entry["text"] for entry in dynamic_files["nbest_predictions.json"][question]] == [
            entry["text"] for entry in entries]
