"""The loss, prediction and serving functions of the classification-style tasks (GLUE, RACE, your own files), and
the softmax cross-entropy and encoder inputs that SQuAD's and NER's own functions share.

Each takes the model and a batch in the driver's conventions (albert_tf/tasks/finetuning_task.py).

Example:
>>> round(float(softmax_cross_entropy(tf.constant([[0.0, 0.0]]), tf.constant([1]))[0]), 4)  # log 2
0.6931
"""

from typing import Dict

import tensorflow as tf

from albert_tf.tasks.finetuning_task import EXAMPLE_INDEX, LABEL_IDS
from albert_tf.training.metric_names import returns_metrics


def model_inputs(batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The encoder inputs of a batch (input_word_ids, input_mask, input_type_ids)."""
    return {name: batch[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}


def softmax_cross_entropy(logits, labels):
    """Per-example -sum(one_hot(label) * log_softmax(logits)), the original's classification loss."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    one_hot = tf.one_hot(tf.cast(labels, tf.int32), depth=tf.shape(logits)[-1], dtype=tf.float32)
    return -tf.reduce_sum(one_hot * log_probs, axis=-1)


@returns_metrics("accuracy")
def classification_loss_fn(model, batch):
    """Mean softmax cross-entropy of `label_ids` (GLUE classification, RACE over its choices)."""
    logits = model(model_inputs(batch), training=True)
    correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(batch[LABEL_IDS], tf.int32))
    return (tf.reduce_mean(softmax_cross_entropy(logits, batch[LABEL_IDS])),
            {"accuracy": tf.reduce_mean(tf.cast(correct, tf.float32))})


def classification_predict_fn(model, batch):
    logits = tf.cast(model(model_inputs(batch), training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), LABEL_IDS: batch[LABEL_IDS],
            EXAMPLE_INDEX: batch[EXAMPLE_INDEX], "per_example_loss": softmax_cross_entropy(logits, batch[LABEL_IDS])}


def classification_serving_fn(model, inputs):
    logits = tf.cast(model(inputs, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}


@returns_metrics()
def regression_loss_fn(model, batch):
    """Mean squared error of the single output against float `label_ids` (STS-B), as the original."""
    predictions = model(model_inputs(batch), training=True)[:, 0]
    return tf.reduce_mean(tf.square(predictions - tf.cast(batch[LABEL_IDS], tf.float32))), {}


def regression_predict_fn(model, batch):
    predictions = tf.cast(model(model_inputs(batch), training=False), tf.float32)[:, 0]
    labels = tf.cast(batch[LABEL_IDS], tf.float32)
    return {"predictions": predictions, LABEL_IDS: labels, EXAMPLE_INDEX: batch[EXAMPLE_INDEX],
            "per_example_loss": tf.square(predictions - labels)}


def regression_serving_fn(model, inputs):
    return {"predictions": tf.cast(model(inputs, training=False), tf.float32)[:, 0]}
