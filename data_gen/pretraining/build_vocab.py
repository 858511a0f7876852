"""Trains a SentencePiece unigram vocabulary with the original ALBERT spm_train flags.

The input files and the model prefix may be local paths or URLs (gs://, s3://, hdfs://, ram://). SentencePiece's
trainer reads and writes local files only, so a URL input is copied to a local temporary directory first, and a URL
prefix's model and vocabulary are written there and then copied to it. The model records the given input and prefix
names (its trainer_spec), not the temporary ones, as it would for local files of those names.
"""

import logging
import os
import tempfile
from typing import Iterable, List, Sequence, Union

import sentencepiece as spm

from albert_tf.tokenization import is_url
from data_gen import file_io

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
        matches = file_io.glob_files(pattern)
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

    Example:
    >>> train_sentencepiece(["gs://my-bucket/corpus-*.txt"], "gs://my-bucket/spm")  # doctest: +SKIP
    'gs://my-bucket/spm.model'
    """
    input_files = list(input_files)
    for path in input_files:
        if not file_io.is_file(path):
            raise FileNotFoundError(f"Vocabulary input {path!r} does not exist.")
        if file_io.file_size(path) == 0:
            raise ValueError(f"Vocabulary input {path!r} is empty.")
    if vocab_size <= len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS) + 2:
        raise ValueError(f"--vocab_size={vocab_size} is too small to hold the special and user-defined symbols.")
    directory = os.path.dirname(model_prefix)
    if directory:
        file_io.makedirs(directory)
    logging.info("Training a %d-piece SentencePiece model on %d file(s) -> %s.model",
                 vocab_size, len(input_files), model_prefix)
    with tempfile.TemporaryDirectory(prefix="albert_build_vocab_") as scratch:
        local_inputs = [_local_copy(path, scratch, index) for index, path in enumerate(input_files)]
        local_prefix = os.path.join(scratch, "spm") if is_url(model_prefix) else model_prefix
        spm.SentencePieceTrainer.train(
            input=local_inputs,
            model_prefix=local_prefix,
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
        if local_inputs != input_files or local_prefix != model_prefix:
            _record_given_paths(local_prefix + ".model", input_files, model_prefix)
        if local_prefix != model_prefix:
            for extension in (".model", ".vocab"):
                file_io.copy(local_prefix + extension, model_prefix + extension)
    return model_prefix + ".model"


def _record_given_paths(model_file: str, input_files: List[str], model_prefix: str) -> None:
    """Names the given inputs and prefix in the model's trainer_spec instead of their local scratch copies, so the
    model is the one SentencePiece writes for local files of those names."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    with open(model_file, "rb") as handle:
        model.ParseFromString(handle.read())
    del model.trainer_spec.input[:]
    model.trainer_spec.input.extend(input_files)
    model.trainer_spec.model_prefix = model_prefix
    with open(model_file, "wb") as handle:
        handle.write(model.SerializeToString())


def _local_copy(path: str, scratch: str, index: int) -> str:
    """`path` itself when local, else a copy in `scratch` (the index keeps same-named files of two folders apart)."""
    if not is_url(path):
        return path
    copy = os.path.join(scratch, f"input-{index:05d}-{os.path.basename(path)}")
    logging.info("Copying %s to %s for SentencePiece, which reads local files only", path, copy)
    file_io.copy(path, copy)
    return copy
