"""check_layer (tests/layer_checks.py) on every layer in albert_tf/layers."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.layer_normalization import AlbertLayerNormalization
from albert_tf.layers.masked_lm_head import AlbertMaskedLMHead
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.layers.squad_v2_head import SquadV2Head
from tests.helpers import random_inputs
from tests.layer_checks import check_layer

HIDDEN, EMBEDDING, VOCAB = 16, 8, 60


def hidden_states(length, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=(2, length, HIDDEN)), tf.float32)


def attention_bias(length):
    """Row 1's last two positions are padding."""
    mask = random_inputs(seq=length)["input_mask"]
    return (1.0 - tf.cast(mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]) * -10000.0


def embeddings_inputs(length):
    inputs = random_inputs(seq=length, vocab=VOCAB)
    return (inputs["input_word_ids"], inputs["input_type_ids"]), {}


def masked_lm_inputs(length):
    table = tf.constant(np.random.default_rng(1).normal(size=(VOCAB, EMBEDDING)), tf.float32)
    return (hidden_states(length), random_inputs(seq=length)["masked_lm_positions"], table), {}


def p_mask(length):
    """The first position and row 1's padding cannot hold an answer."""
    mask = 1.0 - tf.cast(random_inputs(seq=length)["input_mask"], tf.float32)
    return tf.concat([tf.ones([2, 1]), mask[:, 1:]], axis=1)


CASES = {
    "embeddings": (AlbertEmbeddings, dict(vocab_size=VOCAB, embedding_size=EMBEDDING, max_position_embeddings=24,
                                          dropout_rate=0.1, initializer_range=0.2), embeddings_inputs),
    "attention": (AlbertAttention, dict(hidden_size=HIDDEN, num_attention_heads=2, attention_probs_dropout_prob=0.1,
                                        hidden_dropout_prob=0.1, initializer_range=0.2),
                  lambda length: ((hidden_states(length), attention_bias(length)), {})),
    "feed_forward": (AlbertFeedForward, dict(hidden_size=HIDDEN, intermediate_size=32, hidden_dropout_prob=0.1,
                                             initializer_range=0.2),
                     lambda length: ((hidden_states(length),), {})),
    "layer_normalization": (AlbertLayerNormalization, dict(epsilon=1e-12, gamma_initializer="random_normal",
                                                           beta_initializer="random_normal"),
                            lambda length: ((hidden_states(length),), {})),
    "masked_lm_head": (AlbertMaskedLMHead, dict(vocab_size=VOCAB, embedding_size=EMBEDDING, initializer_range=0.2),
                       masked_lm_inputs),
    # A pooled output has no sequence axis: the batch is what varies.
    "classification_head": (ClassificationHead, dict(hidden_size=HIDDEN, num_classes=3, initializer_range=0.2),
                            lambda length: ((hidden_states(length)[0],), {})),
    "replica_dropout": (ReplicaDropout, dict(rate=0.1, seed=3), lambda length: ((hidden_states(length),), {})),
    "squad_v2_head": (SquadV2Head, dict(hidden_size=HIDDEN, start_n_top=2, end_n_top=3, initializer_range=0.2),
                      lambda length: ((hidden_states(length), p_mask(length)), {})),
    "squad_v2_head_with_start_positions": (
        SquadV2Head, dict(hidden_size=HIDDEN, start_n_top=2, end_n_top=3, initializer_range=0.2),
        lambda length: ((hidden_states(length), p_mask(length)), {"start_positions": tf.constant([1, length - 1])})),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_passes_the_layer_checks(case):
    layer_class, init_kwargs, make_inputs = CASES[case]
    check_layer(layer_class, init_kwargs, make_inputs)
