"""The held-out package classification (albert_tf/experiments/datasets/package_classification.py) and the packages
file the corpus writes beside its held-out text (data_gen/pretraining/corpora.py), read back as
albert_tf.tasks.text_classification reads them."""
import collections

import pytest

from albert_tf.experiments.datasets import package_classification
from data_gen.readers import labeled_text

SCHEMA = labeled_text.LabeledTextSchema(text_field="sentence", label_field="label")


def _write(tmp_path, documents):
    """The held-out text and its packages file from [(package, sentences)]."""
    text, packages = tmp_path / "holdout.txt", tmp_path / "holdout_packages.txt"
    text.write_text("".join("\n".join(sentences) + "\n\n" for _, sentences in documents), encoding="utf-8")
    packages.write_text("".join(package + "\n" for package, _ in documents), encoding="utf-8")
    return str(text), str(packages)


def _documents():
    """Package p{k} has k + 2 documents of 3 sentences; p0 and p1 also a sentence with a tab."""
    documents = [(f"p{k}", [f"p{k} doc {d} sentence {s}." for s in range(3)]) for k in range(4) for d in range(k + 2)]
    documents[0][1][0] = "p0 doc 0 says\ttabbed."
    return documents


def test_the_largest_packages_are_classes_cut_to_the_cap_and_split_by_whole_docstrings(tmp_path):
    text, packages = _write(tmp_path, _documents())
    counts = package_classification.write_package_classification_set(text, packages, str(tmp_path / "set"),
                                                                      num_packages=3, max_sentences_per_package=10)
    # p3 (15 sentences), p2 (12) and p1 (9) have the most; p3 and p2 are cut to 10, the last document cut short.
    assert counts["classes"] == ["p1", "p2", "p3"] and counts["dev"] + counts["train"] == 29
    train = labeled_text.read_examples(str(tmp_path / "set" / "train.tsv"), SCHEMA)
    dev = labeled_text.read_examples(str(tmp_path / "set" / "dev.tsv"), SCHEMA)
    assert collections.Counter(example.label for example in dev) == dict(zip("012", counts["dev_per_class"]))
    for label, package in enumerate(counts["classes"]):
        dev_texts = [example.text_a for example in dev if example.label == str(label)]
        train_texts = [example.text_a for example in train if example.label == str(label)]
        assert all(text.startswith(package + " ") for text in dev_texts + train_texts)
        # Dev takes whole documents until it holds half of the package's kept sentences.
        assert len(dev_texts) >= len(train_texts) and len(dev_texts) - 3 < (len(dev_texts) + len(train_texts)) / 2
        documents_of = {split: {text.rsplit(" sentence", 1)[0] for text in texts}
                        for split, texts in (("dev", dev_texts), ("train", train_texts))}
        assert not documents_of["dev"] & documents_of["train"]
    assert "p1 doc 0 says tabbed." not in {example.text_a for example in train + dev}  # p0 is not a class
    assert len([example for example in train + dev if example.text_a.startswith("p3")]) == 10


def test_the_split_depends_only_on_the_text(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    documents = _documents()
    results = [package_classification.write_package_classification_set(*_write(directory, order), str(directory / "s"),
                                                                       num_packages=2, max_sentences_per_package=12)
               for directory, order in ((first, documents), (second, documents[::-1]))]
    assert results[0] == results[1]
    assert sorted((first / "s" / "dev.tsv").read_text().splitlines()) == sorted(
        (second / "s" / "dev.tsv").read_text().splitlines())


def test_a_packages_file_of_another_length_and_too_few_packages_are_one_sentence_errors(tmp_path):
    text, packages = _write(tmp_path, _documents())
    with open(packages, "a", encoding="utf-8") as handle:
        handle.write("extra\n")
    with pytest.raises(ValueError,
                       match=r"holdout_packages.txt names 15 packages for the 14 documents of .*holdout.txt"):
        package_classification.write_package_classification_set(text, packages, str(tmp_path / "set"), 2, 10)
    text, packages = _write(tmp_path, _documents())
    with pytest.raises(ValueError, match=r"needs num_packages=5 \(at least 2\) packages .* and it has 4"):
        package_classification.write_package_classification_set(text, packages, str(tmp_path / "set"), 5, 10)
