"""What a fine-tuning task hands the shared driver (albert_tf/tasks/finetuning.py): its `FinetuningTask`, the
`DataSplit`s it reads, and the conventions of the batches its datasets yield.

The batches hold the model's inputs under their model names, `label_ids` (LABEL_IDS) for labels and
`example_index` (EXAMPLE_INDEX: int32, the position in the split) so that predictions are put back in order
whatever the distribution strategy.
"""

import collections
import dataclasses
from typing import Callable, Dict, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig

EXAMPLE_INDEX = "example_index"
LABEL_IDS = "label_ids"

Outputs = Dict[str, np.ndarray]


@dataclasses.dataclass
class DataSplit:
    """A split of a task: `dataset()` returns its examples as an unbatched, finite tf.data.Dataset.

    For training data, `num_examples` is the count that sets the steps of `num_train_epochs` (the
    original counts examples, not SQuAD's features); for evaluation and prediction data it must be the
    number of dataset elements, and predictions are checked against it. Metrics of an evaluation split get
    `metric_suffix` appended (MNLI's mismatched dev set: "_mismatched"), and its eval_predictions file too.
    `label_counts` ({label: examples}) of a classification task's training split go into the message that starts
    training.

    Example:
    >>> split = DataSplit("dev", lambda: tf.data.Dataset.range(3).map(lambda i: {"example_index": i}), 3)
    >>> [int(row["example_index"]) for row in split.dataset()]
    [0, 1, 2]
    """

    name: str
    dataset: Callable[[], tf.data.Dataset]
    num_examples: int
    metric_suffix: str = ""
    label_counts: Mapping[str, int] = dataclasses.field(default_factory=dict)


def count_labels(labels) -> Dict[str, int]:
    """{label: examples} of a split's labels, each a string, a tuple of strings (multi-label: one count per
    label) or None (unlabelled); for the message that starts training.

    Example:
    >>> count_labels(["sport", "weather", "sport", None])
    {'sport': 2, 'weather': 1}
    >>> count_labels([("rain", "wind"), ("rain",)])
    {'rain': 2, 'wind': 1}
    """
    counts = collections.Counter()
    for label in labels:
        if isinstance(label, str):
            counts[label] += 1
        elif isinstance(label, (tuple, list)):
            counts.update(label)
    return dict(sorted(counts.items()))


@dataclasses.dataclass(frozen=True)
class RawTextExport:
    """How a classification task's model is exported behind its preprocessor (`with_preprocessing`): it takes
    `num_text_inputs` strings (1: text_a; 2: text_a and text_b) and, with `multi_label`, returns a sigmoid
    per label rather than a softmax.

    Example:
    >>> RawTextExport(num_text_inputs=2).multi_label
    False
    """

    num_text_inputs: int
    multi_label: bool = False


@dataclasses.dataclass
class FinetuningTask:
    """What differs between fine-tuning tasks; everything else is `run_finetuning`'s.

    - `build_model(config, dropout_rate, recompute_blocks) -> keras.Model`, called under the strategy's
      scope; `recompute_blocks` is the encoder's option (re-run blocks in the backward pass).
    - `input_signature`: {name: tf.TensorSpec with batch axis None} of the model's inputs; it builds the
      model and is the exported serving signature.
    - `loss_fn(model, batch) -> (loss, {name: metric})` and `predict_fn(model, batch) -> {name: tensor}`:
      the Trainer's callbacks. Include `example_index` in the predictions to keep examples in order, and
      `per_example_loss` to get the evaluation `loss`.
    - `compute_metrics(split, outputs) -> {name: float}` from the numpy predictions of an eval split.
    - `best_metric`: the metric (higher is better) that picks the best checkpoint, on the first eval split.
    - `original_metric_names`: {the original script's name: ours} of metrics that eval_results.txt also
      lists under the original's name (e.g. `eval_accuracy` for `accuracy`), for readers of the original's file.
    - `write_eval_predictions(path, split, outputs)` and `write_predictions(output_dir, split, outputs)`:
      write what the benchmark reads; the first gets the file path (eval_predictions<suffix>.<extension>,
      `eval_predictions_extension` "tsv" unless the task's format has another), the second the directory.
    - `serving_fn(model, inputs) -> {name: tensor}`: the exported signature's outputs.
    - `raw_text_export`: for a classifier of text, what an export with its preprocessor takes and returns.
    - `sequence_features`: the batch's features with the sequence on their last axis, which batches cut to their
      longest member (albert_tf/tasks/dynamic_padding.py); empty: every batch keeps max_seq_length.
    - `sequence_outputs`: {name: padding value} of predict_fn's outputs that run along the sequence (axis 1); a
      cut batch's come back at max_seq_length, padded with that value.
    """

    name: str
    build_model: Callable[[AlbertConfig, float, bool], keras.Model]
    input_signature: Dict[str, tf.TensorSpec]
    loss_fn: Callable
    predict_fn: Callable
    compute_metrics: Callable[[DataSplit, Outputs], Dict[str, float]]
    best_metric: str
    train_data: Optional[DataSplit] = None
    eval_splits: Sequence[DataSplit] = ()
    predict_splits: Sequence[DataSplit] = ()
    write_eval_predictions: Optional[Callable[[str, DataSplit, Outputs], None]] = None
    write_predictions: Optional[Callable[[str, DataSplit, Outputs], None]] = None
    serving_fn: Optional[Callable] = None
    original_metric_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    eval_predictions_extension: str = "tsv"
    raw_text_export: Optional[RawTextExport] = None
    sequence_features: Sequence[str] = ()
    sequence_outputs: Mapping[str, object] = dataclasses.field(default_factory=dict)

