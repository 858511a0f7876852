"""Tests for data_gen/pretraining/input_pipeline.py on small TFRecord files written here in the original record
format."""
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from data_gen.pretraining import input_pipeline

MAX_SEQ_LENGTH = 8
MAX_PREDICTIONS = 3


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def _record_features(record_id, max_seq_length=MAX_SEQ_LENGTH, max_predictions=MAX_PREDICTIONS):
    """A record whose values all derive from record_id, so any field shows which record it came from."""
    return {
        "input_ids": _int_feature([record_id] + [100 + i for i in range(max_seq_length - 1)]),
        "input_mask": _int_feature([1] * (max_seq_length - 2) + [0, 0]),
        "segment_ids": _int_feature([0] * (max_seq_length // 2) + [1] * (max_seq_length - max_seq_length // 2)),
        "token_boundary": _int_feature([1] * max_seq_length),
        "masked_lm_positions": _int_feature([1, 2] + [0] * (max_predictions - 2)),
        "masked_lm_ids": _int_feature([record_id + 1, record_id + 2] + [0] * (max_predictions - 2)),
        "masked_lm_weights": _float_feature([1.0, 0.5] + [0.0] * (max_predictions - 2)),
        "next_sentence_labels": _int_feature([record_id % 2]),
    }


def _write_records(path, record_ids, change=None, change_from=0):
    """Writes one record per id; `change(features)` edits the records from index `change_from` on."""
    with tf.io.TFRecordWriter(path) as writer:
        for index, record_id in enumerate(record_ids):
            features = _record_features(record_id)
            if change is not None and index >= change_from:
                change(features)
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    return path


def _write_shards(directory, num_files, records_per_file):
    paths = []
    for file_index in range(num_files):
        ids = range(file_index * 1000, file_index * 1000 + records_per_file)
        paths.append(_write_records(os.path.join(directory, f"shard-{file_index:02d}.tfrecord"), ids))
    return os.path.join(directory, "shard-*.tfrecord")


def _dataset(pattern, **kwargs):
    kwargs.setdefault("batch_size", 4)
    kwargs.setdefault("is_training", False)
    return input_pipeline.make_pretraining_dataset(
        pattern, max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS, **kwargs)


def _record_ids(dataset, num_batches=None):
    if num_batches is not None:
        dataset = dataset.take(num_batches)
    return [int(i) for batch in dataset for i in batch["input_word_ids"][:, 0]]


def test_batches_carry_the_model_input_names_dtypes_shapes_and_values(tmp_path):
    pattern = _write_records(str(tmp_path / "one.tfrecord"), [7, 8, 9])
    batch = next(iter(_dataset(pattern, batch_size=2)))
    assert sorted(batch) == ["input_mask", "input_type_ids", "input_word_ids", "masked_lm_ids",
                             "masked_lm_positions", "masked_lm_weights", "next_sentence_labels"]
    for name, tensor in batch.items():
        assert tensor.dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32), name
    np.testing.assert_array_equal(batch["input_word_ids"][1], [8, 100, 101, 102, 103, 104, 105, 106])
    np.testing.assert_array_equal(batch["input_mask"][0], [1, 1, 1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(batch["input_type_ids"][0], [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(batch["masked_lm_positions"], [[1, 2, 0], [1, 2, 0]])
    np.testing.assert_array_equal(batch["masked_lm_ids"], [[8, 9, 0], [9, 10, 0]])
    np.testing.assert_allclose(batch["masked_lm_weights"], [[1.0, 0.5, 0.0], [1.0, 0.5, 0.0]])
    np.testing.assert_array_equal(batch["next_sentence_labels"], [1, 0])
    assert batch["next_sentence_labels"].shape == (2,)


def test_training_repeats_shuffles_and_keeps_a_static_batch_size(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=2, records_per_file=5)
    dataset = _dataset(pattern, batch_size=3, is_training=True, seed=3)
    assert dataset.element_spec["input_word_ids"].shape.as_list() == [3, MAX_SEQ_LENGTH]
    assert dataset.element_spec["next_sentence_labels"].shape.as_list() == [3]
    ids = _record_ids(dataset, num_batches=20)
    all_ids = [file * 1000 + i for file in range(2) for i in range(5)]
    assert len(ids) == 60 and set(ids) == set(all_ids)
    assert ids[:10] != sorted(ids[:10])


def test_evaluation_reads_every_record_once_and_keeps_the_last_partial_batch(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=3, records_per_file=5)
    dataset = input_pipeline.make_pretraining_eval_dataset(
        pattern, batch_size=4, max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS)
    sizes = [int(batch["input_word_ids"].shape[0]) for batch in dataset]
    assert sizes == [4, 4, 4, 3]
    # File after file, as the original's TFRecordDataset(files): max_eval_steps batches see the same records.
    assert _record_ids(dataset) == [file * 1000 + i for file in range(3) for i in range(5)]
    dropped = _dataset(pattern, batch_size=4, drop_remainder=True)
    assert [int(batch["input_word_ids"].shape[0]) for batch in dropped] == [4, 4, 4]


def test_the_sentence_order_baseline_is_the_majority_label_of_every_record(tmp_path):
    def baseline(pattern):
        return input_pipeline.sentence_order_majority_baseline(
            pattern, max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS, batch_size=4)

    # A record's label is its id % 2.
    mostly_0 = _write_records(str(tmp_path / "a.tfrecord"), range(7))
    mostly_1 = _write_records(str(tmp_path / "b.tfrecord"), [1, 3, 5, 7, 9, 2])
    assert baseline(mostly_0) == {"label": 0, "accuracy": pytest.approx(4 / 7)}
    # Every record of every file counts, the last partial batch too: 4 + 1 zeros, 3 + 5 ones.
    assert baseline(f"{mostly_0},{mostly_1}") == {"label": 1, "accuracy": pytest.approx(8 / 13)}
    assert baseline(_write_records(str(tmp_path / "tie.tfrecord"), [0, 1])) == {"label": 0, "accuracy": 0.5}


@pytest.mark.parametrize("num_files", [4, 1])
def test_two_input_pipelines_read_disjoint_shares_that_cover_the_data(tmp_path, num_files):
    # Four files are split by file; a single file (fewer files than pipelines) is split by record.
    pattern = _write_shards(str(tmp_path), num_files=num_files, records_per_file=6)
    shares = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
        shares.append(_record_ids(_dataset(pattern, batch_size=2, input_context=context)))
    assert set(shares[0]).isdisjoint(shares[1])
    assert sorted(shares[0] + shares[1]) == [f * 1000 + i for f in range(num_files) for i in range(6)]
    assert len(shares[0]) == len(shares[1]) == num_files * 3


def test_training_shards_by_record_stay_disjoint_without_a_seed(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=1, records_per_file=8)
    shares = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
        shares.append(_record_ids(_dataset(pattern, batch_size=2, is_training=True, num_epochs=1,
                                           input_context=context)))
    assert set(shares[0]).isdisjoint(shares[1])
    assert sorted(shares[0] + shares[1]) == list(range(8))


def test_a_seed_fixes_the_training_order(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=3, records_per_file=20)
    first = _record_ids(_dataset(pattern, is_training=True, seed=11, shuffle_buffer=30), num_batches=20)
    again = _record_ids(_dataset(pattern, is_training=True, seed=11, shuffle_buffer=30), num_batches=20)
    other = _record_ids(_dataset(pattern, is_training=True, seed=12, shuffle_buffer=30), num_batches=20)
    assert first == again
    assert first != other


def test_skipped_batches_are_those_a_run_from_the_start_consumed(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=3, records_per_file=7)
    straight = _record_ids(_dataset(pattern, is_training=True, seed=3), num_batches=12)
    resumed = _record_ids(_dataset(pattern, is_training=True, seed=3, skip_batches=5), num_batches=7)
    assert resumed == straight[5 * 4:]
    dataset_fn = input_pipeline.pretraining_dataset_fn(pattern, max_seq_length=MAX_SEQ_LENGTH,
                                                       max_predictions_per_seq=MAX_PREDICTIONS,
                                                       is_training=True, seed=3)
    assert _record_ids(dataset_fn(None, 4, 5), num_batches=7) == resumed
    # Evaluation: the partial last batch stays last.
    assert _record_ids(_dataset(pattern, skip_batches=4)) == _record_ids(_dataset(pattern))[16:]


def test_no_matching_file_names_the_pattern(tmp_path):
    missing = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(FileNotFoundError, match="nothing-\\*.tfrecord"):
        _dataset(missing)
    present = _write_records(str(tmp_path / "one.tfrecord"), [1])
    with pytest.raises(FileNotFoundError, match="nothing-\\*.tfrecord"):
        _dataset(f"{present},{missing}")
    assert len(input_pipeline.expand_file_pattern(f"{present}, {present}")) == 1
    # The order given, as the original's evaluation reads its comma list (a capped evaluation reads the first).
    later = _write_records(str(tmp_path / "a-later.tfrecord"), [2])
    assert input_pipeline.expand_file_pattern(f"{present},{later}") == [present, later]


def test_a_wrong_length_in_the_first_record_fails_before_the_pipeline_is_built(tmp_path):
    path = _write_records(str(tmp_path / "short.tfrecord"), [1, 2])
    with pytest.raises(ValueError, match=f"{path}: feature input_ids has length 8 but max_seq_length=16"):
        input_pipeline.make_pretraining_dataset(path, batch_size=2, max_seq_length=16,
                                                max_predictions_per_seq=MAX_PREDICTIONS, is_training=False)
    with pytest.raises(ValueError, match=f"{path}: feature masked_lm_positions has length 3 but "
                       "max_predictions_per_seq=5"):
        input_pipeline.make_pretraining_dataset(path, batch_size=2, max_seq_length=MAX_SEQ_LENGTH,
                                                max_predictions_per_seq=5, is_training=True)


def test_a_missing_or_mistyped_feature_in_the_first_record_is_named(tmp_path):
    missing = _write_records(str(tmp_path / "missing.tfrecord"), [1], change=lambda f: f.pop("segment_ids"))
    with pytest.raises(ValueError, match=f"{missing}: feature segment_ids is missing"):
        _dataset(missing)
    mistyped = _write_records(str(tmp_path / "mistyped.tfrecord"), [1],
                              change=lambda f: f.update(masked_lm_weights=_int_feature([1, 1, 0])))
    with pytest.raises(ValueError, match=f"{mistyped}: feature masked_lm_weights holds a int64_list but must "
                       "hold a float_list"):
        _dataset(mistyped)


def test_a_token_boundary_is_not_required(tmp_path):
    path = _write_records(str(tmp_path / "bert.tfrecord"), [5], change=lambda f: f.pop("token_boundary"))
    assert _record_ids(_dataset(path)) == [5]


def test_a_bad_later_record_stops_the_pipeline_naming_file_feature_and_lengths(tmp_path):
    _write_records(str(tmp_path / "a-good.tfrecord"), range(4))
    bad = _write_records(str(tmp_path / "b-bad.tfrecord"), range(10, 14), change_from=2,
                         change=lambda f: f.update(masked_lm_ids=_int_feature([1, 2])))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"{bad}: feature masked_lm_ids has length 2 but max_predictions_per_seq=3"):
        _record_ids(_dataset(str(tmp_path / "*.tfrecord")))
    missing = _write_records(str(tmp_path / "c-missing.tfrecord"), range(20, 22), change_from=1,
                             change=lambda f: f.pop("next_sentence_labels"))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"{missing}: feature next_sentence_labels is missing but it must have length 1"):
        _record_ids(_dataset(missing))


def test_bad_sizes_are_rejected(tmp_path):
    path = _write_records(str(tmp_path / "one.tfrecord"), [1])
    with pytest.raises(ValueError, match="batch_size=0"):
        _dataset(path, batch_size=0)
    with pytest.raises(ValueError, match="num_epochs=0"):
        _dataset(path, num_epochs=0)
    with pytest.raises(ValueError, match="cycle_length=0"):
        _dataset(path, cycle_length=0)


def test_the_dataset_function_works_under_a_distribution_strategy(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=2, records_per_file=4)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")

    def dataset_fn(input_context):
        return _dataset(pattern, batch_size=input_context.get_per_replica_batch_size(4),
                        input_context=input_context)

    batches = list(strategy.distribute_datasets_from_function(dataset_fn))
    ids = [int(i) for batch in batches for i in batch["input_word_ids"][:, 0]]
    assert sorted(ids) == [0, 1, 2, 3, 1000, 1001, 1002, 1003]


def test_a_shard_cut_short_or_with_a_bad_checksum_is_named_with_what_is_wrong(tmp_path):
    pattern = _write_shards(str(tmp_path), num_files=4, records_per_file=20)
    shards = sorted(tf.io.gfile.glob(pattern))
    whole = open(shards[1], "rb").read()
    record = len(whole) // 20
    cuts = {1: 10 * record + 40, 2: 10 * record + 7}  # inside a record's data; inside its 12-byte header
    for index, cut in cuts.items():
        with open(shards[index], "wb") as handle:
            handle.write(whole[:cut])  # a writer killed, or a full disk
    damaged = bytearray(open(shards[3], "rb").read())
    damaged[5 * record + 30] ^= 0xFF  # one flipped byte inside a record's data
    with open(shards[3], "wb") as handle:
        handle.write(bytes(damaged))
    found = input_pipeline.damaged_shards(pattern)
    assert found == {shards[1]: f"truncated record at {10 * record} (after 10 good records)",
                     shards[2]: f"truncated record header at {10 * record} (after 10 good records)",
                     # TensorFlow counts the offset from the damaged data, past the 12-byte header.
                     shards[3]: f"corrupted record at {5 * record + 12} (after 5 good records)"}
    # TensorFlow's own reader takes the cut header for the end of the file: only the framing check sees it.
    assert sum(1 for _ in tf.data.TFRecordDataset(shards[2])) == 10
    assert input_pipeline.damaged_shards(shards[0]) == {} and input_pipeline.framing_damage(shards[3]) is None
