"""The driver's toy task: a linear classifier of raw ids that learns in a second, for the tests of the driver
(test_finetuning) and of multi-seed runs (test_multi_seed)."""
import keras
import numpy as np
import tensorflow as tf

from albert_tf.tasks.classification_functions import (classification_loss_fn, classification_predict_fn,
                                                      classification_serving_fn)
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask
from albert_tf.training import metrics

SEQ = 6


class ToyClassifier(keras.Model):
    """Logits from the raw ids: the label (first id > second id) is linear in them."""

    def __init__(self, num_labels=2, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(num_labels, name="output")

    def call(self, inputs, training=False):
        return self.dense(tf.cast(inputs["input_word_ids"], tf.float32) / 10.0)


def toy_examples(count, seed):
    ids = np.random.default_rng(seed).integers(0, 10, size=(count, SEQ)).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids),
            "label_ids": (ids[:, 0] > ids[:, 1]).astype(np.int32), "example_index": np.arange(count, dtype=np.int32)}


def toy_split(name, count, seed, suffix=""):
    data = toy_examples(count, seed)
    return DataSplit(name, lambda: tf.data.Dataset.from_tensor_slices(data), count, suffix)


def toy_task(written, with_mismatched=False):
    """A classification task on toy_examples; its write_predictions puts each split's outputs in `written`."""
    def compute_metrics(split, outputs):
        return {"accuracy": metrics.accuracy(outputs["logits"].argmax(-1), outputs["label_ids"])}

    def write_eval_predictions(path, split, outputs):
        np.savetxt(path, outputs["logits"].argmax(-1), fmt="%d")

    def write_predictions(output_dir, split, outputs):
        written[split.name] = outputs

    sequence = tf.TensorSpec([None, SEQ], tf.int32)
    evaluation = [toy_split("dev", 50, 1)] + ([toy_split("dev_mismatched", 30, 2, "_mismatched")]
                                              if with_mismatched else [])
    return FinetuningTask(
        name="toy", build_model=lambda config, dropout_rate, recompute_blocks: ToyClassifier(name="toy_classifier"),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=classification_loss_fn, predict_fn=classification_predict_fn, serving_fn=classification_serving_fn,
        compute_metrics=compute_metrics, best_metric="accuracy",
        train_data=toy_split("train", 200, 0), eval_splits=evaluation, predict_splits=[toy_split("test", 23, 3)],
        write_eval_predictions=write_eval_predictions, write_predictions=write_predictions)


def toy_options(output_dir, **changes):
    """FinetuningOptions of a 60-step toy run, with `changes`."""
    values = dict(output_dir=str(output_dir), preset="albert-base", max_seq_length=SEQ, train_step=60,
                  warmup_step=5, learning_rate=0.05, train_batch_size=10, eval_batch_size=64, predict_batch_size=64,
                  save_checkpoints_steps=20, steps_per_loop=20, jit_compile=False)
    values.update(changes)
    return FinetuningOptions(**values)
