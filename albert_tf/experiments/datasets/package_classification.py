"""The held-out package classification that the reproduction's medium budget fine-tunes and probes every arm on:
which of K Python packages a held-out docstring sentence comes from, as `sentence<TAB>label` TSV files that
albert_tf.tasks.text_classification reads (data_gen.readers.labeled_text, text_field "sentence", label_field "label").

It is built from held-out text (one sentence per line, a blank line between documents) that no arm pretrained on,
and its packages file (a line per document: data_gen.pretraining.corpora.write_corpus's `holdout_packages_path`):
- the K packages with the most held-out sentences (a tie: the name first in sort order) are the classes;
- a package's documents are taken whole, in the order of a hash of their text, until they hold
  `max_sentences_per_package` sentences (the last one cut), so that the largest packages do not make up most of
  the set; the docstring corpus is skewed (a few packages hold most of its sentences);
- of those, documents go to dev in the same order until dev holds half of the package's sentences, the rest to
  train, so no dev sentence shares its docstring with a training sentence.
The classes are not balanced: the dev majority baseline is the largest class's share.
Neither pretraining objective names a package; the masked LM predicts tokens inside a sentence and SOP the order
of two segments of one document.

Example:
>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> text, packages = os.path.join(directory, "holdout.txt"), os.path.join(directory, "holdout_packages.txt")
>>> documents = [("a", ["A1 x.", "A1 y."]), ("b", ["B1 x.", "B1 y."]), ("a", ["A2 x.", "A2 y."]),
...              ("b", ["B2 x.", "B2 y.", "B2 z."]), ("c", ["C1 x.", "C1 y."])]
>>> _ = open(text, "w").write("".join("\\n".join(sentences) + "\\n\\n" for _, sentences in documents))
>>> _ = open(packages, "w").write("".join(package + "\\n" for package, _ in documents))
>>> write_package_classification_set(text, packages, os.path.join(directory, "packages"), num_packages=2,
...                                  max_sentences_per_package=4)
{'classes': ['a', 'b'], 'train': 4, 'dev': 4, 'dev_per_class': [2, 2]}
"""

import hashlib
import os
from typing import Dict, List, Sequence, Tuple

from albert_tf.experiments.datasets.document_classification import SPLIT_FILES, read_text_documents, write_rows
from data_gen import file_io


def read_packages(path: str) -> List[str]:
    with file_io.open_text_for_reading(path) as handle:
        return [line.strip() for line in handle if line.strip()]


def _document_rank(sentences: Sequence[str]) -> bytes:
    return hashlib.sha256("\n".join(sentences).encode("utf-8")).digest()


def _split_package(documents: Sequence[List[str]], max_sentences: int) -> Tuple[List[str], List[str]]:
    """(dev sentences, training sentences) of one package (see the module docstring), each in hash order."""
    ranked = [documents[index] for index in sorted(range(len(documents)),
                                                   key=lambda index: _document_rank(documents[index]))]
    kept, total = [], 0
    for sentences in ranked:
        if total >= max_sentences:
            break
        kept.append(list(sentences[:max_sentences - total]))
        total += len(kept[-1])
    dev, train = [], []
    for sentences in kept:
        (dev if len(dev) < total / 2 else train).extend(sentences)
    return dev, train


def write_package_classification_set(text_file: str, packages_file: str, output_dir: str, num_packages: int,
                                     max_sentences_per_package: int) -> Dict[str, object]:
    """Writes train.tsv and dev.tsv of the `num_packages`-way package classification (see the module docstring)
    under `output_dir` and returns the classes (a sentence's label is its class's index), the split sizes and the
    dev sentences per class."""
    documents = read_text_documents(text_file)
    packages = read_packages(packages_file)
    if len(packages) != len(documents):
        raise ValueError(f"{packages_file} names {len(packages)} packages for the {len(documents)} documents of "
                         f"{text_file}; write both again with data_gen.pretraining.corpora.write_corpus.")
    by_package: Dict[str, List[List[str]]] = {}
    for package, sentences in zip(packages, documents):
        by_package.setdefault(package, []).append(sentences)
    sizes = {package: sum(map(len, docs)) for package, docs in by_package.items()}
    classes = sorted(sorted(by_package, key=lambda package: (-sizes[package], package))[:num_packages])
    splits = {package: _split_package(by_package[package], max_sentences_per_package) for package in classes}
    usable = [package for package, (dev, train) in splits.items() if dev and train]
    if num_packages < 2 or len(usable) < num_packages:
        raise ValueError(f"{text_file}: the package classification set needs num_packages={num_packages} (at least "
                         f"2) packages whose held-out text fills a dev and a training document, and it has "
                         f"{len(usable)}; hold out more text or ask for fewer packages.")
    rows = {"train": [], "dev": []}
    for label, package in enumerate(classes):
        for split, sentences in zip(("dev", "train"), splits[package]):
            rows[split].extend((sentence.replace("\t", " "), str(label)) for sentence in sentences)
    file_io.makedirs(output_dir)
    for split, split_rows in rows.items():
        write_rows(os.path.join(output_dir, SPLIT_FILES[split]), split_rows)
    return {"classes": classes, "train": len(rows["train"]), "dev": len(rows["dev"]),
            "dev_per_class": [len(splits[package][0]) for package in classes]}
