"""check_model (tests/layer_checks.py) on every model in albert_tf/models, built from a tiny config."""
import pytest
import tensorflow as tf

from albert_tf import (AlbertClassifier, AlbertEncoder, AlbertMultipleChoice, AlbertPretrainer, AlbertSpanPredictor,
                       AlbertSquadV2, AlbertTokenClassifier)
from tests.helpers import random_inputs, tiny_config
from tests.layer_checks import check_model

ENCODER_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
NUM_CHOICES = 3


def encoder_inputs(length, batch=2):
    return {name: value for name, value in random_inputs(batch=batch, seq=length).items() if name in ENCODER_KEYS}


def multiple_choice_inputs(length):
    flat = encoder_inputs(length, batch=2 * NUM_CHOICES)
    return ({name: tf.reshape(value, [2, NUM_CHOICES, length]) for name, value in flat.items()},), {}


def squad_v2_inputs(length):
    """p_mask: the first position and row 1's padding cannot hold an answer."""
    inputs = encoder_inputs(length)
    padding = 1.0 - tf.cast(inputs["input_mask"], tf.float32)
    return (dict(inputs, p_mask=tf.concat([tf.ones([2, 1]), padding[:, 1:]], axis=1)),), {}


CASES = {
    "encoder": (AlbertEncoder, dict(config=tiny_config()), lambda length: ((encoder_inputs(length),), {})),
    "encoder_attention_shared": (AlbertEncoder, dict(config=tiny_config(share_type="attention", num_hidden_groups=2)),
                                 lambda length: ((encoder_inputs(length),), {})),
    "pretrainer": (AlbertPretrainer, dict(config=tiny_config()), lambda length: ((random_inputs(seq=length),), {})),
    "classifier": (AlbertClassifier, dict(config=tiny_config(), num_labels=3),
                   lambda length: ((encoder_inputs(length),), {})),
    "multiple_choice": (AlbertMultipleChoice, dict(config=tiny_config(), num_choices=NUM_CHOICES),
                        multiple_choice_inputs),
    "span_predictor": (AlbertSpanPredictor, dict(config=tiny_config()), lambda length: ((encoder_inputs(length),), {})),
    "token_classifier": (AlbertTokenClassifier, dict(config=tiny_config(), num_labels=5),
                         lambda length: ((encoder_inputs(length),), {})),
    "squad_v2": (AlbertSquadV2, dict(config=tiny_config(), start_n_top=2, end_n_top=3), squad_v2_inputs),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_passes_the_model_checks(case):
    model_class, init_kwargs, make_inputs = CASES[case]
    check_model(model_class, init_kwargs, make_inputs)
