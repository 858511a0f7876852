"""Your own labelled text in TSV, CSV or JSON lines: reading, label checks and classification features.

The format comes from `file_format` or the file's extension (`.tsv`, `.csv`, `.jsonl` / `.json`):
- TSV: tab-separated, no quoting (a `"` is an ordinary character, as in the GLUE files); one row per line.
- CSV: the csv module's default dialect, RFC 4180 (comma-separated, fields may be quoted with `"`, a doubled `""`
  inside is one quote, and a quoted field may span lines; a quote left open is an error; errors name the line
  where the row starts).
- JSON lines: one JSON object per line; a multi-label label may be a JSON list.
Files are UTF-8; a leading byte-order mark (Excel writes one) is dropped. Blank lines are skipped.

`text_field`, `text_b_field` (optional, the second text of a pair) and `label_field` name columns of the header
row (TSV, CSV) or keys of the objects (JSON lines). A TSV or CSV without a header row is read by 0-based column
indices instead: when every field named is an integer, the first row is data.

Labels, by `label_kind`:
- `single_label`: one label per example, a non-empty string (a JSON integer reads as its digits).
- `multi_label`: a set of labels per example, possibly empty: a JSON list of strings, or a field split at
  `label_separator` (pieces stripped, empty pieces dropped).
- `regression`: a finite number.
Each bad value (a missing column, an empty text, a bad label) is a LabeledTextError naming the file, the line
and the value; nothing is skipped.

Features are GLUE's (`[CLS] a [SEP] (b [SEP])`, the longer text truncated first): `label_ids` is the label's index
in the model's labels (int32), a 0/1 vector over the labels (float32, multi-label), or the number (float32).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
>>> with open(path, "w") as handle:
...     _ = handle.write('text,topics\\n"Rain, then sun",weather|sky\\nGoal!,sport\\n')
>>> schema = LabeledTextSchema(text_field="text", label_field="topics", label_kind=MULTI_LABEL,
...                            label_separator="|")
>>> examples = read_examples(path, schema)
>>> [(example.text_a, example.label, example.source) for example in examples]
[('Rain, then sun', ('weather', 'sky'), '...train.csv:2'), ('Goal!', ('sport',), '...train.csv:3')]
>>> collect_labels(examples, schema)
('sky', 'sport', 'weather')
"""

import csv
import dataclasses
import io
import json
import math
import os
import sys
from typing import Dict, Iterator, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from data_gen.readers import feature_cache
from data_gen.readers.glue import encode_text_pair

SINGLE_LABEL = "single_label"
MULTI_LABEL = "multi_label"
REGRESSION = "regression"
LABEL_KINDS = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)
FILE_FORMATS = ("tsv", "csv", "jsonl")
_EXTENSION_FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
# Long texts can exceed csv's default field limit (128 KiB).
_CSV_FIELD_SIZE_LIMIT = min(sys.maxsize, 2 ** 31 - 1)
_BYTE_ORDER_MARK = "\ufeff"
_FIELD_FLAGS = {"text_field": "--text_field", "text_b_field": "--text_b_field", "label_field": "--label_field"}


class LabeledTextError(ValueError):
    """A value of a labelled-text file that cannot be used; the message names the file, the line and the value."""


