"""The held-out document classification set that the reproduction fine-tunes every arm on: which of K documents
a sentence comes from, as `sentence<TAB>label` TSV files that albert_tf.tasks.text_classification reads
(data_gen.readers.labeled_text, text_field "sentence", label_field "label").

It is built from held-out text (one sentence per line, a blank line between documents) that no arm pretrained on:
the K documents with the most sentences (the first in the file on a tie), each cut to the K-th one's length so that
the classes are balanced. Within each document every DEV_EVERY-th sentence (positions DEV_EVERY - 1,
2 * DEV_EVERY - 1, ...) goes to dev, the others to train, so a dev sentence is never seen in fine-tuning but its
document is. Neither pretraining objective learns it directly: the masked LM predicts tokens inside a sentence,
SOP the order of two segments of one document, and neither ever names a document.

Example:
>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> text = os.path.join(directory, "holdout.txt")
>>> _ = open(text, "w").write("A one.\\nA two.\\nA three.\\n\\nB one.\\nB two.\\nB three.\\nB four.\\n\\nC one.\\n")
>>> write_document_classification_set(text, os.path.join(directory, "documents"), num_documents=2)
{'documents': 2, 'sentences_per_document': 3, 'train': 4, 'dev': 2}
>>> open(os.path.join(directory, "documents", "dev.tsv")).read().splitlines()
['sentence\\tlabel', 'A three.\\t0', 'B three.\\t1']
"""

import os
from typing import Dict, List, Sequence

from data_gen import file_io

TEXT_FIELD, LABEL_FIELD = "sentence", "label"
HEADER = (TEXT_FIELD, LABEL_FIELD)
SPLIT_FILES = {"train": "train.tsv", "dev": "dev.tsv"}
DEV_EVERY = 3
# Each document needs a dev sentence and at least two training sentences.
MIN_SENTENCES = DEV_EVERY


def read_text_documents(path: str) -> List[List[str]]:
    """Documents of a file in the original format: one sentence per line, a blank line between documents.

    `path` may be local or a URL (gs://, s3://, hdfs://, ram://), read through tf.io.gfile.
    """
    documents, current = [], []
    with file_io.open_text_for_reading(path) as handle:
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


def write_rows(path: str, rows: Sequence[Sequence[str]]) -> None:
    """Writes HEADER and `rows` as TSV to `path`, whole or not at all."""
    file_io.write_tsv(path, HEADER, rows)


def write_document_classification_set(input_file: str, output_dir: str, num_documents: int) -> Dict[str, int]:
    """Writes train.tsv and dev.tsv of the `num_documents`-way document classification of `input_file`'s
    sentences (see the module docstring) under `output_dir`, and returns the counts. Both may be local or URLs."""
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
    file_io.makedirs(output_dir)
    for split, split_rows in rows.items():
        write_rows(os.path.join(output_dir, SPLIT_FILES[split]), split_rows)
    return {"documents": num_documents, "sentences_per_document": length, "train": len(rows["train"]),
            "dev": len(rows["dev"])}
