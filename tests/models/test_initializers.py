"""The shared constants and truncated-normal initializer, and that every layer and model takes them."""

import keras
import numpy as np
import pytest

from albert_tf import AlbertClassifier, AlbertMultipleChoice, AlbertPretrainer, AlbertSpanPredictor, AlbertSquadV2
from albert_tf.checkpoints import hf_names
from albert_tf.layers.initializers import HEAD_INITIALIZER_STDDEV, LAYER_NORM_EPSILON, truncated_normal
from tests.helpers import tiny_config


def test_truncated_normal_is_keras_truncated_normal_with_that_stddev():
    initializer = truncated_normal(0.3)
    assert type(initializer) is keras.initializers.TruncatedNormal
    assert initializer.stddev == 0.3 and initializer.mean == 0.0
    assert initializer.get_config() == keras.initializers.TruncatedNormal(stddev=0.3).get_config()
    assert truncated_normal(0.3) is not initializer


def test_truncated_normal_draws_what_keras_truncated_normal_draws():
    keras.utils.set_random_seed(11)
    ours = truncated_normal(0.3)((400, 50))
    keras.utils.set_random_seed(11)
    theirs = keras.initializers.TruncatedNormal(stddev=0.3)((400, 50))
    np.testing.assert_array_equal(ours, theirs)
    values = np.asarray(ours)
    assert np.abs(values).max() <= 2 * 0.3
    # A normal truncated at two standard deviations keeps 0.880 of the stddev.
    assert abs(values.std() - 0.880 * 0.3) < 0.01


def test_constants_are_the_originals_and_shared():
    assert LAYER_NORM_EPSILON == 1e-12 and HEAD_INITIALIZER_STDDEV == 0.02
    assert hf_names.LAYER_NORM_EPSILON is LAYER_NORM_EPSILON
    model = AlbertPretrainer(tiny_config())
    layer_norms = [model.encoder.embeddings.layer_norm, model.masked_lm_head.layer_norm]
    layer_norms += [layer.layer_norm for layer in model.encoder.attention_layers + model.encoder.feed_forward_layers]
    assert [layer_norm.epsilon for layer_norm in layer_norms] == [LAYER_NORM_EPSILON] * len(layer_norms)
    squad_v2 = AlbertSquadV2(tiny_config())
    assert squad_v2.head.end_layer_norm.epsilon == LAYER_NORM_EPSILON


def test_encoder_and_pretraining_dense_layers_take_the_configs_initializer_range():
    config = tiny_config(initializer_range=0.07)
    model = AlbertPretrainer(config)
    encoder = model.encoder
    attention, ffn = encoder.attention_layers[0], encoder.feed_forward_layers[0]
    dense_layers = [encoder.embedding_projection, encoder.pooler, attention.query, attention.key, attention.value,
                    attention.output_dense, ffn.intermediate, ffn.output_dense, model.masked_lm_head.dense]
    for dense in dense_layers:
        assert type(dense.kernel_initializer) is keras.initializers.TruncatedNormal, dense.name
        assert dense.kernel_initializer.stddev == 0.07, dense.name
    head = AlbertSquadV2(config).head
    for dense in (head.start_dense, head.end_dense_0, head.end_dense_1, head.answer_dense_0, head.answer_dense_1):
        assert dense.kernel_initializer.stddev == 0.07, dense.name


def truncated_at(variable, stddev):
    values = np.asarray(variable)
    return np.abs(values).max() <= 2 * stddev and values.std() > 0.5 * stddev


@pytest.mark.parametrize("model_class", [AlbertClassifier, AlbertMultipleChoice, AlbertSpanPredictor])
def test_fine_tuning_heads_take_the_fixed_head_stddev(model_class):
    keras.utils.set_random_seed(5)
    model = model_class(tiny_config(initializer_range=0.5, hidden_size=64, num_attention_heads=4))
    weights = model.head.output_weights if hasattr(model, "head") else model.output_weights
    assert truncated_at(weights, HEAD_INITIALIZER_STDDEV)
    assert truncated_at(model.encoder.embeddings.word_embeddings, 0.5)


def test_weight_tables_take_the_configs_initializer_range():
    keras.utils.set_random_seed(5)
    model = AlbertPretrainer(tiny_config(initializer_range=0.05, vocab_size=400))
    embeddings = model.encoder.embeddings
    for table in (embeddings.word_embeddings, embeddings.position_embeddings):
        assert truncated_at(table, 0.05)
    assert truncated_at(model.sentence_order_head.output_weights, 0.05)
