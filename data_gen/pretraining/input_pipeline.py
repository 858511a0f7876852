"""The tf.data pipeline that feeds pretraining: TFRecord shards of tf.train.Example -> batches of model inputs.

Record format (written by create_pretraining_data, names and dtypes of the original ALBERT):
input_ids, input_mask, segment_ids, token_boundary (int64, max_seq_length); masked_lm_positions,
masked_lm_ids (int64, max_predictions_per_seq); masked_lm_weights (float, max_predictions_per_seq);
next_sentence_labels (int64, 1; the sentence-order label in ALBERT). Like the original reader, this one
does not read token_boundary (only the original's unfinished masked_lm_budget mode did), so records
without it, e.g. BERT's, are read too.

Output element: a dict keyed by the model's input names, all int32 except the float32 weights:
input_word_ids, input_mask, input_type_ids [batch, max_seq_length]; masked_lm_positions, masked_lm_ids,
masked_lm_weights [batch, max_predictions_per_seq]; next_sentence_labels [batch].
"""

import collections
import logging
import re
import struct
from typing import Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

# record feature -> (model input name, record dtype, the length argument it must equal)
RECORD_FEATURES = {
    "input_ids": ("input_word_ids", tf.int64, "max_seq_length"),
    "input_mask": ("input_mask", tf.int64, "max_seq_length"),
    "segment_ids": ("input_type_ids", tf.int64, "max_seq_length"),
    "masked_lm_positions": ("masked_lm_positions", tf.int64, "max_predictions_per_seq"),
    "masked_lm_ids": ("masked_lm_ids", tf.int64, "max_predictions_per_seq"),
    "masked_lm_weights": ("masked_lm_weights", tf.float32, "max_predictions_per_seq"),
    "next_sentence_labels": ("next_sentence_labels", tf.int64, None),
}
# The original reads 4 files in parallel (num_cpu_threads=4) and shuffles records in a 100-record buffer.
DEFAULT_CYCLE_LENGTH = 4
DEFAULT_SHUFFLE_BUFFER = 100
_KIND_OF_DTYPE = {tf.int64: "int64_list", tf.float32: "float_list"}
# A TFRecord: its length (8 bytes) and the length's checksum (4), the data, the data's checksum (4).
_RECORD_HEADER_BYTES = 12
_RECORD_FRAMING_BYTES = 16


def expand_file_pattern(input_pattern: Union[str, Sequence[str]]) -> List[str]:
    """The files matched by a comma list and/or globs (local paths or gs:// URLs), in the order given.

    Each part's matches come sorted, as the original's `tf.gfile.Glob`; a file named twice is read once.

    Every part must match at least one file: a typo in one part of a list is an error, not a smaller
    data set.

    Example:
    >>> expand_file_pattern("/tmp/pretrain/train-*.tfrecord,/tmp/pretrain/extra.tfrecord")  # doctest: +SKIP
    ['/tmp/pretrain/train-00000.tfrecord', ..., '/tmp/pretrain/extra.tfrecord']
    """
    parts = input_pattern.split(",") if isinstance(input_pattern, str) else list(input_pattern)
    parts = [part.strip() for part in parts if part.strip()]
    if not parts:
        raise ValueError(f"Input pattern {input_pattern!r} names no files.")
    files = []
    for part in parts:
        matches = tf.io.gfile.glob(part)
        if not matches:
            raise FileNotFoundError(f"No file matches the input pattern {part!r}"
                                    f"{f' (in {input_pattern!r})' if part != input_pattern else ''}.")
        files.extend(sorted(matches))
    return list(dict.fromkeys(files))


