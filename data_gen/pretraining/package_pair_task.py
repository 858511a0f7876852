"""The built-in small classification task: which of two Python packages a docstring sentence comes from, as
`sentence<TAB>label` TSV files that run_classifier reads (`--text_field=sentence --label_field=label`).

It comes from the built-in corpus (data_gen.pretraining.corpora) and its held-out split (`is_holdout_document`
at `holdout_fraction`), so it needs no download and pairs with a model pretrained on that corpus (`make demo`):
- the classes are the two packages with the most held-out sentences (a tie: the name first in sort order);
- dev is every held-out sentence of the two, which no pretraining saw;
- train is `train_examples_per_package` sentences of each from the documents outside the held-out split, taken
  whole in the order of a hash of their text (the last one cut), so train and dev share no docstring.

It is the size of a small labelled set (200 training examples by default): docs/fine-tuning.md's small-data recipe
is measured on it. With `sentence_pairs`, an example is two consecutive sentences of one docstring (its first and
second, third and fourth, ...) in the columns `sentence_a` and `sentence_b`, of the same two packages: the pair task
of the fine-tuning benchmark (albert_tf/benchmarking/finetune_text.py).

Example (it reads the installed modules' docstrings, about two seconds):
>>> import tempfile
>>> counts = write_package_pair_task(tempfile.mkdtemp())  # doctest: +SKIP
>>> counts["train"], len(counts["classes"])  # doctest: +SKIP
(200, 2)
"""

import collections
import hashlib
import os
from typing import Dict, List

from data_gen import file_io
from data_gen.pretraining import corpora

HEADER = ("sentence", "label")
PAIR_HEADER = ("sentence_a", "sentence_b", "label")
SPLIT_FILES = {"train": "train.tsv", "dev": "dev.tsv"}


def write_package_pair_task(output_dir: str, train_examples_per_package: int = 100, holdout_fraction: float = 0.1,
                            include_site_packages: bool = False, sentence_pairs: bool = False) -> Dict[str, object]:
    """Writes train.tsv and dev.tsv under `output_dir` (see the module docstring), of sentences or, with
    `sentence_pairs`, of sentence pairs; returns the classes and the counts per split and class. Fails, naming the
    package, when one lacks the training examples asked for."""
    held_out: Dict[str, List[tuple]] = collections.defaultdict(list)
    held_out_sentences: Dict[str, int] = collections.Counter()
    trainable: Dict[str, List[List[str]]] = collections.defaultdict(list)
    for package, sentences in corpora.iter_sourced_documents(include_site_packages):
        if corpora.is_holdout_document(sentences, holdout_fraction):
            held_out[package].extend(_examples(sentences, sentence_pairs))
            held_out_sentences[package] += len(sentences)
        else:
            trainable[package].append(sentences)
    # The classes are those of the sentence task whichever examples are written.
    classes = sorted(sorted(held_out_sentences, key=lambda package: (-held_out_sentences[package], package))[:2])
    if len(classes) < 2:
        raise ValueError(f"The built-in corpus holds out sentences of {len(classes)} package(s) at "
                         f"holdout_fraction={holdout_fraction}; the task needs two.")
    train = [(*example, package) for package in classes
             for example in _training_examples(package, trainable[package], train_examples_per_package,
                                               sentence_pairs)]
    dev = [(*example, package) for package in classes for example in held_out[package]]
    file_io.makedirs(output_dir)
    for split, rows in (("train", train), ("dev", dev)):
        file_io.write_tsv(os.path.join(output_dir, SPLIT_FILES[split]), PAIR_HEADER if sentence_pairs else HEADER,
                          rows)
    return {"classes": classes, "train": len(train), "dev": len(dev),
            "dev_per_class": [sum(row[-1] == package for row in dev) for package in classes]}


def _examples(sentences: List[str], sentence_pairs: bool) -> List[tuple]:
    """A document's examples: each sentence, or each pair of consecutive sentences (first and second, ...)."""
    if sentence_pairs:
        return list(zip(sentences[0::2], sentences[1::2]))
    return [(sentence,) for sentence in sentences]


def _training_examples(package: str, documents: List[List[str]], count: int, sentence_pairs: bool) -> List[tuple]:
    ordered = sorted(documents, key=lambda sentences: hashlib.sha256("\n".join(sentences).encode("utf-8")).digest())
    examples = [example for document in ordered for example in _examples(document, sentence_pairs)][:count]
    if len(examples) < count:
        kind = "sentence pairs" if sentence_pairs else "sentences"
        raise ValueError(f"Package {package!r} has {len(examples)} training {kind} in the built-in corpus; "
                         f"the task asks for {count}.")
    return examples
