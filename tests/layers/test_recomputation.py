"""Block recomputation (albert_tf/layers/recomputation.py): same gradients, and XLA really re-runs the blocks."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.layers.recomputation import recompute_setting, run_blocks_recomputed
from albert_tf.layers.replica_dropout import ReplicaDropout, recording_dropout_seeds, replaying_dropout_seeds
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions
from tests import helpers


SIZES = dict(vocab_size=50, num_hidden_layers=3, max_position_embeddings=512, initializer_range=0.3)


def tiny_config(**overrides):
    return helpers.tiny_config(**{**SIZES, **overrides})


def encoder_inputs(batch=2, seq=7, seed=0):
    return helpers.random_inputs(batch=batch, seq=seq, vocab=50, seed=seed, padding=3, with_type_ids=False,
                                 with_predictions=False)


def twin_encoders(config, recompute_blocks=True):
    """Two encoders with the same weights and the same dropout seeds, one recomputing (`recompute_blocks`)."""
    encoders = []
    for recompute_blocks in (False, recompute_blocks):
        keras.utils.set_random_seed(7)
        encoders.append(AlbertEncoder(config, recompute_blocks=recompute_blocks))
    encoders[1].set_weights(encoders[0].get_weights())
    return encoders


def loss_and_gradients(encoder, inputs, jit_compile):
    # A fixed random projection of every output: the loss depends on every depth and every unit.
    projections = [tf.constant(np.random.default_rng(depth).normal(size=(1, 1, 16)), tf.float32)
                   for depth in range(encoder.config.num_hidden_layers + 1)]

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            outputs = encoder(inputs, training=True)
            hidden = [outputs["sequence_output"]] + outputs["encoder_outputs"][:-1]
            loss = sum(tf.reduce_sum(tf.tanh(tf.cast(h, tf.float32) * p)) for h, p in zip(hidden, projections))
            loss += tf.reduce_sum(tf.cast(outputs["pooled_output"], tf.float32))
        return loss, tape.gradient(loss, encoder.trainable_variables)

    return step()


def assert_same_loss_and_gradients(plain, recomputed, inputs, jit_compile):
    """The twins' float32 losses and gradients agree; returns the plain encoder's loss."""
    expected_loss, expected = loss_and_gradients(plain, inputs, jit_compile)
    loss, gradients = loss_and_gradients(recomputed, inputs, jit_compile)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-6)
    for variable, want, got in zip(plain.trainable_variables, expected, gradients):
        np.testing.assert_allclose(tf.convert_to_tensor(got), tf.convert_to_tensor(want), rtol=1e-4, atol=1e-5,
                                   err_msg=variable.path)
    return expected_loss


@pytest.mark.parametrize("share_type, jit_compile", [
    ("all", False), ("all", True), ("none", False), pytest.param("none", True, marks=pytest.mark.slow),
    ("attention", False), ("ffn", False)])
def test_recomputed_gradients_match_stored_activations(share_type, jit_compile):
    plain, recomputed = twin_encoders(tiny_config(share_type=share_type))
    assert_same_loss_and_gradients(plain, recomputed, encoder_inputs(), jit_compile)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_recomputation_replays_the_dropout_masks(jit_compile):
    config = tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.2)
    plain, recomputed = twin_encoders(config)
    inputs = encoder_inputs()
    expected_loss = assert_same_loss_and_gradients(plain, recomputed, inputs, jit_compile)
    if jit_compile:
        return
    # The twins drew the same masks; a third encoder with other seeds does not.
    keras.utils.set_random_seed(8)
    other = AlbertEncoder(config, recompute_blocks=True)
    other.set_weights(plain.get_weights())
    assert abs(float(loss_and_gradients(other, inputs, jit_compile)[0]) - float(expected_loss)) > 1e-3


def test_blocks_and_gradients_of_every_output_in_float64():
    kernel = tf.Variable(np.random.default_rng(0).normal(size=(3, 3)) * 0.7)
    scale = tf.Variable(np.array([0.5, -1.0, 2.0]))
    bias = tf.constant(np.random.default_rng(1).normal(size=(2, 3)))

    def block(index, hidden, block_bias):
        return tf.tanh(hidden @ kernel + block_bias) * (scale if index % 2 else 1.0)

    def loss_of(outputs):
        return sum(tf.reduce_sum(output * float(depth + 1)) for depth, output in enumerate(outputs))

    hidden = tf.constant(np.random.default_rng(2).normal(size=(2, 3)))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(hidden)
        outputs = run_blocks_recomputed(block, 4, hidden, bias)
        recomputed_loss = loss_of(outputs)
        plain, current = [], hidden
        for index in range(4):
            current = block(index, current, bias)
            plain.append(current)
        plain_loss = loss_of(plain)
    for target in (hidden, kernel, scale):
        np.testing.assert_allclose(tape.gradient(recomputed_loss, target), tape.gradient(plain_loss, target),
                                   rtol=1e-12)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_recomputing_the_first_blocks_only_gives_the_same_gradients(jit_compile):
    plain, recomputed = twin_encoders(tiny_config(), recompute_blocks=2)
    assert_same_loss_and_gradients(plain, recomputed, encoder_inputs(), jit_compile)


@pytest.mark.parametrize("value", [4, -1, 1.5, "all"])
def test_a_recompute_count_outside_the_applied_blocks_is_refused(value):
    with pytest.raises(ValueError, match=f"recompute_blocks={value!r} must be True, False or a number of blocks from "
                                         f"0 to 3"):
        AlbertEncoder(tiny_config(), recompute_blocks=value)


def test_recompute_setting_from_the_flags():
    assert recompute_setting(True, 0) is True and recompute_setting(False, 0) is False
    assert recompute_setting(False, 5) == 5 and recompute_setting(True, 5) == 5
    with pytest.raises(ValueError, match="--num_recomputed_blocks=-2 must be 0"):
        recompute_setting(True, -2)


def _dots_in_optimized_hlo(encoder, inputs):
    @tf.function(jit_compile=True)
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(encoder(inputs, training=True)["sequence_output"] ** 3)
        return tape.gradient(loss, encoder.trainable_variables)

    hlo = step.experimental_get_compiler_ir(inputs)(stage="optimized_hlo")
    return len(re.findall(r"= \S+ dot\(", hlo))


@pytest.mark.slow
def test_xla_keeps_the_recomputed_forward_pass():
    """XLA would merge a re-run block with the first run (common subexpressions) and keep the activations
    after all; the recomputed step must hold the blocks' forward matmuls twice."""
    config = tiny_config()
    plain, recomputed = twin_encoders(config)
    inputs = encoder_inputs()
    forward_dots_per_block = 8  # query, key, value, scores, context, output, two feed-forward
    extra = _dots_in_optimized_hlo(recomputed, inputs) - _dots_in_optimized_hlo(plain, inputs)
    assert extra == forward_dots_per_block * config.num_hidden_layers
    first_two = twin_encoders(config, recompute_blocks=2)[1]
    assert _dots_in_optimized_hlo(first_two, inputs) - _dots_in_optimized_hlo(plain, inputs) == \
        forward_dots_per_block * 2


