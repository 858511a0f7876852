"""Single-sentence classification files (`sentence<TAB>label` rows under a header) and their features, and the
held-out document classification set that the reproduction fine-tunes every arm on.

The document classification set asks which of K documents a sentence comes from. It is built from held-out text
(one sentence per line, a blank line between documents) that no arm pretrained on: the K documents with the most
sentences (the first in the file on a tie), each cut to the K-th one's length so that the classes are balanced.
Within each document every DEV_EVERY-th sentence (positions DEV_EVERY - 1, 2 * DEV_EVERY - 1, ...) goes to dev,
the others to train, so a dev sentence is never seen in fine-tuning but its document is. Neither pretraining
objective learns it directly: the masked LM predicts tokens inside a sentence, SOP the order of two segments of
one document, and neither ever names a document.

Features are those of a GLUE single-sentence task (data_gen.glue.convert_example): `[CLS] sentence [SEP]`.

Example:
>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> text = os.path.join(directory, "holdout.txt")
>>> _ = open(text, "w").write("A one.\\nA two.\\nA three.\\n\\nB one.\\nB two.\\nB three.\\nB four.\\n\\nC one.\\n")
>>> write_document_classification_set(text, os.path.join(directory, "documents"), num_documents=2)
{'documents': 2, 'sentences_per_document': 3, 'train': 4, 'dev': 2}
>>> [(example.text_a, example.label) for example in read_examples(os.path.join(directory, "documents", "dev.tsv"))]
[('A three.', '0'), ('B three.', '1')]
"""

import csv
import os
from typing import Dict, List, Sequence

import tensorflow as tf

from data_gen import feature_cache
from data_gen.glue import GlueExample, GlueTask, convert_example

HEADER = ("sentence", "label")
SPLIT_FILES = {"train": "train.tsv", "dev": "dev.tsv"}
DEV_EVERY = 3
# Each document needs a dev sentence and at least two training sentences.
MIN_SENTENCES = DEV_EVERY


def read_text_documents(path: str) -> List[List[str]]:
    """Documents of a file in the original format: one sentence per line, a blank line between documents."""
    documents, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                documents.append(current)
                current = []
    if current:
        documents.append(current)
    return documents


def _write_rows(path: str, rows: Sequence[Sequence[str]]) -> None:
    temporary = path + ".incomplete"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.writelines("\t".join(row) + "\n" for row in [HEADER, *rows])
    os.replace(temporary, path)


def write_document_classification_set(input_file: str, output_dir: str, num_documents: int) -> Dict[str, int]:
    """Writes train.tsv and dev.tsv of the `num_documents`-way document classification of `input_file`'s
    sentences (see the module docstring) under `output_dir`, and returns the counts."""
    documents = read_text_documents(input_file)
    eligible = [index for index, sentences in enumerate(documents) if len(sentences) >= MIN_SENTENCES]
    if num_documents < 2 or len(eligible) < num_documents:
        raise ValueError(f"{input_file}: the document classification set needs num_documents={num_documents} "
                         f"(at least 2) documents of {MIN_SENTENCES} or more sentences, and it has "
                         f"{len(eligible)}; give more held-out text or fewer documents.")
    chosen = sorted(sorted(eligible, key=lambda index: -len(documents[index]))[:num_documents])
    length = min(len(documents[index]) for index in chosen)
    rows = {"train": [], "dev": []}
    for label, index in enumerate(chosen):
        for position, sentence in enumerate(documents[index][:length]):
            split = "dev" if position % DEV_EVERY == DEV_EVERY - 1 else "train"
            rows[split].append((sentence.replace("\t", " "), str(label)))
    os.makedirs(output_dir, exist_ok=True)
    for split, split_rows in rows.items():
        _write_rows(os.path.join(output_dir, SPLIT_FILES[split]), split_rows)
    return {"documents": num_documents, "sentences_per_document": length, "train": len(rows["train"]),
            "dev": len(rows["dev"])}


def read_examples(path: str) -> List[GlueExample]:
    """The examples of a `sentence<TAB>label` file with that header; a malformed row is an error naming its line."""
    if not os.path.exists(path):
        raise ValueError(f"Sentence classification file {path} does not exist; its directory needs "
                         f"{' and '.join(SPLIT_FILES.values())}.")
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quotechar=None))
    if not rows or tuple(rows[0]) != HEADER:
        raise ValueError(f"{path}:1 must be the header {'<TAB>'.join(HEADER)!r}, not {rows[0] if rows else ''!r}.")
    examples = []
    for line_number, row in enumerate(rows[1:], start=2):
        if len(row) != 2 or not row[0].strip() or not row[1].strip():
            raise ValueError(f"{path}:{line_number} must be a sentence and a label separated by one tab: {row!r}.")
        examples.append(GlueExample(str(len(examples)), row[0], None, row[1].strip()))
    return examples


def labels_of(examples: Sequence[GlueExample]) -> List[str]:
    """The labels in the order of their first appearance: the class ids of the classifier's outputs."""
    return list(dict.fromkeys(example.label for example in examples))


def majority_baseline(examples: Sequence[GlueExample]) -> float:
    """The accuracy of always predicting the most frequent label of `examples`."""
    labels = [example.label for example in examples]
    return max(labels.count(label) for label in set(labels)) / len(labels) if labels else 0.0


def feature_spec(max_seq_length: int) -> Dict[str, tf.TensorSpec]:
    sequence = tf.TensorSpec([max_seq_length], tf.int32)
    return {"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence,
            "label_ids": tf.TensorSpec([], tf.int32), "example_index": tf.TensorSpec([], tf.int32)}


def load_split(path: str, labels: Sequence[str], tokenizer, max_seq_length: int, cached_dir: str, name: str):
    """Reads a split and its cached features (keyed by the file's content, the labels, the tokenizer and
    max_seq_length); returns (examples, feature_cache.CachedFeatures). A label outside `labels` is an error."""
    examples = read_examples(path)
    unknown = sorted({example.label for example in examples} - set(labels))
    if unknown:
        raise ValueError(f"{path}: labels {unknown} are not among the training file's labels {list(labels)}.")
    task = GlueTask(name=name, labels=tuple(labels), directory="", split_files={}, tfds_name="", tfds_splits={},
                    tfds_text_features=(), submission_files={})
    key = feature_cache.cache_key(f"sentence_classification/{name}", feature_cache.files_fingerprint([path]),
                                  tokenizer, {"max_seq_length": max_seq_length, "labels": list(labels)})

    def make_features():
        for index, example in enumerate(examples):
            yield convert_example(example, index, task, tokenizer, max_seq_length)

    return examples, feature_cache.load_or_build(cached_dir, name, key, feature_spec(max_seq_length), make_features)
