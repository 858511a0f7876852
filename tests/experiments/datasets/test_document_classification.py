"""The held-out document classification set (albert_tf/experiments/datasets/document_classification.py), read back as
albert_tf.tasks.text_classification reads it."""
import collections

import pytest
import tensorflow as tf

from albert_tf.experiments.datasets import document_classification
from data_gen.readers import labeled_text

SCHEMA = labeled_text.LabeledTextSchema(text_field="sentence", label_field="label")


def _write(path, documents):
    path.write_text("".join("\n".join(sentences) + "\n\n" for sentences in documents), encoding="utf-8")
    return str(path)


def test_the_largest_documents_are_cut_to_equal_length_and_every_third_sentence_is_dev(tmp_path):
    documents = [[f"Doc {d} sentence {s}." for s in range(size)] for d, size in enumerate((4, 9, 2, 7, 7, 5))]
    documents[1][0] = 'Doc 1 sentence 0 says "quoted\tand tabbed".'
    counts = document_classification.write_document_classification_set(
        _write(tmp_path / "holdout.txt", documents), str(tmp_path / "set"), num_documents=3)
    # The three largest are documents 1 (9), 3 and 4 (7, the first of the ties); each is cut to 7 sentences.
    assert counts == {"documents": 3, "sentences_per_document": 7, "train": 15, "dev": 6}
    train = labeled_text.read_examples(str(tmp_path / "set" / "train.tsv"), SCHEMA)
    dev = labeled_text.read_examples(str(tmp_path / "set" / "dev.tsv"), SCHEMA)
    assert train[0].text_a == 'Doc 1 sentence 0 says "quoted and tabbed".'
    assert [example.text_a for example in dev[:2]] == ["Doc 1 sentence 2.", "Doc 1 sentence 5."]
    assert {example.text_a.split(" sentence")[0] for example in train} == {"Doc 1", "Doc 3", "Doc 4"}
    assert not {example.text_a for example in train} & {example.text_a for example in dev}
    assert collections.Counter(example.label for example in dev) == {"0": 2, "1": 2, "2": 2}
    assert labeled_text.collect_labels(train, SCHEMA) == ("0", "1", "2")


def test_too_few_long_documents_is_one_sentence_error(tmp_path):
    holdout = _write(tmp_path / "holdout.txt", [["One.", "Two.", "Three."], ["Only.", "Two."]])
    with pytest.raises(ValueError, match=r"holdout.txt: the document classification set needs num_documents=2 "
                                         r"\(at least 2\) documents of 3 or more sentences, and it has 1"):
        document_classification.write_document_classification_set(holdout, str(tmp_path / "set"), num_documents=2)


def test_ram_input_and_output_give_the_local_files(tmp_path, ram_root):
    documents = [[f"Doc {d} sentence {s}." for s in range(size)] for d, size in enumerate((4, 9, 7))]
    holdout = _write(tmp_path / "holdout.txt", documents)
    with tf.io.gfile.GFile(f"{ram_root}/holdout.txt", "wb") as handle:
        # "\r\n" line ends, read as open() reads them.
        handle.write((tmp_path / "holdout.txt").read_bytes().replace(b"\n", b"\r\n"))
    local = document_classification.write_document_classification_set(holdout, str(tmp_path / "set"), 2)
    remote = document_classification.write_document_classification_set(f"{ram_root}/holdout.txt",
                                                                        f"{ram_root}/set", 2)
    assert remote == local
    assert sorted(tf.io.gfile.listdir(f"{ram_root}/set")) == ["dev.tsv", "train.tsv"]
    for name in ("dev.tsv", "train.tsv"):
        with tf.io.gfile.GFile(f"{ram_root}/set/{name}", "rb") as handle:
            assert handle.read() == (tmp_path / "set" / name).read_bytes()


def test_a_missing_ram_input_is_named(ram_root):
    with pytest.raises(FileNotFoundError, match=f"'{ram_root}/holdout.txt' does not exist"):
        document_classification.read_text_documents(f"{ram_root}/holdout.txt")
