import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertMultipleChoice, AlbertSpanPredictor, AlbertSquadV2, AlbertTokenClassifier
from albert_tf.layers.squad_v2_head import SquadV2Head
from tests import numpy_albert
from tests.helpers import random_inputs, tiny_config

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(**kwargs):
    return {k: v for k, v in random_inputs(**kwargs).items() if k in ENCODER_KEYS}


def test_classifier_is_pooled_dense_and_dropout_only_in_training():
    model = AlbertClassifier(tiny_config(), num_labels=3, dropout_rate=0.5)
    inputs = encoder_inputs()
    pooled = model.encoder(inputs)["pooled_output"].numpy()
    expected = pooled @ model.head.output_weights.numpy().T + model.head.output_bias.numpy()
    np.testing.assert_allclose(model(inputs), expected, atol=1e-6)
    assert model(inputs, training=True).shape == (2, 3)
    assert float(tf.reduce_max(tf.abs(model(inputs, training=True) - expected))) > 1e-4
    assert set(model.head_variable_map()) == {"output_weights", "output_bias"}
    assert model.head_variable_map()["output_weights"].shape == (3, 16)


def test_multiple_choice_scores_each_choice_with_one_weight_row():
    model = AlbertMultipleChoice(tiny_config(), num_choices=4)
    rng = np.random.default_rng(0)
    ids = tf.constant(rng.integers(0, 60, (2, 4, 6)), tf.int32)
    inputs = {"input_word_ids": ids, "input_mask": tf.ones_like(ids), "input_type_ids": tf.zeros_like(ids)}
    logits = model(inputs)
    assert logits.shape == (2, 4)
    flat = {k: tf.reshape(v, [8, 6]) for k, v in inputs.items()}
    pooled = model.encoder(flat)["pooled_output"].numpy()
    expected = (pooled @ model.head.output_weights.numpy().T + model.head.output_bias.numpy()).reshape(2, 4)
    np.testing.assert_allclose(logits, expected, atol=1e-6)
    assert model.head_variable_map()["output_weights"].shape == (1, 16)


