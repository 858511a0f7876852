"""GLUE: the original run_classifier processors, tensorflow-datasets input and features.

File input reads the GLUE data directory with the original file names and column layouts
(google-research/albert classifier_utils.py):

| task  | files (under data_dir)                     | text columns        | label             |
|-------|--------------------------------------------|---------------------|-------------------|
| cola  | CoLA/{train,dev}.tsv, no header            | 3                   | 1                 |
|       | CoLA/test.tsv, header (index, sentence)    | 1                   |                   |
| sst-2 | SST-2/{train,dev}.tsv (sentence, label)    | 0                   | 1                 |
|       | SST-2/test.tsv (index, sentence)           | 1                   |                   |
| mrpc  | MRPC/*.tsv (Quality, #1 ID, #2 ID, #1 String, #2 String) | 3, 4  | 0 (test: index) |
| sts-b | STS-B/*.tsv                                | 7, 8                | last (a float)    |
| qqp   | QQP/{train,dev}.tsv (id, qid1, qid2, question1, question2, is_duplicate) | 3, 4 | 5 |
|       | QQP/test.tsv (id, question1, question2)    | 1, 2                |                   |
| mnli  | MNLI/{train,dev_matched,dev_mismatched,test_matched,test_mismatched}.tsv | 8, 9 | last |
| qnli, rte, wnli | */*.tsv (index, sentence1, sentence2, label) | 1, 2  | last              |
| ax    | diagnostic/diagnostic.tsv (index, sentence1, sentence2) | 1, 2 | (prediction only) |

Fields are tab-separated with no quoting (GLUE texts hold unbalanced quotes). As the original, QQP
train/dev rows with too few fields are skipped, here with a warning that counts them; any other short
row, or a label outside the task's list, is an error naming the file and line.
"""

import csv
import dataclasses
import os
import sys
from typing import Dict, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from data_gen.readers import feature_cache

