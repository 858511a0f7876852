"""data_gen.pretraining.tfrecord_framing: the TF-free framing equals tf.io.TFRecordWriter's bytes and reads back."""
import random

import pytest
import tensorflow as tf

from data_gen.pretraining import tfrecord_framing

# tests/conftest.py puts .venv/beam on the path; `make test` installs it.
pytest.importorskip("google_crc32c", reason="the beam extra is not installed: run `make beam`")


def _records(count, seed=0):
    rng = random.Random(seed)
    return [b""] + [bytes(rng.randrange(256) for _ in range(rng.choice([1, 7, 300, 5000]))) for _ in range(count)]


def test_framing_equals_tensorflow_writer_byte_for_byte(tmp_path):
    records = _records(40)
    reference = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(reference) as writer:
        for record in records:
            writer.write(record)
    ours = tmp_path / "ours.tfrecord"
    with open(ours, "wb") as handle:
        written = tfrecord_framing.write_records(handle, records)
    with open(reference, "rb") as handle:
        expected = handle.read()
    assert ours.read_bytes() == expected
    assert written == len(expected) == sum(len(record) + 16 for record in records)


def test_framed_records_read_back_with_tensorflow(tmp_path):
    records = _records(25, seed=3)
    path = tmp_path / "ours.tfrecord"
    path.write_bytes(b"".join(tfrecord_framing.frame_record(record) for record in records))
    read = [record.numpy() for record in tf.data.TFRecordDataset(str(path))]
    assert read == records


def test_a_corrupted_byte_fails_tensorflow_checksum(tmp_path):
    framed = bytearray(tfrecord_framing.frame_record(b"some record data"))
    framed[14] ^= 0x01
    path = tmp_path / "corrupt.tfrecord"
    path.write_bytes(bytes(framed))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))
