"""The built-in small task (data_gen/pretraining/package_pair_task.py): the two packages with the most held-out
sentences, dev their held-out sentences, train a fixed count of each from the other documents."""
import pytest

from data_gen.pretraining import corpora, package_pair_task


def _documents():
    """Documents of three packages; which are held out follows corpora.is_holdout_document at 0.5."""
    documents = []
    for package, count in (("mail", 12), ("widgets", 12), ("misc", 4)):
        for index in range(count):
            documents.append((package, [f"The {package} document {index} says one thing.",
                                        f"It says another thing about {package} {index}."]))
    return documents


def _rows(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "sentence\tlabel"
    return [tuple(line.split("\t")) for line in lines[1:]]


def test_the_task_takes_the_two_packages_with_most_held_out_sentences(tmp_path, monkeypatch):
    documents = _documents()
    monkeypatch.setattr(corpora, "iter_sourced_documents", lambda include_site_packages=False: iter(documents))
    counts = package_pair_task.write_package_pair_task(str(tmp_path), train_examples_per_package=5,
                                                       holdout_fraction=0.5)
    held_out = {package: [sentence for name, sentences in documents if name == package
                          and corpora.is_holdout_document(sentences, 0.5) for sentence in sentences]
                for package in ("mail", "widgets", "misc")}
    assert len(held_out["misc"]) < min(len(held_out["mail"]), len(held_out["widgets"]))
    dev, train = _rows(tmp_path / "dev.tsv"), _rows(tmp_path / "train.tsv")
    assert dev == [(sentence, package) for package in ("mail", "widgets") for sentence in held_out[package]]
    assert counts == {"classes": ["mail", "widgets"], "train": 10, "dev": len(dev),
                      "dev_per_class": [len(held_out["mail"]), len(held_out["widgets"])]}
    assert [label for _, label in train] == ["mail"] * 5 + ["widgets"] * 5
    assert not {sentence for sentence, _ in train} & {sentence for sentence, _ in dev}
    with pytest.raises(ValueError, match="Package 'mail' has .* training sentences in the built-in corpus; the task "
                                         "asks for 100"):
        package_pair_task.write_package_pair_task(str(tmp_path), train_examples_per_package=100,
                                                  holdout_fraction=0.5)


def test_the_pair_task_takes_consecutive_sentences_of_the_same_packages(tmp_path, monkeypatch):
    documents = _documents()
    monkeypatch.setattr(corpora, "iter_sourced_documents", lambda include_site_packages=False: iter(documents))
    counts = package_pair_task.write_package_pair_task(str(tmp_path), train_examples_per_package=3,
                                                       holdout_fraction=0.5, sentence_pairs=True)
    lines = (tmp_path / "dev.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "\t".join(package_pair_task.PAIR_HEADER)
    dev = [tuple(line.split("\t")) for line in lines[1:]]
    assert dev == [(*sentences, package) for package in ("mail", "widgets") for name, sentences in documents
                   if name == package and corpora.is_holdout_document(sentences, 0.5)]
    train = [tuple(line.split("\t")) for line in (tmp_path / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert [label for *_, label in train] == ["mail"] * 3 + ["widgets"] * 3
    assert all(first.startswith("The ") and second.startswith("It says") for first, second, _ in train)
    assert counts["classes"] == ["mail", "widgets"] and counts["train"] == 6 and counts["dev"] == len(dev)