@dataclasses.dataclass(frozen=True)
class LabeledTextSchema:
    """Where the texts and labels are in each record, and what kind of label it holds.

    Example:
    >>> LabeledTextSchema(text_field="0", label_field="1").file_format_of("data/train.tsv")
    'tsv'
    """

    text_field: str
    label_field: Optional[str] = None
    text_b_field: Optional[str] = None
    file_format: Optional[str] = None
    label_kind: str = SINGLE_LABEL
    label_separator: Optional[str] = None

    def __post_init__(self):
        if self.label_kind not in LABEL_KINDS:
            raise LabeledTextError(f"Unknown label kind {self.label_kind!r}; allowed: {', '.join(LABEL_KINDS)}.")
        if self.file_format is not None and self.file_format not in FILE_FORMATS:
            raise LabeledTextError(f"Unknown --file_format={self.file_format!r}; allowed: {', '.join(FILE_FORMATS)}.")
        if not self.text_field:
            raise LabeledTextError("Give --text_field, the column (or JSON key) of the text.")
        if self.label_separator == "":
            raise LabeledTextError("--label_separator is empty; give the string that separates the labels of a "
                                   "field, e.g. '|'.")

    def file_format_of(self, path: str) -> str:
        """`file_format`, else the format the file's extension names."""
        if self.file_format:
            return self.file_format
        extension = os.path.splitext(path)[1].lower()
        if extension not in _EXTENSION_FORMATS:
            raise LabeledTextError(f"Cannot tell the format of {path} from its extension {extension!r}; name the "
                                   f"file .tsv, .csv or .jsonl, or give --file_format ({', '.join(FILE_FORMATS)}).")
        return _EXTENSION_FORMATS[extension]

    def fields(self, with_labels: bool) -> Dict[str, str]:
        """{option name: column or key} of the fields a record must hold."""
        named = {"text_field": self.text_field, "text_b_field": self.text_b_field}
        if with_labels:
            if not self.label_field:
                raise LabeledTextError("Give --label_field, the column (or JSON key) of the label.")
            named["label_field"] = self.label_field
        return {option: field for option, field in named.items() if field}


@dataclasses.dataclass
class LabeledExample:
    """One text (pair) and its label: a string, a tuple of strings (multi-label), a float, or None (unlabelled).

    `source` is `file:line`, where the record starts.
    """

    text_a: str
    text_b: Optional[str]
    label: object
    source: str


# ---- reading -------------------------------------------------------------------------------------

