"""Fine-tuning features cached as TFRecords, keyed by everything that shapes them.

The original keyed its cache by task and split name only (`<task>_train.tf_record`), so changing
`max_seq_length`, the vocabulary or the data silently reused stale features. Here the file name carries
a SHA-256 over the data's content, the tokenizer's files and casing, and every parameter the caller
names (max_seq_length, doc_stride, max_query_length, ...): a stale cache is never reused. A cache is
written under a temporary name and renamed when complete, so a killed run never leaves a half file
that a later run would trust.

Example:
>>> import tempfile
>>> import tensorflow as tf
>>> spec = {"input_word_ids": tf.TensorSpec([4], tf.int32), "label_ids": tf.TensorSpec([], tf.float32)}
>>> def make_features():
...     yield {"input_word_ids": [2, 7, 3, 0], "label_ids": 0.5}
>>> key = cache_key("demo", data_fingerprint="abc", tokenizer=None, params={"max_seq_length": 4})
>>> features = load_or_build(tempfile.mkdtemp(), "demo_train", key, spec, make_features)
>>> features.num_examples, next(iter(features.dataset()))["input_word_ids"].numpy().tolist()
(1, [2, 7, 3, 0])
"""

import dataclasses
import hashlib
import json
import os
import time
import uuid
from typing import Callable, Dict, Iterable, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

# Bump when the features written for the same inputs change, so older caches are not reused (2: SQuAD answer
# labels count a space at either end as the original does).
FEATURE_FORMAT_VERSION = 2
_LOG_EVERY_EXAMPLES = 10000
_READ_CHUNK_BYTES = 1 << 20


def file_sha256(path: str) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_READ_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_fingerprint(paths: Sequence[str]) -> str:
    """One fingerprint of the content of several files (their order and names do not matter)."""
    if not paths:
        raise ValueError("files_fingerprint needs at least one data file, got none.")
    return hashlib.sha256("".join(sorted(file_sha256(path) for path in paths)).encode()).hexdigest()


def records_fingerprint(records: Iterable) -> str:
    """A fingerprint of already-read examples (e.g. from tensorflow-datasets), from their JSON form."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps(record, sort_keys=True, default=str).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def tokenizer_fingerprint(tokenizer) -> Dict[str, object]:
    """What about a tokenizer shapes the ids: its vocabulary file's bytes, its kind, its casing and its digit-comma
    rule."""
    if tokenizer is None:
        return {}
    return {"kind": "sentencepiece" if tokenizer.uses_sentencepiece else "wordpiece",
            "vocabulary_sha256": file_sha256(tokenizer.source), "do_lower_case": bool(tokenizer.do_lower_case),
            "digit_comma_rule": tokenizer.digit_comma_rule}


def cache_key(task_name: str, data_fingerprint: str, tokenizer, params: Dict[str, object]) -> str:
    """The hex SHA-256 of the task, the data fingerprint, the tokenizer and `params` (JSON-serialisable)."""
    description = {"format_version": FEATURE_FORMAT_VERSION, "task": task_name, "data": data_fingerprint,
                   "tokenizer": tokenizer_fingerprint(tokenizer), "params": params}
    try:
        text = json.dumps(description, sort_keys=True)
    except TypeError as error:
        raise ValueError(f"Feature cache params for task {task_name!r} must be JSON-serialisable: {error}.") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclasses.dataclass
class CachedFeatures:
    """A complete TFRecord file of fixed-length features and how many examples it holds.

    `feature_spec` maps each feature name to a tf.TensorSpec of one example (int32/int64 or float32,
    fixed shape); `dataset()` reads the file back as unbatched dicts of those shapes and dtypes.
    """

    path: str
    num_examples: int
    feature_spec: Dict[str, tf.TensorSpec]

    def dataset(self) -> tf.data.Dataset:
        """The examples in file order, unbatched, as {name: tensor of feature_spec's shape and dtype}."""
        parse_spec = {name: tf.io.FixedLenFeature(spec.shape, _storage_dtype(name, spec))
                      for name, spec in self.feature_spec.items()}
        feature_spec = self.feature_spec

        def parse(record):
            parsed = tf.io.parse_single_example(record, parse_spec)
            return {name: tf.cast(value, feature_spec[name].dtype) for name, value in parsed.items()}

        return tf.data.TFRecordDataset(self.path).map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                                                      deterministic=True)


