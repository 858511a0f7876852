"""What the serving tests share: a tiny fine-tuned classifier as run_classifier leaves it, and a dev file for it."""

import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.training.checkpointing import TrainingCheckpoints
from tests.helpers import randomize, tiny_config_values

TINY = tiny_config_values(vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                          initializer_range=0.02)
LABELS = ("bird", "cat", "dog")


def write_fine_tuned(directory):
    """A 3-label classifier of TINY as run_classifier leaves it: ckpt-5 (the Trainer's checkpoint), its
    albert_config.json and labels.txt. Its weights are random (helpers.randomize: every one matters, none exactly
    0 or 1), its head rescaled so the logits over random ids are centred and of unit root mean square: each label
    is predicted for some texts, and a drift of 1e-2 is 1% of a logit."""
    config = AlbertConfig(**TINY)
    model = AlbertClassifier(config, num_labels=len(LABELS), dropout_rate=0.0)
    ids = np.random.default_rng(0).integers(5, config.vocab_size, (64, 24)).astype(np.int32)
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    model(inputs, training=False)
    randomize(model)
    logits = model(inputs, training=False).numpy()
    scale = float(np.sqrt(np.mean((logits - logits.mean(axis=0)) ** 2)))
    bias = model.head.output_bias.numpy()
    model.head.output_weights.assign(model.head.output_weights / scale)
    model.head.output_bias.assign((bias - logits.mean(axis=0)) / scale)
    directory.mkdir(parents=True, exist_ok=True)
    TrainingCheckpoints(tf.distribute.get_strategy(), model, None, str(directory), 1).save(5)
    config.to_json_file(str(directory / "albert_config.json"))
    (directory / "labels.txt").write_text("".join(f"{label}\n" for label in LABELS))
    return model


def write_dev_file(path, count=40, with_labels=True):
    """A TSV of `count` sentences of 2 to 40 words (some longer than 32 pieces), labelled from LABELS at random
    (without `with_labels`, the sentence column alone); returns (path, the sentences, the labels)."""
    rng = np.random.default_rng(1)
    words = "the cat sat on a mat while some dogs ran past two birds in old trees near water".split()
    sentences = [" ".join(rng.choice(words, rng.integers(2, 40))) for _ in range(count)]
    labels = [LABELS[index] for index in rng.integers(len(LABELS), size=count)]
    lines = (["sentence\tlabel"] + [f"{sentence}\t{label}" for sentence, label in zip(sentences, labels)]
             if with_labels else ["sentence"] + sentences)
    path.write_text("".join(line + "\n" for line in lines))
    return path, sentences, labels