def test_span_predictor_matches_original_v1_head():
    model = AlbertSpanPredictor(tiny_config())
    model.output_bias.assign([0.5, -0.25])
    inputs = encoder_inputs()
    outputs = model(inputs)
    sequence = model.encoder(inputs)["sequence_output"].numpy()
    logits = sequence @ model.output_weights.numpy().T + model.output_bias.numpy()
    np.testing.assert_allclose(outputs["start_logits"], logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"], logits[..., 1], atol=1e-5)
    assert set(model.head_variable_map()) == {"cls/squad/output_weights", "cls/squad/output_bias"}


def test_token_classifier_is_a_dense_head_on_every_position_with_dropout_only_in_training():
    model = AlbertTokenClassifier(tiny_config(), num_labels=5, dropout_rate=0.5)
    model.head.output_bias.assign(np.arange(5, dtype=np.float32))
    inputs = encoder_inputs()
    sequence = model.encoder(inputs)["sequence_output"].numpy()
    expected = sequence @ model.head.output_weights.numpy().T + model.head.output_bias.numpy()
    np.testing.assert_allclose(model(inputs), expected, atol=1e-5)
    assert float(tf.reduce_max(tf.abs(model(inputs, training=True) - expected))) > 1e-4
    assert {name: variable.shape for name, variable in model.head_variable_map().items()} == {
        "cls/token_classification/output_weights": (5, 16), "cls/token_classification/output_bias": (5,)}
    # The original heads' fixed initializer, not the config's initializer_range.
    assert model.head.initializer_range == 0.02
    with pytest.raises(ValueError, match="AlbertTokenClassifier needs num_labels >= 1, got 0"):
        AlbertTokenClassifier(tiny_config(), num_labels=0)


def numpy_v2_head(w, sequence, p_mask, start_positions=None, start_n_top=5, end_n_top=5):
    """create_v2_model transcribed in numpy (batch-major; the original is sequence-major)."""
    def dense(x, scope, bias=True):
        y = x @ w[scope + "/kernel"]
        return y + w[scope + "/bias"] if bias else y

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    def mask(logits, m):
        return logits * (1 - m) - 1e30 * m

    def end_logits(start_features):  # [B, K, H] -> [B, K, S]
        seq_len = sequence.shape[1]
        end_input = np.concatenate([np.repeat(sequence[:, None], start_features.shape[1], 1),
                                    np.repeat(start_features[:, :, None], seq_len, 2)], -1)
        hidden = numpy_albert.layer_norm(np.tanh(dense(end_input, "end_logits/dense_0")),
                                         w["end_logits/LayerNorm/gamma"], w["end_logits/LayerNorm/beta"])
        return dense(hidden, "end_logits/dense_1")[..., 0]

    start_logits = mask(dense(sequence, "start_logits/dense")[..., 0], p_mask)
    start_log_probs = log_softmax(start_logits)
    out = {}
    if start_positions is not None:
        features = sequence[np.arange(len(sequence)), start_positions][:, None]
        out["start_log_probs"] = start_log_probs
        out["end_log_probs"] = log_softmax(mask(end_logits(features)[:, 0], p_mask))
    else:
        start_top_index = np.argsort(-start_log_probs, -1, kind="stable")[:, :start_n_top]
        out["start_top_log_probs"] = np.take_along_axis(start_log_probs, start_top_index, -1)
        out["start_top_index"] = start_top_index
        features = np.take_along_axis(sequence, start_top_index[:, :, None], 1)
        end_log_probs = log_softmax(mask(end_logits(features), p_mask[:, None]))
        end_top_index = np.argsort(-end_log_probs, -1, kind="stable")[:, :, :end_n_top]
        out["end_top_log_probs"] = np.take_along_axis(end_log_probs, end_top_index, -1).reshape(len(sequence), -1)
        out["end_top_index"] = end_top_index.reshape(len(sequence), -1)
    start_p = np.exp(log_softmax(start_logits))
    start_feature = np.einsum("bsh,bs->bh", sequence, start_p)
    answer = np.tanh(dense(np.concatenate([start_feature, sequence[:, 0]], -1), "answer_class/dense_0"))
    out["cls_logits"] = dense(answer, "answer_class/dense_1", bias=False)[:, 0]
    return out


@pytest.mark.parametrize("training", [False, True])
def test_squad_v2_head_matches_numpy_transcription(training):
    head = SquadV2Head(hidden_size=8, start_n_top=3, end_n_top=2, dropout_rate=0.0, initializer_range=0.5)
    head.build()
    rng = np.random.default_rng(1)
    for variable in head.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    sequence = rng.normal(size=(2, 7, 8)).astype(np.float32)
    p_mask = np.zeros((2, 7), np.float32)
    p_mask[:, 1:3] = 1
    start_positions = np.array([4, 0]) if training else None
    outputs = head(tf.constant(sequence), tf.constant(p_mask),
                   start_positions=None if start_positions is None else tf.constant(start_positions))
    weights = {name: v.numpy().astype(np.float64) for name, v in head.variable_map().items()}
    expected = numpy_v2_head(weights, sequence.astype(np.float64), p_mask, start_positions, 3, 2)
    assert set(outputs) == set(expected)
    for name, value in expected.items():
        if name.endswith("_index"):
            np.testing.assert_array_equal(outputs[name], value)
        else:
            np.testing.assert_allclose(outputs[name], value, atol=1e-4, rtol=1e-5)
    assert len(head.variable_map()) == len(head.weights) == 11


def test_squad_v2_model_training_and_inference_outputs():
    model = AlbertSquadV2(tiny_config(), start_n_top=2, end_n_top=3)
    inputs = dict(encoder_inputs(), p_mask=tf.zeros([2, 7]))
    inference = tf.function(lambda x: model(x), jit_compile=True)(inputs)
    assert inference["end_top_index"].shape == (2, 6) and inference["cls_logits"].shape == (2,)
    training = model(dict(inputs, start_positions=tf.constant([1, 3])), training=True)
    assert training["start_log_probs"].shape == (2, 7) and training["end_log_probs"].shape == (2, 7)
    np.testing.assert_allclose(tf.reduce_sum(tf.exp(training["end_log_probs"]), -1), [1, 1], atol=1e-5)


@pytest.mark.parametrize("model_class, kwargs", [
    (AlbertClassifier, dict(num_labels=1, dropout_rate=0.2, recompute_blocks=True)),
    (AlbertMultipleChoice, dict(num_choices=3)),
    (AlbertSpanPredictor, dict(recompute_blocks=True)),
    (AlbertSquadV2, dict(start_n_top=4, end_n_top=2)),
    (AlbertTokenClassifier, dict(num_labels=4, recompute_blocks=True)),
])
def test_config_round_trip_and_bfloat16(model_class, kwargs):
    model = model_class(tiny_config(), **kwargs)
    restored = model_class.from_config(model.get_config())
    assert restored.get_config() == model.get_config()
    assert restored.encoder.recompute_blocks == kwargs.get("recompute_blocks", False)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    mixed = model_class(tiny_config(), **kwargs)
    assert all(v.dtype == "float32" for v in mixed.weights)
    assert mixed.encoder.compute_dtype == "bfloat16"