def test_inference_does_not_recompute():
    plain, recomputed = twin_encoders(tiny_config())
    inputs = encoder_inputs()
    np.testing.assert_allclose(recomputed(inputs)["sequence_output"], plain(inputs)["sequence_output"], rtol=1e-6)


def test_option_reaches_the_pretrainer_and_survives_its_config(tmp_path):
    pretraining = Pretraining(tiny_config(), PretrainingOptions(output_dir=str(tmp_path), recompute_blocks=True))
    assert pretraining.model.encoder.recompute_blocks
    restored = AlbertPretrainer.from_config(pretraining.model.get_config())
    assert restored.recompute_blocks and restored.encoder.recompute_blocks
    assert not AlbertPretrainer(tiny_config()).encoder.recompute_blocks


def test_seed_replay_reports_a_mismatch():
    layer = ReplicaDropout(0.5, seed=3)
    inputs = tf.ones([4, 8])
    with recording_dropout_seeds() as seeds:
        first = layer(inputs, training=True)
    with replaying_dropout_seeds(seeds):
        np.testing.assert_array_equal(layer(inputs, training=True), first)
    with pytest.raises(RuntimeError, match="wants more dropout seeds than the 1 recorded"):
        with replaying_dropout_seeds(seeds):
            layer(inputs, training=True)
            layer(inputs, training=True)
    with pytest.raises(RuntimeError, match="used 0 dropout seeds; the recorded pass drew 1"):
        with replaying_dropout_seeds(seeds):
            pass
    with pytest.raises(RuntimeError, match="do not nest"):
        with recording_dropout_seeds(), replaying_dropout_seeds(seeds):
            pass


@pytest.mark.slow
def test_recomputation_under_mixed_bfloat16_and_xla():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    plain, recomputed = twin_encoders(tiny_config())
    assert recomputed.compute_dtype == "bfloat16"
    inputs = encoder_inputs()
    expected_loss, expected = loss_and_gradients(plain, inputs, jit_compile=True)
    loss, gradients = loss_and_gradients(recomputed, inputs, jit_compile=True)
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-3)
    for variable, want, got in zip(plain.trainable_variables, expected, gradients):
        got, want = tf.convert_to_tensor(got), tf.convert_to_tensor(want)
        assert got.dtype == tf.float32, variable.path
        if variable.path.endswith("key/bias"):
            continue  # Softmax ignores a per-query constant: this gradient is 0 plus rounding noise.
        # bfloat16 keeps 8 bits of mantissa: compare at the scale of each gradient tensor.
        scale = float(tf.reduce_max(tf.abs(want)))
        np.testing.assert_allclose(got, want, rtol=0, atol=0.02 * scale + 1e-6, err_msg=variable.path)
