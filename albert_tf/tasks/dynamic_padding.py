"""Batches cut to their longest member: a fine-tuning task's features are padded to max_seq_length, most of it
padding on real text, and every padded position costs the model as much as a real one.

A batch's sequence features (the task names them: `FinetuningTask.sequence_features`) lose the trailing columns
that no example of the batch uses, down to `bucket_length` of its longest example: the next power of two, at least
MIN_LENGTH, at most max_seq_length, so that a run traces (and XLA compiles) a handful of shapes. The columns cut are
padding (input_mask 0) in every example, which the model masks at -10000, so each example's outputs are those of
the padded batch to float rounding. `pad_to_max_seq_length` (and a TPU, which needs fixed shapes) keeps the full
length. A task whose outputs run along the sequence names them with their padding values
(`FinetuningTask.sequence_outputs`): they come back at max_seq_length, so batches of different lengths line up.
`group_by_length` (training, on request) draws each batch from examples of similar length, so that less is padded;
evaluation and prediction do so always (`sort_by_length`), and put their outputs back in the examples' order.

Example:
>>> batch = {"input_word_ids": tf.constant([[2, 7, 3, 0, 0, 0]]), "input_mask": tf.constant([[1, 1, 1, 0, 0, 0]]),
...          "input_type_ids": tf.zeros([1, 6], tf.int32), "label_ids": tf.constant([1])}
>>> cut = trim_to_longest(batch, ("input_word_ids", "input_mask", "input_type_ids"), min_length=4)
>>> cut["input_word_ids"].numpy().tolist(), cut["label_ids"].numpy().tolist()
([[2, 7, 3, 0]], [1])
"""

import functools
from typing import Callable, Dict, Sequence, Tuple

import tensorflow as tf

# Shorter batches are not cut further: below this the step's cost is mostly not the sequence's.
MIN_LENGTH = 16
# group_by_length sorts windows of this many batches, as Hugging Face's LengthGroupedSampler (its megabatches).
GROUP_WINDOW_BATCHES = 50


def bucket_length(longest: tf.Tensor, max_length: tf.Tensor, min_length: int = MIN_LENGTH) -> tf.Tensor:
    """The smallest power of two >= `longest` and >= `min_length`, at most `max_length` (int32 scalars).

    Example:
    >>> [int(bucket_length(tf.constant(n), tf.constant(128))) for n in (1, 16, 17, 65, 128)]
    [16, 16, 32, 128, 128]
    """
    longest = tf.maximum(tf.cast(longest, tf.int32), min_length)
    power = tf.cast(tf.math.ceil(tf.math.log(tf.cast(longest, tf.float32)) / tf.math.log(2.0) - 1e-6), tf.int32)
    return tf.minimum(tf.bitwise.left_shift(1, power), tf.cast(max_length, tf.int32))


def features_to_trim(task, options) -> tuple:
    """The features of `task` (a FinetuningTask) that a run of `options` (FinetuningOptions) cuts to each batch's
    longest: none with `pad_to_max_seq_length` or on a TPU.

    Example:
    >>> from types import SimpleNamespace
    >>> from albert_tf.tasks.finetuning_options import FinetuningOptions
    >>> task = SimpleNamespace(sequence_features=["input_word_ids", "input_mask"])
    >>> features_to_trim(task, FinetuningOptions("/tmp/run")), features_to_trim(task, FinetuningOptions("/tmp/run",
    ...                                                                                 strategy="tpu"))
    (('input_word_ids', 'input_mask'), ())
    """
    if options.pad_to_max_seq_length or options.strategy == "tpu":
        return ()
    return tuple(task.sequence_features)


def trim_to_longest(batch: Dict[str, tf.Tensor], sequence_features: Sequence[str],
                    min_length: int = MIN_LENGTH) -> Dict[str, tf.Tensor]:
    """`batch` with its `sequence_features` (sequence on the last axis, `input_mask` among them) cut to the
    bucket of its longest example; the other features as they are."""
    mask = batch["input_mask"]
    used = tf.reduce_sum(tf.cast(tf.reduce_any(tf.reshape(mask, [-1, tf.shape(mask)[-1]]) > 0, axis=0), tf.int32))
    length = bucket_length(used, tf.shape(mask)[-1], min_length)
    return {name: value[..., :length] if name in sequence_features else value for name, value in batch.items()}


