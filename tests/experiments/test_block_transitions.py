"""Block transitions (albert_tf/experiments/block_transitions.py) against a direct computation on the encoder."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.experiments.block_transitions import block_transitions, deeper_shared_encoder
from albert_tf.models.encoder import AlbertEncoder
from tests.helpers import randomize

CONFIG = dict(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
              embedding_size=8)


def _batch():
    mask = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], np.int32)
    return {"input_word_ids": tf.constant(np.array([[2, 7, 9, 11, 3, 0], [2, 5, 3, 0, 0, 0]], np.int32)),
            "input_mask": tf.constant(mask), "input_type_ids": tf.zeros([2, 6], tf.int32)}


def test_distances_and_cosines_are_over_the_real_tokens_of_each_blocks_input_and_output():
    encoder = AlbertEncoder(AlbertConfig(share_type="none", **CONFIG))
    batch = _batch()
    encoder(batch)
    randomize(encoder, seed=1)
    measured = block_transitions(encoder, [batch])
    outputs = encoder(batch)["encoder_outputs"]
    real = batch["input_mask"].numpy().astype(bool)
    before, after = outputs[0].numpy()[real], outputs[1].numpy()[real]
    distances = np.linalg.norm(after - before, axis=-1)
    cosines = (before * after).sum(-1) / np.linalg.norm(before, axis=-1) / np.linalg.norm(after, axis=-1)
    assert len(measured["l2_distance"]) == 3
    assert measured["l2_distance"][1]["mean"] == pytest.approx(distances.mean(), rel=1e-5)
    assert measured["l2_distance"][1]["sd"] == pytest.approx(distances.std(), rel=1e-4)
    assert measured["cosine_similarity"][1]["mean"] == pytest.approx(cosines.mean(), rel=1e-5)


def test_the_shared_block_runs_deeper_with_the_same_weights_and_only_when_shared():
    encoder = AlbertEncoder(AlbertConfig(share_type="all", **CONFIG))
    batch = _batch()
    encoder(batch)
    randomize(encoder, seed=2)
    deeper = deeper_shared_encoder(encoder, 6, batch)
    shallow, deep = encoder(batch)["encoder_outputs"], deeper(batch)["encoder_outputs"]
    assert len(deep) == 6
    np.testing.assert_allclose(deep[2].numpy(), shallow[2].numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="share_type='none'"):
        unshared = AlbertEncoder(AlbertConfig(share_type="none", **CONFIG))
        unshared(batch)
        deeper_shared_encoder(unshared, 6, batch)
