"""Tests for data_gen/pretraining/build_vocab.py: the vocabulary's inputs and output on a URL (ram:// stands in for
gs://)."""
import tempfile

import pytest
import tensorflow as tf
from sentencepiece import sentencepiece_model_pb2

from data_gen.pretraining import build_vocab
from tests.helpers import write_corpus


def _read(path):
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def test_a_ram_corpus_trains_the_local_model_to_a_ram_prefix(tmp_path, monkeypatch, ram_root):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_corpus(str(tmp_path / "a" / "corpus.txt"), seed=1)
    second = write_corpus(str(tmp_path / "b" / "corpus.txt"), seed=2)
    local_model = build_vocab.train_sentencepiece([first, second], str(tmp_path / "local"), vocab_size=120)
    # Two remote files of one name: their scratch copies must not overwrite each other.
    for folder, path in (("a", first), ("b", second)):
        tf.io.gfile.makedirs(f"{ram_root}/corpus/{folder}")
        tf.io.gfile.copy(path, f"{ram_root}/corpus/{folder}/corpus.txt")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    inputs = build_vocab.expand_input_files(f"{ram_root}/corpus/*/corpus.txt")
    assert inputs == [f"{ram_root}/corpus/a/corpus.txt", f"{ram_root}/corpus/b/corpus.txt"]
    model_path = build_vocab.train_sentencepiece(inputs, f"{ram_root}/vocab/spm", vocab_size=120)

    assert model_path == f"{ram_root}/vocab/spm.model"
    assert _read(f"{ram_root}/vocab/spm.vocab") == _read(str(tmp_path / "local.vocab"))
    # The model SentencePiece writes for local files of the given names: only the recorded names differ.
    expected = sentencepiece_model_pb2.ModelProto.FromString(_read(local_model))
    del expected.trainer_spec.input[:]
    expected.trainer_spec.input.extend(inputs)
    expected.trainer_spec.model_prefix = f"{ram_root}/vocab/spm"
    assert _read(model_path) == expected.SerializeToString()
    assert list(scratch.iterdir()) == []  # the local copies went to a temporary directory, now removed


def test_a_local_prefix_from_a_ram_corpus_records_the_ram_input(tmp_path, ram_root):
    corpus = write_corpus(str(tmp_path / "corpus.txt"))
    tf.io.gfile.copy(corpus, f"{ram_root}/corpus.txt")
    model_path = build_vocab.train_sentencepiece([f"{ram_root}/corpus.txt"], str(tmp_path / "spm"), vocab_size=120)
    model = sentencepiece_model_pb2.ModelProto.FromString(_read(model_path))
    assert list(model.trainer_spec.input) == [f"{ram_root}/corpus.txt"]
    assert model.trainer_spec.model_prefix == str(tmp_path / "spm")


def test_missing_and_empty_ram_inputs_are_named(ram_root):
    with pytest.raises(FileNotFoundError, match=f"--input: no file matches '{ram_root}/missing/\\*.txt'"):
        build_vocab.expand_input_files(f"{ram_root}/missing/*.txt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        build_vocab.train_sentencepiece([f"{ram_root}/gone.txt"], f"{ram_root}/spm", vocab_size=120)
    with tf.io.gfile.GFile(f"{ram_root}/empty.txt", "w") as handle:
        handle.write("")
    with pytest.raises(ValueError, match=f"'{ram_root}/empty.txt' is empty"):
        build_vocab.train_sentencepiece([f"{ram_root}/empty.txt"], f"{ram_root}/spm", vocab_size=120)