def make_pretraining_dataset(input_pattern: Union[str, Sequence[str]], *, batch_size: int, max_seq_length: int,
                             max_predictions_per_seq: int, is_training: bool,
                             input_context: Optional[tf.distribute.InputContext] = None,
                             seed: Optional[int] = None, shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                             cycle_length: Optional[int] = None, num_epochs: Optional[int] = None,
                             drop_remainder: Optional[bool] = None, skip_batches: int = 0) -> tf.data.Dataset:
    """Reads pretraining TFRecords into batches of model inputs.

    `batch_size` is the batch of THIS input pipeline. Under tf.distribute, build the dataset with
    `strategy.distribute_datasets_from_function(fn)`, where `fn(input_context)` calls this function with
    `batch_size=input_context.get_per_replica_batch_size(global_batch_size)` and `input_context`; each
    worker then reads its own share of the files (or of the records, when there are fewer files than input
    pipelines). Without an input context the dataset is not sharded and `batch_size` is the whole batch.

    Training (`is_training=True`): files are shuffled, read `cycle_length` at a time in parallel
    (default min(4, files), as the original), records are shuffled in a `shuffle_buffer` (default 100, as
    the original), the data repeats `num_epochs` times (None: forever) and incomplete batches are dropped
    so every batch has a static shape (XLA, TPU). Evaluation (`is_training=False`): no shuffling, the files
    read one after another in the order given (the original's TFRecordDataset(files), so that
    `max_eval_steps` batches cover the same records), `num_epochs` passes (None: one) and, by default, the
    last partial batch is kept so every record is evaluated; pass `drop_remainder=True` where static shapes
    matter more than the last records (TPU).

    `skip_batches` leaves out the first batches (those a resumed run already consumed). They are skipped
    as records, before parsing: the same batches follow as from `dataset.skip(skip_batches)`, at the cost
    of reading the records only.

    With a `seed` the order is the same on every run (shuffles seeded, `Options.deterministic=True`);
    without one, training trades a fixed order for throughput (files and parallel parsing finish in any
    order, as the original's sloppy interleave).

    A record whose feature is missing or has another length than `max_seq_length` /
    `max_predictions_per_seq` stops the pipeline with an error naming the file, the feature and both
    lengths. The first record of this pipeline's first non-empty file is checked before the pipeline is
    built (dtypes included), so a wrong flag fails at once rather than at the first training step.

    Example:
    >>> dataset = make_pretraining_dataset("/tmp/pretrain/train-*.tfrecord", batch_size=8, max_seq_length=128,
    ...                                    max_predictions_per_seq=20, is_training=True, seed=1)  # doctest: +SKIP
    >>> batch = next(iter(dataset))  # doctest: +SKIP
    >>> batch["input_word_ids"].shape, batch["next_sentence_labels"].shape  # doctest: +SKIP
    (TensorShape([8, 128]), TensorShape([8]))
    """
    for name, value in (("batch_size", batch_size), ("max_seq_length", max_seq_length),
                        ("max_predictions_per_seq", max_predictions_per_seq), ("shuffle_buffer", shuffle_buffer)):
        if value < 1:
            raise ValueError(f"{name}={value} must be a positive integer.")
    for name, value in (("cycle_length", cycle_length), ("num_epochs", num_epochs)):
        if value is not None and value < 1:
            raise ValueError(f"{name}={value} must be a positive integer or None.")
    if skip_batches < 0:
        raise ValueError(f"skip_batches={skip_batches} must be a non-negative integer.")
    lengths = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    files = expand_file_pattern(input_pattern)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines
    shard_records = num_pipelines > 1 and not shard_files
    pipeline_files = files[pipeline_id::num_pipelines] if shard_files else files
    with tf.init_scope():
        # Eagerly, even when a tf.function traces the dataset function.
        validate_first_record(pipeline_files, max_seq_length, max_predictions_per_seq)
    deterministic = seed is not None or not is_training
    if num_epochs is None and not is_training:
        num_epochs = 1
    logging.info("Pretraining input: %d file(s) matching %r, pipeline %d of %d (sharding %s), %s",
                 len(files), input_pattern, pipeline_id, num_pipelines,
                 "files" if shard_files else "records" if shard_records else "none",
                 "training" if is_training else "evaluation")

    dataset = _named_records(pipeline_files, is_training=is_training, seed=seed, num_epochs=num_epochs,
                             cycle_length=min(cycle_length or DEFAULT_CYCLE_LENGTH, len(pipeline_files))
                             if is_training else 1,
                             deterministic=deterministic,
                             record_shard=(num_pipelines, pipeline_id) if shard_records else None)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if skip_batches:
        # Every batch before the last is full, so these records make exactly the skipped batches.
        dataset = dataset.skip(skip_batches * batch_size)
    # Parsing whole batches is about 4x faster than parsing record by record (map, then batch).
    dataset = dataset.batch(batch_size, drop_remainder=is_training if drop_remainder is None else drop_remainder)
    dataset = dataset.map(lambda file_names, records: _decode_batch(file_names, records, lengths),
                          num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = deterministic
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def make_pretraining_eval_dataset(input_pattern: Union[str, Sequence[str]], *, batch_size: int,
                                  max_seq_length: int, max_predictions_per_seq: int,
                                  input_context: Optional[tf.distribute.InputContext] = None,
                                  drop_remainder: bool = False) -> tf.data.Dataset:
    """One pass over an evaluation set, in a fixed order, every record included (see make_pretraining_dataset).

    The original evaluates `max_eval_steps` batches of a repeated stream; `dataset.take(max_eval_steps)`
    on this dataset gives that, while iterating it whole evaluates each record exactly once.

    Example:
    >>> dataset = make_pretraining_eval_dataset("/tmp/pretrain/eval.tfrecord", batch_size=8,
    ...                                         max_seq_length=128, max_predictions_per_seq=20)  # doctest: +SKIP
    >>> sum(int(batch["input_word_ids"].shape[0]) for batch in dataset)  # doctest: +SKIP
    1000
    """
    return make_pretraining_dataset(input_pattern, batch_size=batch_size, max_seq_length=max_seq_length,
                                    max_predictions_per_seq=max_predictions_per_seq, is_training=False,
                                    input_context=input_context, num_epochs=1, drop_remainder=drop_remainder)


def pretraining_dataset_fn(input_pattern: Union[str, Sequence[str]], *, max_seq_length: int,
                           max_predictions_per_seq: int, is_training: bool, seed: Optional[int] = None):
    """The Trainer's `dataset_fn(input_context, batch_size, skip_batches)` over these records.

    `skip_batches` lets a resumed run continue after the batches it already consumed; with a seed the
    order is the same on every run, so the resumed run sees exactly the data an uninterrupted one would.

    Example:
    >>> dataset_fn = pretraining_dataset_fn("/tmp/pretrain/train-*", max_seq_length=128,
    ...                                     max_predictions_per_seq=20, is_training=True, seed=1)  # doctest: +SKIP
    >>> next(iter(dataset_fn(None, 8, 0)))["input_word_ids"].shape  # doctest: +SKIP
    TensorShape([8, 128])
    """
    def dataset_fn(input_context, batch_size, skip_batches):
        return make_pretraining_dataset(input_pattern, batch_size=batch_size, max_seq_length=max_seq_length,
                                        max_predictions_per_seq=max_predictions_per_seq, is_training=is_training,
                                        input_context=input_context, seed=seed, skip_batches=skip_batches)

    return dataset_fn


def masked_lm_majority_baseline(train_pattern: Union[str, Sequence[str]], eval_pattern: Union[str, Sequence[str]],
                                *, max_seq_length: int, max_predictions_per_seq: int,
                                batch_size: int = 256) -> Dict[str, float]:
    """The trivial MLM baseline: always predict the most frequent masked token of the training data.

    Returns {"token_id", "accuracy"} where accuracy is over the evaluation data's real masked positions.
    """
    def masked_ids(pattern):
        dataset = make_pretraining_eval_dataset(pattern, batch_size=batch_size, max_seq_length=max_seq_length,
                                                max_predictions_per_seq=max_predictions_per_seq)
        for batch in dataset:
            weights = batch["masked_lm_weights"].numpy() > 0
            yield batch["masked_lm_ids"].numpy()[weights]

    counts = collections.Counter()
    for ids in masked_ids(train_pattern):
        counts.update(ids.tolist())
    if not counts:
        raise ValueError(f"{train_pattern} holds no masked positions.")
    token_id = counts.most_common(1)[0][0]
    hits = total = 0
    for ids in masked_ids(eval_pattern):
        hits += int((ids == token_id).sum())
        total += ids.size
    if not total:
        raise ValueError(f"{eval_pattern} holds no masked positions.")
    return {"token_id": int(token_id), "accuracy": hits / total}


def sentence_order_majority_baseline(eval_pattern: Union[str, Sequence[str]], *, max_seq_length: int,
                                     max_predictions_per_seq: int, batch_size: int = 256) -> Dict[str, float]:
    """The trivial SOP baseline: always predict the label that most of the evaluation records carry.

    Returns {"label", "accuracy"}: that label (the smaller one on a tie) and the share of the records that carry it.
    It is no coin: label 1 is B swapped, and also B from a random document for a chunk with one segment (the
    original's rule), so data with short documents hold more 1s.
    """
    counts = collections.Counter()
    dataset = make_pretraining_eval_dataset(eval_pattern, batch_size=batch_size, max_seq_length=max_seq_length,
                                            max_predictions_per_seq=max_predictions_per_seq)
    for batch in dataset:
        counts.update(batch["next_sentence_labels"].numpy().tolist())
    label = max(sorted(counts), key=counts.get)
    return {"label": int(label), "accuracy": counts[label] / sum(counts.values())}


def validate_first_record(files: Sequence[str], max_seq_length: int, max_predictions_per_seq: int) -> None:
    """Checks the first record of the first non-empty file: every feature present, of its dtype and length.

    Raises ValueError naming the file, the feature and both lengths (or kinds); a pipeline whose files
    are all empty is an error too.
    """
    lengths = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    for path in files:
        records = list(tf.data.TFRecordDataset(path).take(1).as_numpy_iterator())
        if not records:
            continue
        features = tf.train.Example.FromString(records[0]).features.feature
        for name, (_, dtype, length_name) in RECORD_FEATURES.items():
            expected_kind = _KIND_OF_DTYPE[dtype]
            expected_length = lengths[length_name] if length_name else 1
            requirement = _requirement(length_name, expected_length)
            if name not in features:
                raise ValueError(f"{path}: feature {name} is missing but {requirement}; "
                                 f"the record has {sorted(features)}.")
            kind = features[name].WhichOneof("kind")
            if kind != expected_kind:
                raise ValueError(f"{path}: feature {name} holds a {kind} but must hold a {expected_kind}.")
            length = len(getattr(features[name], kind).value)
            if length != expected_length:
                raise ValueError(f"{path}: feature {name} has length {length} but {requirement}.")
        return
    raise ValueError(f"The input files hold no records: {list(files)}.")


def framing_damage(path: str) -> Optional[str]:
    """What is wrong with the TFRecord framing of the file at `path`, or None: a record whose length runs past the
    end of the file, or a few bytes at its end that cannot hold a record's 12-byte header (TensorFlow's reader
    takes those for the end of the file and silently reads fewer records). Reads only the 8-byte lengths, seeking
    past the records, so a whole data set is checked in seconds; checksums are the reader's (damaged_shards).

    Example:
    >>> framing_damage("/tmp/pretrain/train-00003")  # doctest: +SKIP
    'truncated record at 49855 (after 169 good records)'
    """
    size = tf.io.gfile.stat(path).length
    offset = records = 0
    with tf.io.gfile.GFile(path, "rb") as handle:
        while offset < size:
            if size - offset < _RECORD_HEADER_BYTES:
                return f"truncated record header at {offset} (after {records} good records)"
            handle.seek(offset)
            length = struct.unpack("<Q", handle.read(8))[0]
            if offset + _RECORD_FRAMING_BYTES + length > size:
                return f"truncated record at {offset} (after {records} good records)"
            offset += _RECORD_FRAMING_BYTES + length
            records += 1
    return None


def damaged_shards(input_pattern: Union[str, Sequence[str]]) -> Dict[str, str]:
    """{file: what is wrong with it} for every file of `input_pattern` that does not read to its end as TFRecords:
    a shard cut short (a full disk, a killed writer; framing_damage) or a record whose checksum fails; {} when all
    read.

    TensorFlow's reader names the damage and its byte offset but not the file when several files are read
    interleaved, so a training that meets a damaged record reads each file alone to say which it is.

    Example:
    >>> damaged_shards("/tmp/pretrain/train-*")  # doctest: +SKIP
    {'/tmp/pretrain/train-00003': 'corrupted record at 29807 (after 101 good records)'}
    """
    damaged = {}
    for path in expand_file_pattern(input_pattern):
        framing = framing_damage(path)
        if framing:
            damaged[path] = framing
            continue
        records = 0
        try:
            for _ in tf.data.TFRecordDataset(path):
                records += 1
        except tf.errors.DataLossError as error:
            damaged[path] = f"{_damage(error.message)} (after {records} good records)"
    return damaged


def _damage(message: str) -> str:
    """"truncated record at 49855" or "corrupted record at 29807" out of a DataLossError's message."""
    found = re.search(r"(truncated|corrupted) record at \d+", message)
    return found.group(0) if found else message.strip().splitlines()[0]


def _requirement(length_name: Optional[str], expected: int) -> str:
    return f"{length_name}={expected}" if length_name else f"it must have length {expected}"


def _named_records(files: Sequence[str], *, is_training: bool, seed: Optional[int], num_epochs: Optional[int],
                   cycle_length: int, deterministic: bool,
                   record_shard: Optional[Tuple[int, int]]) -> tf.data.Dataset:
    """(file name, serialized record) pairs read from `files`, the name kept for error messages."""
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(list(files), dtype=tf.string))
    if record_shard is None:
        if is_training:
            dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.interleave(
        _read_named_records, cycle_length=cycle_length, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
        # Record sharding needs the same record order in every pipeline to split the records disjointly.
        deterministic=deterministic or record_shard is not None)
    if record_shard is not None:
        dataset = dataset.shard(*record_shard).repeat(num_epochs)
    return dataset


