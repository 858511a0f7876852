"""Trains a SentencePiece unigram vocabulary with the original ALBERT spm_train flags."""

import glob
import logging
import os
from typing import Iterable, List, Sequence, Union

import sentencepiece as spm

# The original README's spm_train command: pad 0, unk 1, no bos/eos, three control symbols
# whose ids follow (2, 3, 4), and punctuation kept as whole pieces.
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")
CHARACTER_COVERAGE = 0.99995


def expand_input_files(patterns: Union[str, Sequence[str]], flag_name: str = "--input") -> List[str]:
    """Expands a comma list and/or globs into a sorted, de-duplicated list of existing files."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    files = []
    for pattern in patterns:
        pattern = pattern.strip()
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"{flag_name}: no file matches {pattern!r}.")
        files.extend(matches)
    if not files:
        raise FileNotFoundError(f"{flag_name} names no input files.")
    return sorted(dict.fromkeys(files))


def train_sentencepiece(input_files: Iterable[str], model_prefix: str, vocab_size: int = 30000,
                        input_sentence_size: int = 10_000_000, seed_sentencepiece_size: int = 1_000_000,
                        num_threads: int = 2) -> str:
    """Trains PREFIX.model and PREFIX.vocab and returns the .model path.

    Empty input files are an error naming the file: spm_train would otherwise fail with a
    message about the whole corpus.
    """
    input_files = list(input_files)
    for path in input_files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Vocabulary input {path!r} does not exist.")
        if os.path.getsize(path) == 0:
            raise ValueError(f"Vocabulary input {path!r} is empty.")
    if vocab_size <= len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS) + 2:
        raise ValueError(f"--vocab_size={vocab_size} is too small to hold the special and user-defined symbols.")
    directory = os.path.dirname(model_prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    logging.info("Training a %d-piece SentencePiece model on %d file(s) -> %s.model",
                 vocab_size, len(input_files), model_prefix)
    spm.SentencePieceTrainer.train(
        input=input_files,
        model_prefix=model_prefix,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=list(CONTROL_SYMBOLS),
        user_defined_symbols=list(USER_DEFINED_SYMBOLS),
        character_coverage=CHARACTER_COVERAGE,
        shuffle_input_sentence=True,
        input_sentence_size=input_sentence_size,
        seed_sentencepiece_size=seed_sentencepiece_size,
        num_threads=num_threads,
        hard_vocab_limit=True,
        minloglevel=2,
    )
    return model_prefix + ".model"