# GLUE texts can exceed csv's default field limit (128 KiB).
_CSV_FIELD_SIZE_LIMIT = min(sys.maxsize, 2 ** 31 - 1)


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task: its label list (the original's order), files, tensorflow-datasets names and submission files.

    Example:
    >>> task = get_task("MNLI")
    >>> task.labels, task.eval_splits, task.submission_files["test_mismatched"]
    (('contradiction', 'entailment', 'neutral'), ['dev_matched', 'dev_mismatched'], 'MNLI-mm.tsv')
    """

    name: str
    labels: Optional[Sequence[str]]  # None: regression (STS-B).
    directory: str
    split_files: Dict[str, str]
    tfds_name: str
    tfds_splits: Dict[str, str]
    tfds_text_features: Sequence[str]
    submission_files: Dict[str, str]

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.is_regression else len(self.labels)

    @property
    def eval_splits(self) -> List[str]:
        return [split for split in self.split_files if split.startswith("dev")]

    @property
    def test_splits(self) -> List[str]:
        return [split for split in self.split_files if split.startswith("test")]


def _standard_task(name, labels, directory, tfds_name, tfds_text_features, submission):
    return GlueTask(name=name, labels=labels, directory=directory,
                    split_files={"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
                    tfds_name=tfds_name, tfds_splits={"train": "train", "dev": "validation", "test": "test"},
                    tfds_text_features=tfds_text_features, submission_files={"test": submission})


_NLI_LABELS = ("contradiction", "entailment", "neutral")
_BINARY = ("0", "1")
GLUE_TASKS = {
    "cola": _standard_task("cola", _BINARY, "CoLA", "cola", ("sentence",), "CoLA.tsv"),
    "sst-2": _standard_task("sst-2", _BINARY, "SST-2", "sst2", ("sentence",), "SST-2.tsv"),
    "mrpc": _standard_task("mrpc", _BINARY, "MRPC", "mrpc", ("sentence1", "sentence2"), "MRPC.tsv"),
    "sts-b": _standard_task("sts-b", None, "STS-B", "stsb", ("sentence1", "sentence2"), "STS-B.tsv"),
    "qqp": _standard_task("qqp", _BINARY, "QQP", "qqp", ("question1", "question2"), "QQP.tsv"),
    "qnli": _standard_task("qnli", ("entailment", "not_entailment"), "QNLI", "qnli", ("question", "sentence"),
                           "QNLI.tsv"),
    "rte": _standard_task("rte", ("entailment", "not_entailment"), "RTE", "rte", ("sentence1", "sentence2"),
                          "RTE.tsv"),
    "wnli": _standard_task("wnli", _BINARY, "WNLI", "wnli", ("sentence1", "sentence2"), "WNLI.tsv"),
    "mnli": GlueTask(
        name="mnli", labels=_NLI_LABELS, directory="MNLI",
        split_files={"train": "train.tsv", "dev_matched": "dev_matched.tsv", "dev_mismatched": "dev_mismatched.tsv",
                     "test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"},
        tfds_name="mnli", tfds_splits={"train": "train", "dev_matched": "validation_matched",
                                       "dev_mismatched": "validation_mismatched", "test_matched": "test_matched",
                                       "test_mismatched": "test_mismatched"},
        tfds_text_features=("premise", "hypothesis"),
        submission_files={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}),
    "ax": GlueTask(
        name="ax", labels=_NLI_LABELS, directory="diagnostic", split_files={"test": "diagnostic.tsv"},
        tfds_name="ax", tfds_splits={"test": "test"}, tfds_text_features=("premise", "hypothesis"),
        submission_files={"test": "AX.tsv"}),
}
_TASK_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "diagnostic": "ax"}


@dataclasses.dataclass
class GlueExample:
    """One sentence (pair); `label` is a string of the task's list, a float for STS-B, None for test data.

    Example:
    >>> GlueExample(guid="0", text_a="The cat sat.", text_b="It sat.", label="entailment").label
    'entailment'
    """

    guid: str
    text_a: str
    text_b: Optional[str]
    label: object


def get_task(name: str) -> GlueTask:
    """The GlueTask for a name as the original spells it (cola, sst-2, mnli, ...); case-insensitive."""
    key = _TASK_ALIASES.get(name.lower(), name.lower())
    if key not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {name!r}; allowed: {', '.join(GLUE_TASKS)}.")
    return GLUE_TASKS[key]


def split_file(data_dir: str, task: GlueTask, split: str) -> str:
    """The path of a split's file in the GLUE data directory."""
    if split not in task.split_files:
        raise ValueError(f"GLUE task {task.name!r} has no split {split!r}; it has {', '.join(task.split_files)}.")
    return os.path.join(data_dir, task.directory, task.split_files[split])


# ---- reading the GLUE files ----------------------------------------------------------------------

def read_examples(data_dir: str, task: GlueTask, split: str) -> List[GlueExample]:
    """The examples of one split from the GLUE data directory, parsed as the original processors do."""
    path = split_file(data_dir, task, split)
    if not tf.io.gfile.exists(path):
        raise ValueError(f"GLUE file {path} does not exist; --data_dir must hold {task.directory}/ with "
                         f"{', '.join(task.split_files.values())} (the GLUE download's layout).")
    csv.field_size_limit(_CSV_FIELD_SIZE_LIMIT)
    with tf.io.gfile.GFile(path, "r") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quotechar=None))
    is_test = split.startswith("test")
    headerless = task.name == "cola" and not is_test
    examples, skipped = [], []
    for line_number, row in enumerate(rows, start=1):
        if line_number == 1 and not headerless:
            continue
        try:
            example = _parse_row(task, row, is_test, position=len(examples))
        except IndexError:
            if task.name == "qqp" and not is_test:
                skipped.append(line_number)
                continue
            raise ValueError(f"{path}:{line_number} has {len(row)} tab-separated fields, too few for GLUE task "
                             f"{task.name!r}: {row!r}.") from None
        examples.append(_checked_label(task, example, f"{path}:{line_number}"))
    if skipped:
        logging.warning("Skipped %d malformed QQP row(s) of %s with fewer than 6 fields, as the original does "
                        "(lines %s).", len(skipped), path, ", ".join(map(str, skipped[:10])))
    logging.info("Read %d %s %s examples from %s.", len(examples), task.name, split, path)
    return examples


def _parse_row(task, row, is_test, position):
    """One row, by the original processor's column indices; IndexError for a short row."""
    name = task.name
    if name == "cola":
        if is_test:
            return GlueExample(row[0], row[1], None, None)
        return GlueExample(str(position), row[3], None, row[1])
    if name == "sst-2":
        if is_test:
            return GlueExample(row[0], row[1], None, None)
        return GlueExample(str(position), row[0], None, row[1])
    if name == "mrpc":
        return GlueExample(row[0] if is_test else str(position), row[3], row[4], None if is_test else row[0])
    if name == "sts-b":
        return GlueExample(row[0], row[7], row[8], None if is_test else row[-1])
    if name == "qqp":
        if is_test:
            return GlueExample(row[0], row[1], row[2], None)
        return GlueExample(row[0], row[3], row[4], row[5])
    if name == "mnli":
        return GlueExample(row[0], row[8], row[9], None if is_test else row[-1])
    # qnli, rte, wnli, ax: index, sentence1, sentence2[, label]
    return GlueExample(row[0], row[1], row[2], None if is_test else row[-1])


def _checked_label(task, example, where):
    if example.label is None:
        return example
    label = example.label.strip()
    if task.is_regression:
        try:
            example.label = float(label)
        except ValueError:
            raise ValueError(f"{where}: STS-B score {label!r} is not a number.") from None
    elif label not in task.labels:
        raise ValueError(f"{where}: label {label!r} is not one of GLUE task {task.name!r}'s labels "
                         f"{list(task.labels)}.")
    else:
        example.label = label
    return example


# ---- reading tensorflow-datasets -----------------------------------------------------------------

