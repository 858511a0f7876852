"""The task models' shared base: built from a config or around an AlbertEncoder instance, and the config round trip."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (AlbertClassifier, AlbertEncoder, AlbertMultipleChoice, AlbertPretrainer, AlbertSpanPredictor,
                       AlbertSquadV2, AlbertTokenClassifier)
from albert_tf.checkpoints.tf1_names import model_variable_map
from albert_tf.models.task_model import AlbertTaskModel
from tests.helpers import random_inputs, tiny_config

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def pretrainer_inputs():
    return random_inputs()


def encoder_inputs():
    return {name: value for name, value in random_inputs().items() if name in ENCODER_KEYS}


def multiple_choice_inputs():
    return {name: tf.reshape(value, [1, 2, 7]) for name, value in encoder_inputs().items()}


def squad_v2_inputs():
    return dict(encoder_inputs(), p_mask=tf.constant([[0, 1, 0, 0, 0, 0, 0]] * 2, tf.float32))


TASK_MODELS = [
    (AlbertPretrainer, {}, pretrainer_inputs),
    (AlbertClassifier, dict(num_labels=3, dropout_rate=0.2), encoder_inputs),
    (AlbertMultipleChoice, dict(num_choices=2), multiple_choice_inputs),
    (AlbertSpanPredictor, {}, encoder_inputs),
    (AlbertSquadV2, dict(start_n_top=2, end_n_top=3), squad_v2_inputs),
    (AlbertTokenClassifier, dict(num_labels=5, dropout_rate=0.2), encoder_inputs),
]
TASK_MODEL_IDS = [model_class.__name__ for model_class, _, _ in TASK_MODELS]


def assert_same_outputs(first, second):
    first, second = tf.nest.flatten(first), tf.nest.flatten(second)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model_class, kwargs, make_inputs", TASK_MODELS, ids=TASK_MODEL_IDS)
def test_encoder_instance_gives_the_config_built_model(model_class, kwargs, make_inputs):
    config = tiny_config(share_type="ffn", num_hidden_groups=2)
    encoder = AlbertEncoder(config)
    around_encoder = model_class(encoder=encoder, **kwargs)
    from_config = model_class(config, **kwargs)
    assert around_encoder.encoder is encoder and around_encoder.config is encoder.config
    assert isinstance(around_encoder, AlbertTaskModel)

    model_variables = {id(variable) for variable in around_encoder.weights}
    assert {id(variable) for variable in encoder.weights} <= model_variables
    assert {id(variable) for variable in encoder.trainable_variables} <= {
        id(variable) for variable in around_encoder.trainable_variables}
    assert [v.path for v in around_encoder.weights] == [v.path for v in from_config.weights]
    names = model_variable_map(around_encoder)
    assert sorted(names) == sorted(model_variable_map(from_config))
    assert names["bert/embeddings/word_embeddings"] is encoder.embeddings.word_embeddings

    rng = np.random.default_rng(3)
    for source, target in zip(from_config.weights, around_encoder.weights):
        source.assign(rng.normal(0, 0.1, source.shape).astype(np.float32))
        target.assign(source)
    inputs = make_inputs()
    assert_same_outputs(around_encoder(inputs), from_config(inputs))

@pytest.mark.parametrize("model_class, kwargs, make_inputs", TASK_MODELS, ids=TASK_MODEL_IDS)
def test_encoder_instance_config_round_trip(model_class, kwargs, make_inputs):
    encoder = AlbertEncoder(tiny_config(share_type="attention"), recompute_blocks=2, name="my_encoder")
    model = model_class(encoder=encoder, **kwargs)
    config = model.get_config()
    assert "config" not in config and "recompute_blocks" not in config
    assert config["encoder"] == keras.saving.serialize_keras_object(encoder)
    json.dumps(config)

    restored = model_class.from_config(config)
    assert restored.get_config() == config
    assert restored.encoder is not encoder and isinstance(restored.encoder, AlbertEncoder)
    assert restored.encoder.name == "my_encoder"
    assert restored.config == encoder.config and restored.recompute_blocks == 2
    for name, value in kwargs.items():
        assert getattr(restored, name) == value

    serialized = keras.saving.serialize_keras_object(model)
    revived = keras.saving.deserialize_keras_object(serialized, custom_objects={model_class.__name__: model_class})
    assert type(revived) is model_class and revived.get_config() == config
    inputs = make_inputs()
    for source, target in zip(model.weights, revived.weights):
        target.assign(source)
    assert_same_outputs(revived(inputs), model(inputs))


@pytest.mark.parametrize("model_class, kwargs, make_inputs", TASK_MODELS, ids=TASK_MODEL_IDS)
def test_config_built_model_keeps_its_config_form(model_class, kwargs, make_inputs):
    model = model_class(tiny_config(), recompute_blocks=True, **kwargs)
    config = model.get_config()
    assert "encoder" not in config
    assert config["config"] == tiny_config().to_dict() and config["recompute_blocks"] is True
    assert model_class.from_config(config).get_config() == config
    assert model_class(tiny_config(), **kwargs).get_config()["recompute_blocks"] is False


def test_config_or_encoder_exactly_one_and_recompute_blocks_is_the_encoders():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    with pytest.raises(ValueError, match="exactly one of config= .* and encoder= .*got both"):
        AlbertClassifier(config, num_labels=2, encoder=encoder)
    with pytest.raises(ValueError, match="AlbertSpanPredictor takes exactly one .*got neither"):
        AlbertSpanPredictor()
    with pytest.raises(ValueError, match="recompute_blocks=True is the encoder's option"):
        AlbertPretrainer(encoder=encoder, recompute_blocks=True)
    with pytest.raises(TypeError, match="encoder= must be an AlbertEncoder, got AlbertConfig"):
        AlbertSquadV2(encoder=config)
    with pytest.raises(TypeError, match="AlbertMultipleChoice got an AlbertEncoder as config=; pass it as encoder="):
        AlbertMultipleChoice(encoder)


def test_one_encoder_serves_two_task_models():
    encoder = AlbertEncoder(tiny_config())
    classifier = AlbertClassifier(encoder=encoder, num_labels=2)
    span_predictor = AlbertSpanPredictor(encoder=encoder)
    encoder.embeddings.word_embeddings.assign(tf.ones_like(encoder.embeddings.word_embeddings))
    inputs = encoder_inputs()
    pooled = span_predictor.encoder(inputs)["pooled_output"].numpy()
    expected = pooled @ classifier.head.output_weights.numpy().T + classifier.head.output_bias.numpy()
    np.testing.assert_allclose(classifier(inputs), expected, atol=1e-6)
