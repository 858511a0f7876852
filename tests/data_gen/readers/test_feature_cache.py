"""data_gen.readers.feature_cache: keys that change with every input that shapes features, atomic writes, round
trips."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenization import AlbertTokenizer
from data_gen.readers import feature_cache
from tests.helpers import REPO_ROOT


def _spec(seq_length):
    return {"input_word_ids": tf.TensorSpec([seq_length], tf.int32), "choices": tf.TensorSpec([2, 3], tf.int32),
            "label_ids": tf.TensorSpec([], tf.float32)}


def _features(seq_length, calls):
    def make():
        calls.append(seq_length)
        for index in range(5):
            yield {"input_word_ids": np.arange(seq_length) + index, "choices": np.full([2, 3], index),
                   "label_ids": index / 2}

    return make


def _key(data_file, tokenizer, seq_length):
    return feature_cache.cache_key("toy", feature_cache.files_fingerprint([data_file]), tokenizer,
                                   {"max_seq_length": seq_length})


def test_round_trip_keeps_values_shapes_and_dtypes(tmp_path):
    features = feature_cache.load_or_build(str(tmp_path), "toy_train", "k" * 64, _spec(4), _features(4, []))
    rows = list(features.dataset().as_numpy_iterator())
    assert features.num_examples == 5 and len(rows) == 5
    assert rows[3]["input_word_ids"].tolist() == [3, 4, 5, 6] and rows[3]["input_word_ids"].dtype == np.int32
    assert rows[3]["choices"].tolist() == [[3, 3, 3], [3, 3, 3]]
    assert rows[3]["label_ids"] == pytest.approx(1.5) and rows[3]["label_ids"].dtype == np.float32


def test_same_inputs_reuse_and_changed_inputs_rebuild(tmp_path, tokenizer):
    data_file = tmp_path / "train.tsv"
    data_file.write_text("a\tb\n")
    calls = []
    first = feature_cache.load_or_build(str(tmp_path), "toy_train", _key(str(data_file), tokenizer, 8), _spec(8),
                                        _features(8, calls))
    again = feature_cache.load_or_build(str(tmp_path), "toy_train", _key(str(data_file), tokenizer, 8), _spec(8),
                                        _features(8, calls))
    assert calls == [8] and again.path == first.path

    longer = feature_cache.load_or_build(str(tmp_path), "toy_train", _key(str(data_file), tokenizer, 16),
                                         _spec(16), _features(16, calls))
    assert calls == [8, 16] and longer.path != first.path
    assert next(longer.dataset().as_numpy_iterator())["input_word_ids"].shape == (16,)

    data_file.write_text("a\tc\n")  # Same name, new content.
    feature_cache.load_or_build(str(tmp_path), "toy_train", _key(str(data_file), tokenizer, 8), _spec(8),
                                _features(8, calls))
    assert calls == [8, 16, 8]


def test_key_depends_on_tokenizer_casing_and_params(tmp_path, tokenizer):
    data_file = tmp_path / "train.tsv"
    data_file.write_text("x\n")
    cased = AlbertTokenizer(spm_model_file=tokenizer.spm_model_file, do_lower_case=False)
    keys = {_key(str(data_file), tokenizer, 8), _key(str(data_file), cased, 8), _key(str(data_file), None, 8),
            feature_cache.cache_key("toy", "x", tokenizer, {"max_seq_length": 8, "doc_stride": 128}),
            feature_cache.cache_key("toy", "x", tokenizer, {"max_seq_length": 8, "doc_stride": 64})}
    assert len(keys) == 5



def test_a_cache_built_under_one_digit_comma_rule_is_not_read_under_the_other(tmp_path, tokenizer):
    data_file = tmp_path / "train.tsv"
    data_file.write_text("in 1990, they\n")
    assert tokenizer.digit_comma_rule == "keep_added_marker"
    dropping = AlbertTokenizer(spm_model_file=tokenizer.spm_model_file, digit_comma_rule="drop_added_marker")
    assert feature_cache.tokenizer_fingerprint(dropping)["digit_comma_rule"] == "drop_added_marker"
    calls = []
    kept = feature_cache.load_or_build(str(tmp_path), "toy_train", _key(str(data_file), tokenizer, 8), _spec(8),
                                       _features(8, calls))
    dropped = feature_cache.load_or_build(str(tmp_path), "toy_train", _key(str(data_file), dropping, 8), _spec(8),
                                          _features(8, calls))
    assert calls == [8, 8] and dropped.path != kept.path

def test_fingerprints_follow_content():
    assert feature_cache.records_fingerprint([{"a": 1}]) == feature_cache.records_fingerprint([{"a": 1}])
    assert feature_cache.records_fingerprint([{"a": 1}]) != feature_cache.records_fingerprint([{"a": 2}])


def test_failed_build_leaves_no_cache(tmp_path):
    def broken():
        yield {"input_word_ids": np.zeros(4), "choices": np.zeros([2, 3]), "label_ids": 0.0}
        raise RuntimeError("tokenizer crashed")

    with pytest.raises(RuntimeError, match="tokenizer crashed"):
        feature_cache.load_or_build(str(tmp_path), "toy_train", "k" * 64, _spec(4), broken)
    assert os.listdir(tmp_path) == []


def test_bad_feature_shape_is_named(tmp_path):
    def wrong():
        yield {"input_word_ids": np.zeros(3), "choices": np.zeros([2, 3]), "label_ids": 0.0}

    with pytest.raises(ValueError, match=r"'input_word_ids' of example 0 has shape \(3,\).*\(4,\)"):
        feature_cache.load_or_build(str(tmp_path), "toy_train", "k" * 64, _spec(4), wrong)


_KILLED_WRITER = """
import sys, time
import numpy as np
import tensorflow as tf
from data_gen.readers import feature_cache
from tests.helpers import REPO_ROOT

def make():
    for index in range(1000):
        if index == 3:
            print("WRITING", flush=True)
            time.sleep(600)
        yield {"input_word_ids": np.arange(4), "choices": np.zeros([2, 3]), "label_ids": 0.0}

spec = {"input_word_ids": tf.TensorSpec([4], tf.int32), "choices": tf.TensorSpec([2, 3], tf.int32),
        "label_ids": tf.TensorSpec([], tf.float32)}
feature_cache.load_or_build(sys.argv[1], "toy_train", "k" * 64, spec, make)
"""


def test_a_cache_whose_writer_was_killed_or_that_was_cut_short_is_rebuilt_not_read(tmp_path, caplog):
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(tmp_path)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "WRITING"
    writer.kill()
    writer.wait()
    assert [name for name in os.listdir(tmp_path) if ".tmp-" in name]
    calls = []
    first = feature_cache.load_or_build(str(tmp_path), "toy_train", "k" * 64, _spec(4), _features(4, calls))
    assert calls == [4] and first.num_examples == 5
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(first.path), os.path.basename(first.path) + ".json"]

    whole = open(first.path, "rb").read()
    with open(first.path, "wb") as handle:
        handle.write(whole[:len(whole) // 2])  # a copy cut short; its sidecar still promises 5 examples
    with caplog.at_level("WARNING", logger="absl"):
        again = feature_cache.load_or_build(str(tmp_path), "toy_train", "k" * 64, _spec(4), _features(4, calls))
    assert calls == [4, 4] and again.num_examples == 5
    assert f"Rebuilding {first.path}: it holds {len(whole) // 2} bytes where the complete cache held {len(whole)}" \
        in caplog.text
    assert len([1 for _ in again.dataset()]) == 5
