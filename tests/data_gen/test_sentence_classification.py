"""The held-out document classification set and the sentence classification files (data_gen/sentence_classification.py)."""
import collections

import pytest

from data_gen import sentence_classification as data


def _write(path, documents):
    path.write_text("".join("\n".join(sentences) + "\n\n" for sentences in documents), encoding="utf-8")
    return str(path)


def test_the_largest_documents_are_cut_to_equal_length_and_every_third_sentence_is_dev(tmp_path):
    documents = [[f"Doc {d} sentence {s}." for s in range(size)] for d, size in enumerate((4, 9, 2, 7, 7, 5))]
    counts = data.write_document_classification_set(_write(tmp_path / "holdout.txt", documents),
                                                    str(tmp_path / "set"), num_documents=3)
    # The three largest are documents 1 (9), 3 and 4 (7, the first of the ties); each is cut to 7 sentences.
    assert counts == {"documents": 3, "sentences_per_document": 7, "train": 15, "dev": 6}
    train = data.read_examples(str(tmp_path / "set" / "train.tsv"))
    dev = data.read_examples(str(tmp_path / "set" / "dev.tsv"))
    assert [example.text_a for example in dev[:2]] == ["Doc 1 sentence 2.", "Doc 1 sentence 5."]
    assert {example.text_a.split(" sentence")[0] for example in train} == {"Doc 1", "Doc 3", "Doc 4"}
    assert not {example.text_a for example in train} & {example.text_a for example in dev}
    assert collections.Counter(example.label for example in dev) == {"0": 2, "1": 2, "2": 2}
    assert data.labels_of(train) == ["0", "1", "2"]
    assert data.majority_baseline(dev) == pytest.approx(1 / 3)


def test_too_few_documents_and_malformed_files_are_one_sentence_errors(tmp_path):
    holdout = _write(tmp_path / "holdout.txt", [["One.", "Two.", "Three."], ["Only.", "Two."]])
    with pytest.raises(ValueError, match=r"holdout.txt: the document classification set needs num_documents=2 "
                                         r"\(at least 2\) documents of 3 or more sentences, and it has 1"):
        data.write_document_classification_set(holdout, str(tmp_path / "set"), num_documents=2)
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\nA sentence.\t1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.tsv:1 must be the header 'sentence<TAB>label'"):
        data.read_examples(str(bad))
    bad.write_text("sentence\tlabel\nA sentence.\t1\nno label here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.tsv:3 must be a sentence and a label separated by one tab"):
        data.read_examples(str(bad))