def _read_text(path: str) -> str:
    if not tf.io.gfile.exists(path):
        raise LabeledTextError(f"The data file {path} does not exist.")
    with tf.io.gfile.GFile(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LabeledTextError(f"{path} is not UTF-8 text: byte {error.start} is {data[error.start:error.start + 1]!r}."
                               ) from None
    return text[1:] if text.startswith(_BYTE_ORDER_MARK) else text


def _delimited_records(path: str, text: str, file_format: str) -> Iterator[tuple]:
    """(line number where the row starts, row) of every non-blank row."""
    csv.field_size_limit(_CSV_FIELD_SIZE_LIMIT)
    if file_format == "tsv":
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        # strict: a quote left open is an error, not a field that swallows the rest of the file.
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    next_line = 1
    try:
        for row in reader:
            start, next_line = next_line, reader.line_num + 1
            if any(field.strip() for field in row):
                yield start, row
    except csv.Error as error:
        raise LabeledTextError(f"{path}:{next_line}: not a valid CSV row ({error}).") from None


def _flag_values(fields):
    return ", ".join(f"{_FIELD_FLAGS[option]}={field}" for option, field in fields.items())


def _column_indices(path, rows, fields: Dict[str, str], file_format: str):
    """{option: column index} and the rows that hold data (the header row, when there is one, dropped)."""
    numeric = [field.isdigit() for field in fields.values()]
    if all(numeric):
        return {option: int(field) for option, field in fields.items()}, rows
    if any(numeric):
        raise LabeledTextError(f"{path}: the fields {_flag_values(fields)} mix "
                               f"column indices and names; give names for a file with a header row, or 0-based "
                               f"indices for one without.")
    if not rows:
        raise LabeledTextError(f"{path} holds no header row; its {file_format.upper()} columns are named by it.")
    header_line, header = rows[0]
    names = [name.strip() for name in header]
    indices = {}
    for option, field in fields.items():
        if field not in names:
            raise LabeledTextError(f"{path}:{header_line}: the header has no column {field!r} "
                                   f"({_FIELD_FLAGS[option]}); its columns are {names}.")
        indices[option] = names.index(field)
    return indices, rows[1:]


def _delimited_values(path: str, text: str, file_format: str, fields: Dict[str, str]) -> Iterator[tuple]:
    records = list(_delimited_records(path, text, file_format))
    indices, rows = _column_indices(path, records, fields, file_format)
    # Every row has as many fields as the header names (the first row's, without one): a field that holds the
    # delimiter (a tab inside a TSV text) would otherwise shift the columns silently.
    width_line, width_row = records[0] if records else (0, [])
    for line, row in rows:
        fields_held = f"{len(row)} {file_format.upper()} field{'' if len(row) == 1 else 's'}"
        values = {}
        for option, index in indices.items():
            if index >= len(row):
                raise LabeledTextError(f"{path}:{line}: the row has {fields_held}, so it has no column "
                                       f"{fields[option]!r} ({_FIELD_FLAGS[option]}): {row!r}.")
            values[option] = row[index]
        if len(row) != len(width_row):
            source = "the header" if rows is not records else f"the first row (line {width_line})"
            raise LabeledTextError(f"{path}:{line}: the row has {fields_held} where {source} has {len(width_row)}; "
                                   f"a field that holds the delimiter must be quoted (CSV) or lose it (TSV): {row!r}.")
        yield line, values


def _json_values(path: str, text: str, fields: Dict[str, str]) -> Iterator[tuple]:
    for line, record_text in enumerate(text.splitlines(), start=1):
        if not record_text.strip():
            continue
        try:
            record = json.loads(record_text)
        except json.JSONDecodeError as error:
            raise LabeledTextError(f"{path}:{line}: not valid JSON ({error.msg} at column {error.colno}): "
                                   f"{record_text[:80]!r}.") from None
        if not isinstance(record, dict):
            raise LabeledTextError(f"{path}:{line}: a JSON-lines record must be an object, got {record_text[:80]!r}.")
        values = {}
        for option, field in fields.items():
            if field not in record:
                raise LabeledTextError(f"{path}:{line}: the JSON object has no field {field!r} "
                                       f"({_FIELD_FLAGS[option]}); its fields are {sorted(record)}.")
            values[option] = record[field]
        yield line, values


def _text(value, field, flag, where) -> str:
    if not isinstance(value, str):
        raise LabeledTextError(f"{where}: the text field {field!r} ({flag}) holds {json.dumps(value)}, not a string.")
    if not value.strip():
        raise LabeledTextError(f"{where}: the text field {field!r} ({flag}) is empty.")
    return value


def _label(value, schema: LabeledTextSchema, where):
    described = f"the label {value!r} of field {schema.label_field!r} (--label_field)"
    if schema.label_kind == REGRESSION:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
        if number is None or not math.isfinite(number):
            raise LabeledTextError(f"{where}: {described} is not a finite number, which --regression needs.")
        return number
    if schema.label_kind == MULTI_LABEL:
        if isinstance(value, list):
            if not all(isinstance(label, str) and label.strip() for label in value):
                raise LabeledTextError(f"{where}: {described} is a list, but its labels must be non-empty strings.")
            labels = [label.strip() for label in value]
        elif isinstance(value, str) and schema.label_separator:
            labels = [label.strip() for label in value.split(schema.label_separator) if label.strip()]
        else:
            raise LabeledTextError(f"{where}: {described} is not a list of labels; --multi_label reads a JSON list, "
                                   f"or a string split at --label_separator.")
        if len(set(labels)) != len(labels):
            raise LabeledTextError(f"{where}: {described} names a label twice.")
        return tuple(labels)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise LabeledTextError(f"{where}: {described} is not a string or an integer.")
    if not value.strip():
        raise LabeledTextError(f"{where}: the label field {schema.label_field!r} (--label_field) is empty.")
    return value.strip()


def read_examples(path: str, schema: LabeledTextSchema, with_labels: bool = True) -> List[LabeledExample]:
    """Every record of the file as a LabeledExample; `with_labels=False` reads the texts only (label None)."""
    file_format = schema.file_format_of(path)
    fields = schema.fields(with_labels)
    text = _read_text(path)
    records = _json_values(path, text, fields) if file_format == "jsonl" else \
        _delimited_values(path, text, file_format, fields)
    examples = []
    for line, values in records:
        where = f"{path}:{line}"
        text_a = _text(values["text_field"], schema.text_field, "--text_field", where)
        text_b = _text(values["text_b_field"], schema.text_b_field, "--text_b_field", where) \
            if schema.text_b_field else None
        label = _label(values["label_field"], schema, where) if with_labels else None
        examples.append(LabeledExample(text_a, text_b, label, where))
    logging.info("Read %d examples from %s (%s).", len(examples), path, file_format)
    return examples


# ---- labels --------------------------------------------------------------------------------------

def collect_labels(examples: Sequence[LabeledExample], schema: LabeledTextSchema) -> tuple:
    """The sorted set of labels the examples hold (sorted, so the file's row order does not change the model)."""
    if schema.label_kind == REGRESSION:
        return ()
    found = set()
    for example in examples:
        found.update(example.label if schema.label_kind == MULTI_LABEL else [example.label])
    return tuple(sorted(found))


def check_labels(examples: Sequence[LabeledExample], labels: Sequence[str], schema: LabeledTextSchema,
                 origin: str) -> None:
    """Every example's labels are among `labels` (whose `origin` the error names, e.g. '--labels')."""
    if schema.label_kind == REGRESSION:
        return
    allowed = set(labels)
    for example in examples:
        for label in example.label if schema.label_kind == MULTI_LABEL else [example.label]:
            if label not in allowed:
                raise LabeledTextError(f"{example.source}: label {label!r} is not one of the model's labels "
                                       f"{list(labels)} ({origin}).")


# ---- features ------------------------------------------------------------------------------------

def feature_spec(max_seq_length: int, schema: LabeledTextSchema, num_labels: int) -> Dict[str, tf.TensorSpec]:
    """The cached feature layout: the model inputs, `label_ids` (see the module's docstring) and `example_index`."""
    sequence = tf.TensorSpec([max_seq_length], tf.int32)
    labels = {SINGLE_LABEL: tf.TensorSpec([], tf.int32), MULTI_LABEL: tf.TensorSpec([num_labels], tf.float32),
              REGRESSION: tf.TensorSpec([], tf.float32)}[schema.label_kind]
    return {"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence, "label_ids": labels,
            "example_index": tf.TensorSpec([], tf.int32)}


def label_ids(label, schema: LabeledTextSchema, labels: Sequence[str]):
    """The `label_ids` feature of a label; an unlabelled example (None) gets 0, 0.0 or all zeros.

    Example:
    >>> label_ids(("b", "c"), LabeledTextSchema("text", "tags", label_kind=MULTI_LABEL), ("a", "b", "c"))
    [0.0, 1.0, 1.0]
    """
    if schema.label_kind == REGRESSION:
        return 0.0 if label is None else float(label)
    if schema.label_kind == MULTI_LABEL:
        chosen = set(label or ())
        return [1.0 if name in chosen else 0.0 for name in labels]
    return 0 if label is None else list(labels).index(label)


def convert_example(example: LabeledExample, index: int, tokenizer, max_seq_length: int,
                    schema: LabeledTextSchema, labels: Sequence[str]) -> Dict[str, object]:
    """`[CLS] a [SEP] (b [SEP])` ids, mask and segment ids zero-padded, as GLUE's, and the label's `label_ids`."""
    return {**encode_text_pair(tokenizer, example.text_a, example.text_b, max_seq_length),
            "label_ids": label_ids(example.label, schema, labels), "example_index": index}


def load_split(path: str, split: str, schema: LabeledTextSchema, labels: Sequence[str], tokenizer,
               max_seq_length: int, cached_dir: str, examples: Optional[List[LabeledExample]] = None,
               with_labels: bool = True, label_origin: str = "the labels given"):
    """Reads a file (unless its `examples` are given) and its cached features.

    Labels outside `labels` are errors that name `label_origin`, where the labels came from. Returns (examples,
    feature_cache.CachedFeatures). The cache is keyed by the file's content, the schema, the
    labels, the tokenizer and max_seq_length.
    """
    if examples is None:
        examples = read_examples(path, schema, with_labels)
    if with_labels:
        check_labels(examples, labels, schema, label_origin)
    key = feature_cache.cache_key(f"labeled_text/{split}", feature_cache.files_fingerprint([path]), tokenizer,
                                  {"max_seq_length": max_seq_length, "schema": dataclasses.asdict(schema),
                                   "labels": list(labels), "with_labels": with_labels})

    def make_features():
        for index, example in enumerate(examples):
            yield convert_example(example, index, tokenizer, max_seq_length, schema, labels)

    features = feature_cache.load_or_build(cached_dir, f"labeled_text_{split}", key,
                                           feature_spec(max_seq_length, schema, len(labels)), make_features)
    return examples, features