def _read_named_records(file_name: tf.Tensor) -> tf.data.Dataset:
    return tf.data.TFRecordDataset(file_name).map(lambda record: (file_name, record))


def _decode_batch(file_names: tf.Tensor, records: tf.Tensor, lengths: Dict[str, int]) -> Dict[str, tf.Tensor]:
    """Parses a batch of records, checks every feature's length per record, and renames to model inputs."""
    # Ragged rather than FixedLenFeature: a wrong length must reach the check below, which names the file
    # and both lengths, instead of failing inside the parser with neither.
    parsed = tf.io.parse_example(
        records, {name: tf.io.RaggedFeature(dtype) for name, (_, dtype, _) in RECORD_FEATURES.items()})
    inputs = {}
    for name, (input_name, _, length_name) in RECORD_FEATURES.items():
        expected = lengths[length_name] if length_name else 1
        row_lengths = tf.cast(parsed[name].row_lengths(), tf.int32)
        wrong = tf.not_equal(row_lengths, expected)
        first_wrong = tf.argmax(tf.cast(wrong, tf.int32), output_type=tf.int32)
        length = row_lengths[first_wrong]
        problem = tf.where(tf.equal(length, 0), " is missing",
                           tf.strings.join([" has length ", tf.strings.as_string(length)]))
        message = tf.strings.join([file_names[first_wrong], f": feature {name}", problem,
                                   f" but {_requirement(length_name, expected)}."])
        check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(wrong)), [message])
        with tf.control_dependencies([check]):
            values = tf.reshape(parsed[name].flat_values, [-1, expected])
        values = tf.ensure_shape(values, [records.shape[0], expected])
        if values.dtype == tf.int64:
            values = tf.cast(values, tf.int32)
        inputs[input_name] = values
    inputs["next_sentence_labels"] = tf.reshape(inputs["next_sentence_labels"], [-1])
    return inputs
