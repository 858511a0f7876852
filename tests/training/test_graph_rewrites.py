"""The tests trace without Grappler's remapper (tests/forked_scripts.py, `trace_without_remapping`): its fusions
change no result of a training step, at float32 and beyond bfloat16's rounding at mixed_bfloat16, so a test that
passes without them passes with them."""
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.eager import context

from albert_tf import AlbertConfig
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training import pretraining_losses
from tests import forked_scripts
from tests.helpers import random_inputs

VOCAB_SIZE = 60


@pytest.fixture
def remapping_restored():
    yield
    forked_scripts.trace_without_remapping()


def _batch():
    batch = random_inputs(batch=4, seq=16, vocab=VOCAB_SIZE, num_predictions=3)
    batch["masked_lm_ids"] = tf.constant(np.random.default_rng(1).integers(0, VOCAB_SIZE, (4, 3)), tf.int32)
    batch["masked_lm_weights"] = tf.ones([4, 3])
    batch["next_sentence_labels"] = tf.constant([0, 1, 0, 1])
    return batch


def _training_step(remapping):
    """The loss and gradients of one step of a two-layer pretrainer from seed 0, and the op types of the step's
    functions after Grappler rewrote them."""
    tf.config.optimizer.set_experimental_options({"remapping": remapping})
    keras.utils.set_random_seed(0)
    model = AlbertPretrainer(AlbertConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=64, embedding_size=16,
                                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    batch = _batch()

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss, _ = pretraining_losses.pretraining_loss(model(batch, training=True), batch)
        return loss, tape.gradient(loss, model.trainable_variables)

    context.enable_run_metadata()
    try:
        loss, gradients = step()
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    op_types = {node.op for graph in metadata.function_graphs for node in graph.post_optimization_graph.node}
    op_types |= {node.op for graph in metadata.function_graphs
                 for function in graph.post_optimization_graph.library.function for node in function.node_def}
    return float(loss), [tf.convert_to_tensor(gradient).numpy() for gradient in gradients], op_types


def _fused(op_types):
    return {op_type for op_type in op_types if "Fused" in op_type}


@pytest.mark.parametrize("policy,loss_tolerance,gradient_tolerance", [
    ("float32", 1e-6, 1e-5),
    ("mixed_bfloat16", 1e-4, 3e-2),  # bfloat16 keeps 8 bits: a fused kernel rounds its products elsewhere
])
def test_the_remapper_fuses_kernels_and_changes_no_result(remapping_restored, policy, loss_tolerance,
                                                          gradient_tolerance):
    assert tf.config.optimizer.get_experimental_options()["remapping"] is False
    keras.mixed_precision.set_global_policy(policy)
    loss_fused, gradients_fused, op_types_fused = _training_step(remapping=True)
    loss, gradients, op_types = _training_step(remapping=False)

    assert _fused(op_types_fused) and not _fused(op_types), (op_types_fused, op_types)
    assert loss == pytest.approx(loss_fused, rel=loss_tolerance)
    # Relative to the largest gradient: some are zero but for rounding (about 1e-13), in either graph.
    scale = max(np.max(np.abs(gradient)) for gradient in gradients_fused)
    for fused, unfused in zip(gradients_fused, gradients):
        np.testing.assert_allclose(unfused, fused, rtol=0, atol=gradient_tolerance * scale)
