"""A toy classifier and data for the training-loop tests, runnable as a subprocess for multi-device cases.

`python tests/_toy_training.py --model_dir=D --strategy=S [...]` trains, then prints one JSON line
`RESULT {...}` with the final loss, step and weights. Logical CPU devices and TF_CONFIG must be set up
before TensorFlow initialises, which is why those cases run in their own process.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import logging  # noqa: E402

from albert_tf.training import distribution, optimization  # noqa: E402
from albert_tf.training.checkpointing import TrainingPreempted  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402
from albert_tf.training.training_settings import enable_determinism  # noqa: E402

NUM_EXAMPLES = 96
NUM_FEATURES = 6
NUM_TOKENS = 10


def make_model(dropout_rate=0.0):
    features = keras.Input((NUM_FEATURES,), name="x")
    token = keras.Input((), dtype="int32", name="token")
    # An embedding lookup has a sparse (IndexedSlices) gradient, as ALBERT's word embeddings in fine-tuning.
    embedded = keras.layers.Embedding(NUM_TOKENS, 16, name="word_embeddings")(token)
    hidden = keras.layers.Dense(16, activation="tanh", name="dense")(features) + embedded
    hidden = keras.layers.LayerNormalization(name="LayerNorm")(hidden)
    hidden = keras.layers.Dropout(dropout_rate)(hidden)
    logits = keras.layers.Dense(2, name="output")(hidden)
    return keras.Model({"x": features, "token": token}, logits, name="toy")


def examples(num_examples=NUM_EXAMPLES):
    rng = np.random.default_rng(0)
    true_weights = rng.normal(size=NUM_FEATURES)
    # Drawn after the weights, so examples(n) is a prefix of examples(m) for n < m.
    x = rng.normal(size=(num_examples, NUM_FEATURES)).astype("float32")
    label = (x @ true_weights > 0).astype("int32")
    example_id = np.arange(num_examples, dtype="int32")
    return {"x": x, "token": example_id % NUM_TOKENS, "label": label, "example_id": example_id}


def _inputs(batch):
    return {"x": batch["x"], "token": batch["token"]}


def loss_fn(model, batch):
    logits = tf.cast(model(_inputs(batch), training=True), tf.float32)
    losses = keras.losses.sparse_categorical_crossentropy(batch["label"], logits, from_logits=True)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), batch["label"]),
                                      tf.float32))
    return tf.reduce_mean(losses), {"accuracy": accuracy}


def metrics_fn(model, batch):
    logits = tf.cast(model(_inputs(batch), training=False), tf.float32)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), batch["label"]), tf.float32)
    count = tf.cast(tf.shape(correct)[0], tf.float32)
    losses = keras.losses.sparse_categorical_crossentropy(batch["label"], logits, from_logits=True)
    return {"accuracy": (tf.reduce_sum(correct), count), "loss": (tf.reduce_sum(losses), count)}


def predict_fn(model, batch):
    return {"logits": tf.cast(model(_inputs(batch), training=False), tf.float32), "example_id": batch["example_id"]}


def train_dataset_fn(input_context, batch_size, skip_batches):
    data = tf.data.Dataset.from_tensor_slices(examples()).repeat()
    data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return data.batch(batch_size, drop_remainder=True).skip(skip_batches)


def make_eval_dataset_fn(num_examples):
    def eval_dataset_fn(input_context, batch_size, skip_batches):
        data = tf.data.Dataset.from_tensor_slices(examples(num_examples))
        data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return data.batch(batch_size).skip(skip_batches)

    return eval_dataset_fn


def build(strategy, model_dir, optimizer_name="lamb", learning_rate=0.05, num_train_steps=40, dropout_rate=0.0,
          training_loss_fn=loss_fn, **trainer_kwargs):
    with strategy.scope():
        model = make_model(dropout_rate)
        optimizer = optimization.create_optimizer(optimizer_name, init_lr=learning_rate,
                                                  num_train_steps=num_train_steps, num_warmup_steps=2)
    return Trainer(strategy, model, optimizer, training_loss_fn, model_dir=model_dir, **trainer_kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--strategy", default="one_device")
    parser.add_argument("--logical_cpus", type=int, default=1)
    parser.add_argument("--num_train_steps", type=int, default=6)
    parser.add_argument("--global_batch_size", type=int, default=8)
    parser.add_argument("--steps_per_loop", type=int, default=1)
    parser.add_argument("--save_checkpoints_steps", type=int, default=1000)
    parser.add_argument("--dropout_rate", type=float, default=0.0)
    parser.add_argument("--sigterm_at_step", type=int, default=0)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--eval_examples", type=int, default=0)
    parser.add_argument("--jit_compile", default="false")
    args = parser.parse_args()
    logging.set_verbosity(logging.INFO)

    if args.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus)
    if args.deterministic:
        enable_determinism(1234)
    strategy = distribution.get_strategy(args.strategy)
    trainer = build(strategy, args.model_dir, num_train_steps=args.num_train_steps, dropout_rate=args.dropout_rate,
                    steps_per_loop=args.steps_per_loop, save_checkpoints_steps=args.save_checkpoints_steps,
                    log_every_steps=1, jit_compile=args.jit_compile)
    if args.sigterm_at_step:
        threading.Thread(target=_send_sigterm_at, args=(trainer, args.sigterm_at_step), daemon=True).start()
    print("RESULT " + json.dumps(train_and_report(trainer, args.num_train_steps, args.global_batch_size,
                                                  args.eval_examples)), flush=True)


def train_and_report(trainer, num_train_steps, global_batch_size, eval_examples=0):
    """Trains (noting a preemption), optionally evaluates and predicts; returns JSON-ready results."""
    result = {"replicas": trainer.strategy.num_replicas_in_sync}
    try:
        result.update(trainer.train(train_dataset_fn, num_train_steps, global_batch_size))
    except TrainingPreempted as preempted:
        result.update(preempted=preempted.step)
    if eval_examples:
        eval_dataset_fn = make_eval_dataset_fn(eval_examples)
        result["evaluation"] = trainer.evaluate(eval_dataset_fn, metrics_fn, global_batch_size)
        predictions = trainer.predict(eval_dataset_fn, predict_fn, global_batch_size)
        result["predictions"] = {name: value.tolist() for name, value in predictions.items()}
    result["weights"] = [v.numpy().tolist() for v in trainer.model.weights]
    return result


def _send_sigterm_at(trainer, step):
    """Plays the cluster manager: SIGTERM once training reaches `step`, while the next loop runs."""
    while trainer.optimizer.iterations.numpy() < step:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    main()
