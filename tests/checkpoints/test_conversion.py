"""conversion.convert_checkpoint from Python: what run_scripts.convert_checkpoint runs, without absl."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertEncoder, AlbertTokenClassifier, load_weights, save_weights
from albert_tf.checkpoints import conversion
from tests.helpers import tiny_config


def _config():
    return tiny_config(vocab_size=50, hidden_size=8, num_hidden_layers=2, intermediate_size=16, embedding_size=4,
                       max_position_embeddings=512, initializer_range=0.02)


def _assert_same_weights(actual_model, expected_model):
    """Both models hold the same variables, by path, with equal values."""
    expected = {variable.path: variable.numpy() for variable in expected_model.weights}
    actual = {variable.path: variable.numpy() for variable in actual_model.weights}
    assert sorted(expected) == sorted(actual)
    for path, value in expected.items():
        np.testing.assert_array_equal(actual[path], value, err_msg=path)


def test_convert_checkpoint_round_trips_a_classifier_through_tf1(tmp_path):
    config = _config()
    classifier = AlbertClassifier(config, num_labels=3)
    classifier.head.output_bias.assign(np.arange(3, dtype=np.float32))
    save_weights(classifier, str(tmp_path / "hf"), format="hf")

    tf1_dir = conversion.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "tf1"), "tf1")
    assert tf1_dir == str(tmp_path / "tf1")
    reader = tf.train.load_checkpoint(tf1_dir)
    np.testing.assert_array_equal(reader.get_tensor("output_weights"), classifier.head.output_weights.numpy())
    np.testing.assert_array_equal(reader.get_tensor("output_bias"), [0.0, 1.0, 2.0])

    conversion.convert_checkpoint(tf1_dir, str(tmp_path / "hf_again"), "hf", config=config, head="classifier")
    loaded = AlbertClassifier(config, num_labels=3)
    load_weights(loaded, str(tmp_path / "hf_again"))
    _assert_same_weights(loaded, classifier)


def test_convert_checkpoint_needs_a_config(tmp_path):
    save_weights(AlbertEncoder(_config()), str(tmp_path / "bare" / "model.ckpt"), format="tf1")
    with pytest.raises(ValueError, match="No config found with .*bare.*; pass --albert_config_file or --preset"):
        conversion.convert_checkpoint(str(tmp_path / "bare"), str(tmp_path / "out"), "hf")
    assert not (tmp_path / "out").exists()


def test_convert_checkpoint_round_trips_a_token_classifier_with_head_auto(tmp_path):
    """TF1 -> HF -> TF1 without naming the head: its own scope (TF1) and the architecture (HF) identify it."""
    config = _config()
    tagger = AlbertTokenClassifier(config, num_labels=5)
    tagger.head.output_bias.assign(np.arange(5, dtype=np.float32))
    save_weights(tagger, str(tmp_path / "tf1" / "model.ckpt"), format="tf1")

    conversion.convert_checkpoint(str(tmp_path / "tf1"), str(tmp_path / "hf"), "hf", config=config)
    hf_config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf_config["architectures"] == ["AlbertForTokenClassification"] and len(hf_config["id2label"]) == 5
    conversion.convert_checkpoint(str(tmp_path / "hf"), str(tmp_path / "tf1_again"), "tf1")
    reader = tf.train.load_checkpoint(str(tmp_path / "tf1_again"))
    np.testing.assert_array_equal(reader.get_tensor("cls/token_classification/output_bias"), np.arange(5))
    np.testing.assert_array_equal(reader.get_tensor("cls/token_classification/output_weights"),
                                  tagger.head.output_weights.numpy())
    loaded = AlbertTokenClassifier(config, num_labels=5)
    load_weights(loaded, str(tmp_path / "tf1_again"))
    _assert_same_weights(loaded, tagger)


def test_convert_checkpoint_token_classifier_head_needs_its_variables(tmp_path):
    save_weights(AlbertEncoder(_config()), str(tmp_path / "bare" / "model.ckpt"), format="tf1")
    with pytest.raises(ValueError, match="has no token classification head .*cls/token_classification/output_weights"):
        conversion.convert_checkpoint(str(tmp_path / "bare"), str(tmp_path / "out"), "hf", config=_config(),
                                      head="token_classifier")