def example_lengths(input_mask: tf.Tensor) -> tf.Tensor:
    """[batch] int32: the positions each example uses (input_mask > 0), the longest choice's for a multiple-choice
    `input_mask` ([batch, choices, sequence])."""
    used = tf.reduce_sum(tf.cast(input_mask > 0, tf.int32), axis=-1)
    return tf.reduce_max(tf.reshape(used, [tf.shape(used)[0], -1]), axis=-1)


def sort_by_length(examples: tf.data.Dataset, window_size: int) -> tf.data.Dataset:
    """Unbatched `examples` (with an `input_mask`) with each window of `window_size` examples sorted by length,
    longest first (stable): the same examples, in an order whose batches hold examples of similar length.

    Example:
    >>> masks = [[1] * n + [0] * (8 - n) for n in (1, 7, 2, 8, 3)]
    >>> data = sort_by_length(tf.data.Dataset.from_tensor_slices({"input_mask": masks}), 3)
    >>> [int(example_lengths(example["input_mask"][None])[0]) for example in data]
    [7, 2, 1, 8, 3]
    """

    def sorted_window(window):
        order = tf.argsort(example_lengths(window["input_mask"]), direction="DESCENDING", stable=True)
        return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda value: tf.gather(value, order),
                                                                        window))

    return examples.batch(window_size).flat_map(sorted_window)


def group_by_length(examples: tf.data.Dataset, batch_size: int,
                    window_batches: int = GROUP_WINDOW_BATCHES) -> tf.data.Dataset:
    """Batches of `batch_size` from unbatched `examples` (with an `input_mask`), each window of `window_batches`
    batches sorted by length, longest first, as Hugging Face's `group_by_length`: the examples of a window are the
    same, but in batches of similar length, which dynamic padding then cuts to less. Shuffle `examples` before;
    the last incomplete batch is dropped.

    Example:
    >>> masks = [[1] * n + [0] * (8 - n) for n in (1, 7, 2, 8, 3, 6)]
    >>> data = tf.data.Dataset.from_tensor_slices({"input_mask": masks})
    >>> [example_lengths(batch["input_mask"]).numpy().tolist() for batch in group_by_length(data, 2, 3)]
    [[8, 7], [6, 3], [2, 1]]
    """
    return sort_by_length(examples, batch_size * window_batches).batch(batch_size, drop_remainder=True)


def prediction_function(task, sequence_features: Sequence[str]) -> Callable:
    """`task.predict_fn`, or where batches are cut (`sequence_features`) and the task has outputs along the
    sequence, the same function with those outputs padded back to the task's length with their padding values."""
    if not sequence_features or not task.sequence_outputs:
        return task.predict_fn
    length = task.input_signature["input_word_ids"].shape[-1]
    return _padded_back(task.predict_fn, tuple(sorted(task.sequence_outputs.items())), length)


@functools.lru_cache(maxsize=None)
def _padded_back(predict_fn: Callable, pad_values: Tuple[Tuple[str, object], ...], length: int) -> Callable:
    # One function per task and length, so that the Trainer traces it once, not at every evaluation.
    values = dict(pad_values)

    def predict(model, batch):
        outputs = predict_fn(model, batch)
        return {name: _pad_axis_1(value, length, values[name]) if name in values else value
                for name, value in outputs.items()}

    return predict


def _pad_axis_1(value: tf.Tensor, length: int, pad_value) -> tf.Tensor:
    paddings = [[0, 0], [0, length - tf.shape(value)[1]]] + [[0, 0]] * (len(value.shape) - 2)
    return tf.pad(value, paddings, constant_values=tf.cast(pad_value, value.dtype))