def cache_path(cached_dir: str, name: str, key: str) -> str:
    """Where the features called `name` (e.g. "mrpc_train") with `key` are cached."""
    return os.path.join(cached_dir, f"{name}.{key[:20]}.tf_record")


def load_or_build(cached_dir: str, name: str, key: str, feature_spec: Dict[str, tf.TensorSpec],
                  make_features: Callable[[], Iterable[Dict[str, object]]]) -> CachedFeatures:
    """Reuses the cache of (`name`, `key`) when complete, else writes `make_features()` into it.

    A complete cache has its record file and a `.json` sidecar (written last) that repeats the full key, the
    example count and the record file's size; anything else is rebuilt: a file of another size (cut short, or
    copied half-way) is never read for the count its sidecar promises. What a killed writer left beside it (its
    temporary files) is removed first.
    """
    path = cache_path(cached_dir, name, key)
    metadata = _read_metadata(path)
    if metadata is not None and metadata.get("key") == key:
        size = tf.io.gfile.stat(path).length
        if size == metadata.get("bytes"):
            logging.info("Reusing %d cached examples from %s.", metadata["num_examples"], path)
            return CachedFeatures(path, metadata["num_examples"], feature_spec)
        logging.warning("Rebuilding %s: it holds %d bytes where the complete cache held %s.", path, size,
                        metadata.get("bytes", "an unrecorded number of"))
    for leftover in tf.io.gfile.glob(f"{path}.tmp-*"):
        tf.io.gfile.remove(leftover)
    logging.info("Writing features %s to %s.", name, path)
    num_examples = write_features(path, make_features(), feature_spec)
    _write_atomically(path + ".json", json.dumps({"key": key, "name": name, "num_examples": num_examples,
                                                  "bytes": tf.io.gfile.stat(path).length}))
    return CachedFeatures(path, num_examples, feature_spec)


def write_features(path: str, features: Iterable[Dict[str, object]], feature_spec: Dict[str, tf.TensorSpec]) -> int:
    """Writes dicts of fixed-length features as tf.train.Examples, atomically; returns the count.

    Each value must have exactly its spec's shape; a missing, extra or mis-shaped feature is an error
    naming the example and the feature.
    """
    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    count = 0
    start = time.monotonic()
    try:
        with tf.io.TFRecordWriter(temporary) as writer:
            for features in features:
                writer.write(_to_example(features, feature_spec, count).SerializeToString())
                count += 1
                if count % _LOG_EVERY_EXAMPLES == 0:
                    logging.info("Wrote %d examples to %s (%.0f examples/s).", count, path,
                                 count / max(time.monotonic() - start, 1e-9))
        tf.io.gfile.rename(temporary, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(temporary):
            tf.io.gfile.remove(temporary)
    logging.info("Wrote %d examples to %s in %.1f s.", count, path, time.monotonic() - start)
    return count


def _to_example(features, feature_spec, index):
    if set(features) != set(feature_spec):
        raise ValueError(f"Feature example {index} has features {sorted(features)}, but the spec expects "
                         f"{sorted(feature_spec)}.")
    proto = {}
    for name, spec in feature_spec.items():
        value = np.asarray(features[name])
        if value.shape != tuple(spec.shape):
            raise ValueError(f"Feature {name!r} of example {index} has shape {value.shape}, but the spec "
                             f"expects {tuple(spec.shape)}.")
        flat = value.reshape(-1).tolist()
        if _storage_dtype(name, spec) == tf.float32:
            proto[name] = tf.train.Feature(float_list=tf.train.FloatList(value=flat))
        else:
            proto[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(item) for item in flat]))
    return tf.train.Example(features=tf.train.Features(feature=proto))


def _storage_dtype(name, spec):
    if spec.dtype.is_integer:
        return tf.int64
    if spec.dtype == tf.float32:
        return tf.float32
    raise ValueError(f"Feature {name!r} has dtype {spec.dtype.name}; cached features must be integers or float32.")


def _read_metadata(path) -> Optional[dict]:
    if not (tf.io.gfile.exists(path) and tf.io.gfile.exists(path + ".json")):
        return None
    try:
        with tf.io.gfile.GFile(path + ".json", "r") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, OSError):
        logging.warning("Ignoring the unreadable cache metadata %s.json; rebuilding.", path)
        return None


def _write_atomically(path, text):
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    with tf.io.gfile.GFile(temporary, "w") as handle:
        handle.write(text)
    tf.io.gfile.rename(temporary, path, overwrite=True)
