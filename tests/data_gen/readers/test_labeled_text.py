"""data_gen.readers.labeled_text: TSV, CSV and JSON-lines files as users write them, every bad value in one sentence
naming the file, the line and the value, and the features (GLUE's)."""
import json
import re

import pytest

from data_gen.readers import glue, labeled_text
from data_gen.readers.labeled_text import MULTI_LABEL, REGRESSION, LabeledTextError, LabeledTextSchema

TOPICS = LabeledTextSchema(text_field="text", label_field="topic")


def _read(path, schema=TOPICS, **kwargs):
    return [(example.text_a, example.text_b, example.label, example.source)
            for example in labeled_text.read_examples(str(path), schema, **kwargs)]


def test_tsv_with_a_header_keeps_quotes_and_skips_blank_lines(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text('id\ttopic\ttext\n1\tsport\tHe said "goal\n\n2\tweather\tRain, then sun\n')
    assert _read(path) == [('He said "goal', None, "sport", f"{path}:2"),
                           ("Rain, then sun", None, "weather", f"{path}:4")]


def test_headerless_tsv_by_column_index(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a cat\ta dog\t0.5\nthe sun\tthe moon\t4\n")
    schema = LabeledTextSchema(text_field="0", text_b_field="1", label_field="2", label_kind=REGRESSION)
    assert _read(path, schema) == [("a cat", "a dog", 0.5, f"{path}:1"), ("the sun", "the moon", 4.0, f"{path}:2")]


def test_csv_in_the_rfc_4180_dialect_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "train.csv"
    # Excel's export: a BOM, CRLF line ends, quoted fields with commas, doubled quotes and a line break.
    path.write_bytes('\ufefftext,topic\r\n"Rain, then ""sun""",weather\r\n"two\r\nlines",sport\r\nGoal!,sport\r\n'
                     .encode("utf-8"))
    assert _read(path) == [('Rain, then "sun"', None, "weather", f"{path}:2"),
                           ("two\r\nlines", None, "sport", f"{path}:3"), ("Goal!", None, "sport", f"{path}:5")]


def test_json_lines_single_multi_label_and_regression(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "Goal!", "topic": ["sport"], "score": 2, "class": 3}\n\n'
                    '{"text": "Rain", "topic": [], "score": "0.5", "class": "rain"}\n')
    assert _read(path, LabeledTextSchema("text", "class")) == [("Goal!", None, "3", f"{path}:1"),
                                                               ("Rain", None, "rain", f"{path}:3")]
    multi = LabeledTextSchema("text", "topic", label_kind=MULTI_LABEL)
    assert [label for _, _, label, _ in _read(path, multi)] == [("sport",), ()]
    assert [label for _, _, label, _ in _read(path, LabeledTextSchema("text", "score", label_kind=REGRESSION))] == \
        [2.0, 0.5]


def test_multi_label_fields_split_at_the_separator(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('text,topics\n"Rain, sun",weather| sky\nNothing,\nGoal,sport\n')
    schema = LabeledTextSchema("text", "topics", label_kind=MULTI_LABEL, label_separator="|")
    examples = labeled_text.read_examples(str(path), schema)
    assert [example.label for example in examples] == [("weather", "sky"), (), ("sport",)]
    labels = labeled_text.collect_labels(examples, schema)
    assert labels == ("sky", "sport", "weather")
    assert labeled_text.label_ids(examples[0].label, schema, labels) == [1.0, 0.0, 1.0]


def test_the_format_comes_from_the_extension_or_the_flag(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text('{"text": "Goal", "topic": "sport"}\n')
    assert _read(path, LabeledTextSchema("text", "topic", file_format="jsonl"))[0][2] == "sport"
    with pytest.raises(LabeledTextError, match=re.escape(
            f"Cannot tell the format of {path} from its extension '.txt'; name the file .tsv, .csv or .jsonl, or give "
            "--file_format (tsv, csv, jsonl).")):
        _read(path)


def test_prediction_files_need_no_label_column(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("text\nGoal\n")
    assert _read(path, with_labels=False) == [("Goal", None, None, f"{path}:2")]


def _error(tmp_path, name, content, schema=TOPICS, **kwargs):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(LabeledTextError) as raised:
        labeled_text.read_examples(str(path), schema, **kwargs)
    return str(raised.value).replace(str(path), "FILE")


def test_every_bad_value_is_one_sentence_naming_file_line_and_value(tmp_path):
    assert _error(tmp_path, "a.tsv", "text\tlabel\nGoal\tsport\n") == (
        "FILE:1: the header has no column 'topic' (--label_field); its columns are ['text', 'label'].")
    assert _error(tmp_path, "b.tsv", "Goal\tsport\nRain\n", LabeledTextSchema("0", "1")) == (
        "FILE:2: the row has 1 TSV field, so it has no column '1' (--label_field): ['Rain'].")
    # A tab inside a TSV text makes a row one field wider than its header: an error, not a shifted column.
    assert _error(tmp_path, "b2.tsv", "text\ttopic\nGoal\tsport\nRain\tfell\tweather\n") == (
        "FILE:3: the row has 3 TSV fields where the header has 2; a field that holds the delimiter must be quoted "
        "(CSV) or lose it (TSV): ['Rain', 'fell', 'weather'].")
    assert _error(tmp_path, "b3.csv", "Goal,sport\nRain,weather,x\n", LabeledTextSchema("0", "1")) == (
        "FILE:2: the row has 3 CSV fields where the first row (line 1) has 2; a field that holds the delimiter must "
        "be quoted (CSV) or lose it (TSV): ['Rain', 'weather', 'x'].")
    assert _error(tmp_path, "c.csv", "text,topic\nGoal,sport\n ,sport\n") == (
        "FILE:3: the text field 'text' (--text_field) is empty.")
    assert _error(tmp_path, "d.csv", "text,topic\nGoal,\n") == (
        "FILE:2: the label field 'topic' (--label_field) is empty.")
    assert _error(tmp_path, "e.jsonl", '{"text": "Goal", "topic": "sport"}\n{"text": "Rain"}\n') == (
        "FILE:2: the JSON object has no field 'topic' (--label_field); its fields are ['text'].")
    assert _error(tmp_path, "f.jsonl", '{"text": "Goal", "topic": "sport"\n') == (
        "FILE:1: not valid JSON (Expecting ',' delimiter at column 34): '{\"text\": \"Goal\", \"topic\": \"sport\"'.")
    assert _error(tmp_path, "g.jsonl", '{"text": 7, "topic": "sport"}\n') == (
        "FILE:1: the text field 'text' (--text_field) holds 7, not a string.")
    assert _error(tmp_path, "h.csv", "text,score\nGoal,high\n", LabeledTextSchema("text", "score",
                                                                                 label_kind=REGRESSION)) == (
        "FILE:2: the label 'high' of field 'score' (--label_field) is not a finite number, which --regression needs.")
    assert _error(tmp_path, "i.jsonl", '{"text": "Goal", "score": NaN}\n',
                  LabeledTextSchema("text", "score", label_kind=REGRESSION)).endswith("is not a finite number, which "
                                                                                      "--regression needs.")
    assert _error(tmp_path, "j.jsonl", '{"text": "Goal", "topic": "sport"}\n',
                  LabeledTextSchema("text", "topic", label_kind=MULTI_LABEL)) == (
        "FILE:1: the label 'sport' of field 'topic' (--label_field) is not a list of labels; --multi_label reads a "
        "JSON list, or a string split at --label_separator.")
    assert _error(tmp_path, "k.tsv", "text\ttopic\nGoal\tsport\n", LabeledTextSchema("text", "1")) == (
        "FILE: the fields --text_field=text, --label_field=1 mix column indices and names; give names for a file "
        "with a header row, or 0-based indices for one without.")
    assert _error(tmp_path, "l.csv", 'text,topic\n"Goal,sport\n') == (
        "FILE:2: not a valid CSV row (unexpected end of data).")


def test_a_label_outside_the_models_labels_names_its_line_and_where_the_labels_came_from(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text('{"text": "Goal", "topic": "sport"}\n{"text": "Rain", "topic": "weather"}\n')
    examples = labeled_text.read_examples(str(path), TOPICS)
    with pytest.raises(LabeledTextError, match=re.escape(
            f"{path}:2: label 'weather' is not one of the model's labels ['sport', 'politics'] (--labels).")):
        labeled_text.check_labels(examples, ["sport", "politics"], TOPICS, "--labels")


def test_a_missing_file_and_text_that_is_not_utf8(tmp_path):
    with pytest.raises(LabeledTextError, match=re.escape(f"The data file {tmp_path / 'none.tsv'} does not exist.")):
        labeled_text.read_examples(str(tmp_path / "none.tsv"), TOPICS)
    path = tmp_path / "latin1.tsv"
    path.write_bytes("text\ttopic\ncaf\xe9\tfood\n".encode("latin-1"))
    with pytest.raises(LabeledTextError, match=re.escape(f"{path} is not UTF-8 text: byte 14 is b'\\xe9'.")):
        labeled_text.read_examples(str(path), TOPICS)


def test_features_are_glues_with_each_kind_of_label(tokenizer):
    example = labeled_text.LabeledExample("the model learns", "a shared block", "1", "x:2")
    ours = labeled_text.convert_example(example, 3, tokenizer, 12, TOPICS, ("0", "1"))
    theirs = glue.convert_example(glue.GlueExample("3", example.text_a, example.text_b, "1"), 3,
                                  glue.get_task("mrpc"), tokenizer, 12)
    assert ours == theirs
    multi = LabeledTextSchema("text", "topic", label_kind=MULTI_LABEL)
    assert labeled_text.label_ids(None, multi, ("a", "b")) == [0.0, 0.0]
    spec = labeled_text.feature_spec(12, multi, 2)
    assert spec["label_ids"].shape == (2,) and json.dumps(sorted(spec)) == json.dumps(
        ["example_index", "input_mask", "input_type_ids", "input_word_ids", "label_ids"])


def test_features_are_cached_by_the_files_content_and_the_labels(tmp_path, tokenizer):
    path = tmp_path / "train.tsv"
    path.write_text("text\ttopic\nthe model\tb\na block\ta\n")
    examples, features = labeled_text.load_split(str(path), "train", TOPICS, ("a", "b"), tokenizer, 8,
                                                 str(tmp_path / "cache"))
    assert features.num_examples == 2
    assert [int(row["label_ids"]) for row in features.dataset()] == [1, 0]
    _, reordered = labeled_text.load_split(str(path), "train", TOPICS, ("b", "a"), tokenizer, 8,
                                           str(tmp_path / "cache"))
    assert [int(row["label_ids"]) for row in reordered.dataset()] == [0, 1]
    with pytest.raises(LabeledTextError, match=re.escape(f"{path}:3: label 'a' is not one of the model's labels "
                                                         "['b', 'c'] (labels.txt).")):
        labeled_text.load_split(str(path), "train", TOPICS, ("b", "c"), tokenizer, 8, str(tmp_path / "cache"),
                                label_origin="labels.txt")
