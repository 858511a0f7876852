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
