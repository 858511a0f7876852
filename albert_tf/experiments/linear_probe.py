"""A linear probe: how well a softmax classifier on an arm's frozen features separates a labelled text task.

Fine-tuning moves every weight, so its score mixes what pretraining learned with what the task teaches; a probe
keeps the pretrained encoder fixed and fits only a linear layer on its features, so it measures the
representation itself. The features of a sentence are its final hidden states averaged over its tokens
([CLS] and [SEP] included, padding excluded), computed once; each feature is standardized with the training set's
mean and standard deviation, and a multinomial logistic regression with a small L2 penalty is fitted by full-batch
Adam from zeros (deterministic: no sampling). Accuracy and loss are reported on dev.

Example (it needs an arm's checkpoint, so it is not run here):
>>> probe = run_linear_probe(config, "out/arms/sharing/none/seed0/ckpt-12000", "spm.model", "train.tsv",
...                          "dev.tsv", max_seq_length=128)  # doctest: +SKIP
>>> probe["accuracy"]  # doctest: +SKIP
0.42
"""

from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints.loading import load_weights
from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.tokenization import AlbertTokenizer
from data_gen.readers import labeled_text
from data_gen.readers.glue import encode_text_pair

# The fit: full-batch Adam steps, its learning rate and the L2 penalty on the weights (not the biases).
PROBE_STEPS = 1000
PROBE_LEARNING_RATE = 0.01
PROBE_L2 = 1e-4
FEATURE_BATCH_SIZE = 64


def mean_token_features(encoder: AlbertEncoder, tokenizer: AlbertTokenizer, texts: Sequence[str],
                        max_seq_length: int) -> np.ndarray:
    """[len(texts), hidden_size] float32: each text's final hidden states averaged over its tokens."""
    features = []
    for start in range(0, len(texts), FEATURE_BATCH_SIZE):
        encoded = [encode_text_pair(tokenizer, text, None, max_seq_length)
                   for text in texts[start:start + FEATURE_BATCH_SIZE]]
        inputs = {name: tf.constant([example[name] for example in encoded], tf.int32) for name in encoded[0]}
        hidden = tf.cast(encoder(inputs, training=False)["sequence_output"], tf.float32)
        mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, tf.newaxis]
        features.append((tf.reduce_sum(hidden * mask, axis=1) / tf.reduce_sum(mask, axis=1)).numpy())
    return np.concatenate(features, axis=0)


def fit_probe(train_features: np.ndarray, train_labels: np.ndarray,
              num_classes: int) -> Tuple[tf.Variable, tf.Variable]:
    """The weights and biases of a multinomial logistic regression on standardized features (see the module
    docstring).

    Example:
    >>> features = np.array([[0.0, 1.0], [0.1, 0.9], [1.0, 0.0], [0.9, 0.1]], np.float32)
    >>> weights, biases = fit_probe(features, np.array([0, 0, 1, 1]), num_classes=2)
    >>> probe_metrics(weights, biases, features, np.array([0, 0, 1, 1]))["accuracy"]
    1.0
    """
    features = tf.constant(train_features, tf.float32)
    labels = tf.constant(train_labels, tf.int32)
    weights = tf.Variable(tf.zeros([features.shape[1], num_classes]))
    biases = tf.Variable(tf.zeros([num_classes]))
    optimizer = tf.keras.optimizers.Adam(PROBE_LEARNING_RATE)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = tf.matmul(features, weights) + biases
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
            loss += PROBE_L2 * tf.reduce_sum(tf.square(weights))
        optimizer.apply_gradients(zip(tape.gradient(loss, [weights, biases]), [weights, biases]))

    for _ in range(PROBE_STEPS):
        step()
    return weights, biases


def probe_metrics(weights, biases, features: np.ndarray, labels: np.ndarray) -> Dict[str, float]:
    """Accuracy and mean cross-entropy of the probe on `features`."""
    logits = tf.matmul(tf.constant(features, tf.float32), weights) + biases
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(labels, tf.int32), logits))
    accuracy = float(np.mean(np.argmax(logits.numpy(), axis=1) == labels))
    return {"accuracy": accuracy, "loss": float(loss)}


def _texts_and_labels(path: str, schema: labeled_text.LabeledTextSchema) -> Tuple[List[str], List[str]]:
    examples = labeled_text.read_examples(path, schema)
    return [example.text_a for example in examples], [example.label for example in examples]


def run_linear_probe(config: AlbertConfig, checkpoint: str, spm_model_file: str, train_file: str, dev_file: str,
                     max_seq_length: int, schema: labeled_text.LabeledTextSchema) -> Dict[str, float]:
    """The probe's dev accuracy and loss, its training accuracy and the dev examples' count, for the encoder of
    `checkpoint` (an arm's pretraining checkpoint) on the `schema` TSVs `train_file` and `dev_file`."""
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    encoder = AlbertEncoder(config)
    encoder({name: tf.zeros([1, max_seq_length], tf.int32)
             for name in ("input_word_ids", "input_mask", "input_type_ids")})
    load_weights(encoder, checkpoint, allow_missing_heads=True)
    train_texts, train_label_names = _texts_and_labels(train_file, schema)
    dev_texts, dev_label_names = _texts_and_labels(dev_file, schema)
    classes = sorted(set(train_label_names))
    index = {label: position for position, label in enumerate(classes)}
    unknown = sorted(set(dev_label_names) - set(index))
    if unknown:
        raise ValueError(f"{dev_file} has labels {unknown} that {train_file} has not; the probe cannot score them.")
    train_labels = np.array([index[label] for label in train_label_names])
    dev_labels = np.array([index[label] for label in dev_label_names])
    train_features = mean_token_features(encoder, tokenizer, train_texts, max_seq_length)
    dev_features = mean_token_features(encoder, tokenizer, dev_texts, max_seq_length)
    mean, spread = train_features.mean(axis=0), train_features.std(axis=0) + 1e-6
    train_features, dev_features = (train_features - mean) / spread, (dev_features - mean) / spread
    weights, biases = fit_probe(train_features, train_labels, len(classes))
    return {**probe_metrics(weights, biases, dev_features, dev_labels),
            "train_accuracy": probe_metrics(weights, biases, train_features, train_labels)["accuracy"],
            "examples": int(len(dev_labels))}
