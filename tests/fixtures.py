"""Small generated data shared by the tests: a text corpus and a SentencePiece model trained on it."""
import os
import random

from data_gen import build_vocab

_WORDS = ("the model learns a shared block of attention and feed forward weights that runs at every depth "
          "sentence order prediction swaps two segments while masked language modelling hides tokens "
          "embedding tables are factorized into a small vocabulary projection followed by a dense layer "
          "training uses lamb with warmup and polynomial decay on large batches of text documents "
          "café naïve résumé 1990, 2001, 3.5 million people (approximately) — quoted \"words\" here").split()


def write_corpus(path, num_documents=40, sentences_per_document=(2, 8), seed=0):
    """Writes documents in the original format: one sentence per line, a blank line between documents."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(num_documents):
            for _ in range(rng.randint(*sentences_per_document)):
                words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 16))]
                handle.write(" ".join(words).capitalize() + ".\n")
            handle.write("\n")
    return path


def make_spm_model(directory, vocab_size=120, num_documents=60):
    """Trains a tiny SentencePiece model with the original flags and returns its .model path."""
    corpus = write_corpus(os.path.join(directory, "spm_corpus.txt"), num_documents=num_documents)
    return build_vocab.train_sentencepiece([corpus], os.path.join(directory, "tiny_spm"), vocab_size=vocab_size)


def write_pretraining_records(path, num_records=64, max_seq_length=16, max_predictions=3, vocab_size=60, seed=0):
    """Writes learnable pretraining records in the original format.

    Segment A holds ids in [10, 30) and segment B ids in [30, 50), each an ascending run, so a masked id
    is predictable from its neighbours; label 1 (SOP negative) swaps the two segments.
    """
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    half = (max_seq_length - 3) // 2
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(num_records):
            a = [10 + (int(rng.integers(0, 20)) + i) % 20 for i in range(half)]
            b = [30 + (int(rng.integers(0, 20)) + i) % 20 for i in range(half)]
            label = int(rng.integers(0, 2))
            first, second = (b, a) if label else (a, b)
            tokens = [2] + first + [3] + second + [3]
            segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            positions = sorted(rng.choice(np.arange(1, len(tokens) - 1), max_predictions, replace=False).tolist())
            positions = [p for p in positions if tokens[p] != 3]
            masked_ids = [tokens[p] for p in positions]
            inputs = list(tokens)
            for p in positions:
                inputs[p] = 4
            pad = max_seq_length - len(tokens)
            pad_predictions = max_predictions - len(positions)
            features = {
                "input_ids": inputs + [0] * pad,
                "input_mask": [1] * len(tokens) + [0] * pad,
                "segment_ids": segments + [0] * pad,
                "token_boundary": [1] * len(tokens) + [0] * pad,
                "masked_lm_positions": positions + [0] * pad_predictions,
                "masked_lm_ids": masked_ids + [0] * pad_predictions,
                "next_sentence_labels": [label],
            }
            example = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
                       for name, values in features.items()}
            example["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(
                value=[1.0] * len(positions) + [0.0] * pad_predictions))
            writer.write(tf.train.Example(features=tf.train.Features(feature=example)).SerializeToString())
    return path
