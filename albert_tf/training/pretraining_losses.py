"""The pretraining objective and evaluation metrics, as the original run_pretraining.py defines them."""

import tensorflow as tf

# The original adds this to the weight sum so a batch without predictions does not divide by zero.
MLM_DENOMINATOR_EPSILON = 1e-5
# The metrics pretraining_loss returns beside the loss.
PRETRAINING_LOSS_METRICS = ("masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss")


def _masked_lm_example_losses(outputs, batch):
    # The original's -sum(one_hot(label) * log_softmax(logits)) in one kernel: the same per-position losses
    # bit for bit, and a gradient within rounding, without the log-probabilities and the three
    # [batch, predictions, vocab] tensors their gradient makes (55 MB at ALBERT-base, 8 x 20 positions).
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(batch["masked_lm_ids"], tf.int32),
                                                          logits=tf.cast(outputs["mlm_logits"], tf.float32))


def _sentence_order_example_losses(outputs, batch):
    labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                         logits=tf.cast(outputs["sop_logits"], tf.float32))


def pretraining_loss(outputs, batch, sentence_loss_weight=1.0):
    """Returns (total loss, {masked_lm_loss, masked_lm_accuracy, sentence_order_loss}) for one (replica's) batch.

    MLM = Σ(w·CE) / (Σw + 1e-5) over the predicted positions; SOP = mean CE; total = MLM + weight · SOP, the
    original's sum at the default weight 1. Weight 0 is the MLM-only objective (the paper's Table 5 "None"): the
    sentence head then gets zero gradients (not none, so every variable keeps its optimizer slots) and its loss
    is still reported.
    """
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    masked_lm_loss = (tf.reduce_sum(weights * _masked_lm_example_losses(outputs, batch))
                      / (tf.reduce_sum(weights) + MLM_DENOMINATOR_EPSILON))
    sentence_order_loss = tf.reduce_mean(_sentence_order_example_losses(outputs, batch))
    # Not in the original's training log: the experiments' learning curves plot it (albert_tf/experiments).
    masked_lm_correct = tf.cast(tf.equal(tf.argmax(outputs["mlm_logits"], -1, output_type=tf.int32),
                                         tf.cast(batch["masked_lm_ids"], tf.int32)), tf.float32)
    masked_lm_accuracy = tf.reduce_sum(weights * masked_lm_correct) / (tf.reduce_sum(weights) + MLM_DENOMINATOR_EPSILON)
    return masked_lm_loss + sentence_loss_weight * sentence_order_loss, {
        "masked_lm_loss": masked_lm_loss, "masked_lm_accuracy": masked_lm_accuracy,
        "sentence_order_loss": sentence_order_loss}


def pretraining_metric_sums(outputs, batch):
    """Per-batch (numerator, denominator) sums; summed over batches they give the original's metrics.

    masked_lm_accuracy and masked_lm_loss are weighted by masked_lm_weights; sentence_order_accuracy
    and sentence_order_loss are per example; loss is the per-batch training objective averaged
    over batches, as the Estimator's eval `loss`.
    """
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    mlm_losses = _masked_lm_example_losses(outputs, batch)
    mlm_correct = tf.cast(tf.equal(tf.argmax(outputs["mlm_logits"], -1, output_type=tf.int32),
                                   tf.cast(batch["masked_lm_ids"], tf.int32)), tf.float32)
    sop_labels = tf.reshape(tf.cast(batch["next_sentence_labels"], tf.int32), [-1])
    sop_losses = _sentence_order_example_losses(outputs, batch)
    sop_correct = tf.cast(tf.equal(tf.argmax(outputs["sop_logits"], -1, output_type=tf.int32), sop_labels),
                          tf.float32)
    num_examples = tf.cast(tf.size(sop_labels), tf.float32)
    total_loss, _ = pretraining_loss(outputs, batch)
    weight_sum = tf.reduce_sum(weights)
    return {
        "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), weight_sum),
        "masked_lm_loss": (tf.reduce_sum(mlm_losses * weights), weight_sum),
        "sentence_order_accuracy": (tf.reduce_sum(sop_correct), num_examples),
        "sentence_order_loss": (tf.reduce_sum(sop_losses), num_examples),
        "loss": (total_loss, tf.constant(1.0)),
    }
