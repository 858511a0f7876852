import numpy as np
import tensorflow as tf

from albert_tf.training.pretraining_losses import pretraining_loss, pretraining_metric_sums


def make_case(seed=0):
    rng = np.random.default_rng(seed)
    outputs = {"mlm_logits": rng.normal(size=(3, 4, 11)).astype(np.float32),
               "sop_logits": rng.normal(size=(3, 2)).astype(np.float32)}
    batch = {"masked_lm_ids": rng.integers(0, 11, (3, 4)).astype(np.int32),
             "masked_lm_weights": np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], np.float32),
             "next_sentence_labels": np.array([0, 1, 1], np.int32)}
    return outputs, batch


def cross_entropy(logits, labels):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def test_loss_is_the_originals():
    outputs, batch = make_case()
    total, parts = pretraining_loss({k: tf.constant(v) for k, v in outputs.items()},
                                    {k: tf.constant(v) for k, v in batch.items()})
    w = batch["masked_lm_weights"]
    mlm = (w * cross_entropy(outputs["mlm_logits"], batch["masked_lm_ids"])).sum() / (w.sum() + 1e-5)
    sop = cross_entropy(outputs["sop_logits"], batch["next_sentence_labels"]).mean()
    np.testing.assert_allclose(parts["masked_lm_loss"], mlm, rtol=1e-6)
    np.testing.assert_allclose(parts["sentence_order_loss"], sop, rtol=1e-6)
    np.testing.assert_allclose(total, mlm + sop, rtol=1e-6)


def test_training_masked_lm_accuracy_counts_the_weighted_positions_only():
    outputs, batch = make_case()
    predicted = outputs["mlm_logits"].argmax(-1)
    # Right at (0, 0), (1, 2) and at the unweighted (2, 3); wrong elsewhere: 2 of the 7 weighted positions.
    batch["masked_lm_ids"] = (predicted + 1) % 11
    for row, column in ((0, 0), (1, 2), (2, 3)):
        batch["masked_lm_ids"][row, column] = predicted[row, column]
    _, parts = pretraining_loss(outputs, batch)
    np.testing.assert_allclose(parts["masked_lm_accuracy"], 2 / (7 + 1e-5), rtol=1e-6)


def test_batch_without_predictions_does_not_divide_by_zero():
    outputs, batch = make_case()
    batch["masked_lm_weights"] = np.zeros_like(batch["masked_lm_weights"])
    _, parts = pretraining_loss(outputs, batch)
    assert float(parts["masked_lm_loss"]) == 0.0


def test_metric_sums_weight_mlm_by_masked_lm_weights():
    outputs, batch = make_case(1)
    sums = pretraining_metric_sums(outputs, batch)
    w = batch["masked_lm_weights"]
    correct = (outputs["mlm_logits"].argmax(-1) == batch["masked_lm_ids"]).astype(np.float32)
    numerator, denominator = sums["masked_lm_accuracy"]
    np.testing.assert_allclose([numerator, denominator], [(correct * w).sum(), w.sum()], rtol=1e-6)
    sop_correct = (outputs["sop_logits"].argmax(-1) == batch["next_sentence_labels"]).sum()
    np.testing.assert_allclose(sums["sentence_order_accuracy"], [sop_correct, 3], rtol=1e-6)
    loss_sum, count = sums["masked_lm_loss"]
    np.testing.assert_allclose(loss_sum / count,
                               (w * cross_entropy(outputs["mlm_logits"], batch["masked_lm_ids"])).sum() / w.sum(),
                               rtol=1e-6)


def test_sentence_loss_weight_scales_the_sentence_loss_and_zero_leaves_the_masked_lm_alone():
    outputs, batch = make_case(2)
    _, parts = pretraining_loss(outputs, batch)
    for weight in (0.0, 0.5):
        total, weighted_parts = pretraining_loss(outputs, batch, sentence_loss_weight=weight)
        np.testing.assert_allclose(total, parts["masked_lm_loss"] + weight * parts["sentence_order_loss"], rtol=1e-6)
        np.testing.assert_allclose(weighted_parts["sentence_order_loss"], parts["sentence_order_loss"], rtol=1e-6)


def test_masked_lm_loss_is_the_one_hot_formula_bit_for_bit_and_its_gradient_within_rounding():
    outputs, batch = make_case(seed=3)
    logits = tf.constant(outputs["mlm_logits"] * 6.0)
    tensors = {k: tf.constant(v) for k, v in batch.items()}

    def loss_and_gradient(loss_fn):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = loss_fn()
        return loss, tape.gradient(loss, logits)

    def original():  # run_pretraining.py's get_masked_lm_output
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot = tf.one_hot(tensors["masked_lm_ids"], depth=logits.shape[-1], dtype=tf.float32)
        per_example = -tf.reduce_sum(log_probs * one_hot, axis=[-1])
        weights = tensors["masked_lm_weights"]
        return tf.reduce_sum(weights * per_example) / (tf.reduce_sum(weights) + 1e-5)

    ours = loss_and_gradient(lambda: pretraining_loss({"mlm_logits": logits, "sop_logits": outputs["sop_logits"]},
                                                      tensors, sentence_loss_weight=0.0)[1]["masked_lm_loss"])
    (loss, gradient), (expected_loss, expected_gradient) = ours, loss_and_gradient(original)
    np.testing.assert_array_equal(loss, expected_loss)
    # Rounding: at a label whose probability is near 1, p - 1 cancels (one float32 ulp of 1 over the weight sum).
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-6, atol=1e-7)
