"""The SQuAD heads side by side with the original's own create_v1_model and create_v2_model (squad_utils, run by
tests/original_albert.py): random weights in the original's graph, its checkpoint loaded into ours, the same
outputs in evaluation and, for v2, in training (the end logits conditioned on the true start)."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertSpanPredictor, AlbertSquadV2
from albert_tf.checkpoints.loading import load_weights
from tests import original_albert
from tests.helpers import random_inputs, tiny_config_values

SEQ_LENGTH = 12
N_TOP = 3


def _inputs():
    inputs = {name: value.numpy() for name, value in random_inputs(batch=3, seq=SEQ_LENGTH).items()
              if name != "masked_lm_positions"}
    p_mask = np.zeros((3, SEQ_LENGTH), np.float32)
    p_mask[:, 1:4] = 1.0  # the question and its [SEP]; [CLS] stays open for "no answer"
    p_mask[inputs["input_mask"] == 0] = 1.0
    inputs["p_mask"] = p_mask
    inputs["start_positions"] = np.array([4, 7, 5], np.int32)
    return inputs


def _run_original(build_outputs, directory):
    """Builds `build_outputs(squad_utils, config)` in a TF1 graph on random weights, saved to
    `directory`/model.ckpt, and returns the outputs' values."""
    squad_utils = original_albert.squad_utils(original_albert.tokenization())
    with tf.Graph().as_default():
        outputs = build_outputs(squad_utils, squad_utils.modeling.AlbertConfig.from_dict(tiny_config_values()))
        with original_albert.session_with_random_weights(str(directory / "model.ckpt")) as session:
            return session.run(outputs)


def test_v1_start_and_end_logits_equal_the_originals(tmp_path):
    inputs = _inputs()
    expected = _run_original(lambda squad_utils, config: squad_utils.create_v1_model(
        config, False, tf.constant(inputs["input_word_ids"]), tf.constant(inputs["input_mask"]),
        tf.constant(inputs["input_type_ids"]), False), tmp_path)
    model = AlbertSpanPredictor(AlbertConfig(**tiny_config_values()))
    load_weights(model, str(tmp_path / "model.ckpt"), format="tf1")
    outputs = model({name: tf.constant(value) for name, value in inputs.items()})
    np.testing.assert_allclose(outputs["start_logits"].numpy(), expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"].numpy(), expected[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [False, True])
def test_v2_outputs_equal_the_originals(tmp_path, training):
    inputs = _inputs()
    expected = _run_original(lambda squad_utils, config: squad_utils.create_v2_model(
        config, training, tf.constant(inputs["input_word_ids"]), tf.constant(inputs["input_mask"]),
        tf.constant(inputs["input_type_ids"]), False,
        {"p_mask": tf.constant(inputs["p_mask"]), "start_positions": tf.constant(inputs["start_positions"])},
        SEQ_LENGTH, N_TOP, N_TOP, 0.0), tmp_path)
    model = AlbertSquadV2(AlbertConfig(**tiny_config_values()), start_n_top=N_TOP, end_n_top=N_TOP, dropout_rate=0.0)
    load_weights(model, str(tmp_path / "model.ckpt"), format="tf1")
    outputs = model({name: tf.constant(value) for name, value in inputs.items()}, training=training)

    assert sorted(outputs) == sorted(expected)
    for name in sorted(expected):
        if name.endswith("_index"):
            np.testing.assert_array_equal(outputs[name].numpy(), expected[name], err_msg=name)
        else:
            # Masked positions sit near -1e30 on both sides; the open ones agree to float32 rounding.
            np.testing.assert_allclose(outputs[name].numpy(), expected[name], rtol=1e-4, atol=1e-4, err_msg=name)