def read_tfds_examples(task: GlueTask, split: str, data_dir: Optional[str] = None) -> List[GlueExample]:
    """The examples of `glue/<task>` from tensorflow-datasets, which must already be prepared locally.

    Nothing is downloaded: an unprepared dataset is an error that says how to prepare it.
    """
    import tensorflow_datasets as tfds

    if split not in task.tfds_splits:
        raise ValueError(f"GLUE task {task.name!r} has no split {split!r}; it has {', '.join(task.tfds_splits)}.")
    name = f"glue/{task.tfds_name}"
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        dataset = builder.as_dataset(split=task.tfds_splits[split], shuffle_files=False)
    except (AssertionError, FileNotFoundError, tfds.core.registered.DatasetNotFoundError) as error:
        raise ValueError(f"tensorflow-datasets {name} is not prepared under {data_dir or 'the default data_dir'} "
                         f"({error}); prepare it once with `tfds build {name}` where there is internet, or use "
                         "--data_dir with the GLUE files.") from None
    label_feature = builder.info.features["label"]
    is_test = split.startswith("test")
    examples = []
    for record in dataset.as_numpy_iterator():
        texts = [record[feature].decode("utf-8") for feature in task.tfds_text_features]
        label = None if is_test else _tfds_label(task, label_feature, record["label"])
        examples.append(GlueExample(str(int(record["idx"])), texts[0], texts[1] if len(texts) > 1 else None, label))
    logging.info("Read %d %s %s examples from tensorflow-datasets %s.", len(examples), task.name, split, name)
    return examples


def _tfds_label(task, label_feature, value):
    if task.is_regression:
        return float(value)
    if task.labels == _BINARY:
        # tfds names the classes (e.g. "not_equivalent", "equivalent"); class i is the original's "i".
        return str(int(value))
    return label_feature.int2str(int(value))


# ---- features ------------------------------------------------------------------------------------

def feature_spec(task: GlueTask, max_seq_length: int) -> Dict[str, tf.TensorSpec]:
    """The cached feature layout: the model inputs, `label_ids` and `example_index`."""
    return {"input_word_ids": tf.TensorSpec([max_seq_length], tf.int32),
            "input_mask": tf.TensorSpec([max_seq_length], tf.int32),
            "input_type_ids": tf.TensorSpec([max_seq_length], tf.int32),
            "label_ids": tf.TensorSpec([], tf.float32 if task.is_regression else tf.int32),
            "example_index": tf.TensorSpec([], tf.int32)}


def truncate_seq_pair(tokens_a: List[str], tokens_b: List[str], max_length: int) -> None:
    """Pops the last token of the longer list (b on a tie) until both fit in max_length, as the original."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def encode_text_pair(tokenizer, text_a: str, text_b: Optional[str], max_seq_length: int) -> Dict[str, List[int]]:
    """`[CLS] a [SEP] (b [SEP])` as input_word_ids, input_mask and input_type_ids, zero-padded to max_seq_length;
    a pair is truncated by the original's rule (the longer side loses its last piece first)."""
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else []
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    padding = [0] * (max_seq_length - len(input_ids))
    return {"input_word_ids": input_ids + padding, "input_mask": [1] * len(input_ids) + padding,
            "input_type_ids": segment_ids + padding}


def convert_example(example: GlueExample, index: int, task: GlueTask, tokenizer, max_seq_length: int) -> Dict:
    """`[CLS] a [SEP] (b [SEP])` ids, mask and segment ids zero-padded to max_seq_length, and the label id.

    Test examples (label None) get label 0, as the original's placeholder labels.
    """
    if task.is_regression:
        label = float(example.label) if example.label is not None else 0.0
    else:
        label = task.labels.index(example.label) if example.label is not None else 0
    return {**encode_text_pair(tokenizer, example.text_a, example.text_b, max_seq_length), "label_ids": label,
            "example_index": index}


def load_split(task: GlueTask, split: str, tokenizer, max_seq_length: int, cached_dir: str,
               data_dir: Optional[str] = None, use_tfds: bool = False, tfds_data_dir: Optional[str] = None):
    """Reads a split (GLUE files, or tensorflow-datasets with `use_tfds`) and its cached features.

    Returns (examples, feature_cache.CachedFeatures). The cache is keyed by the file's content (the
    examples' content for tfds), the tokenizer and max_seq_length.
    """
    if use_tfds:
        examples = read_tfds_examples(task, split, tfds_data_dir)
        fingerprint = feature_cache.records_fingerprint(dataclasses.asdict(example) for example in examples)
    else:
        examples = read_examples(data_dir, task, split)
        fingerprint = feature_cache.files_fingerprint([split_file(data_dir, task, split)])
    key = feature_cache.cache_key(f"glue/{task.name}/{split}", fingerprint, tokenizer,
                                  {"max_seq_length": max_seq_length})

    def make_features():
        for index, example in enumerate(examples):
            yield convert_example(example, index, task, tokenizer, max_seq_length)

    features = feature_cache.load_or_build(cached_dir, f"{task.name}_{split}", key,
                                           feature_spec(task, max_seq_length), make_features)
    return examples, features
