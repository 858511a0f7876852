"""Fine-tuning on your own labelled text: single-label, multi-label or regression, and `run_text_classification`.

The original ALBERT fine-tunes only on its benchmarks; this task runs the same driver (finetuning.py) and the same
head as GLUE (AlbertClassifier: pooled output, dropout, `output_weights`) on TSV, CSV or JSON-lines files that
data_gen.readers.labeled_text reads: `train_file`, `eval_file` and `predict_file` (texts only; a label column there is
ignored), the texts and labels in the fields the options name.

- Single-label: softmax cross-entropy, the prediction is the most probable label; metrics `accuracy` (which picks
  the best checkpoint), `macro_f1` and `micro_f1`.
- Multi-label (`multi_label`): one sigmoid per label, binary cross-entropy averaged over the labels and the examples;
  an example has every label whose probability is >= `multi_label_threshold` (0.5); metrics `micro_f1` (the best
  checkpoint's), `macro_f1`, `exact_match` (every label of the example right) and `f1_<label>` for each label.
- Regression (`regression`): one output and mean squared error, as STS-B; metrics `pearson` (the best checkpoint's)
  and `spearman`.
Every evaluation also reports `loss`, the mean per-example loss.

The labels are `labels` when given, else those of output_dir/labels.txt (written by every classification run, so
an evaluation-only rerun and a resumed run keep the head's order), else the sorted labels of the training file.

Outputs are run_glue's: eval_results.{txt,json} (the .txt also under the original run_classifier's names,
eval_accuracy / eval_loss, MSE for regression), eval_predictions.tsv (`index`, `prediction`, `label`; a
multi-label set as a JSON list), best/, and with do_predict predictions.tsv (`index`, `prediction`) and, as the
original, test_results.tsv (each example's label probabilities in labels.txt's order, sigmoid ones for
multi-label, or its score; no header). `index` is the example's position in its file. The serving export outputs
`logits` and `probabilities` (sigmoid for multi-label), or `predictions` for regression.

Example:
>>> import os, tempfile
>>> data = tempfile.mkdtemp()
>>> with open(os.path.join(data, "train.jsonl"), "w") as handle:
...     _ = handle.write('{"review": "Loved it", "stars": "good"}\\n{"review": "Dull", "stars": "bad"}\\n')
>>> options = TextClassificationOptions(FinetuningOptions(os.path.join(data, "run"), do_train=True),
...                                     text_field="review", label_field="stars",
...                                     train_file=os.path.join(data, "train.jsonl"))
>>> resolve_labels(options, read_split_examples(options))
('bad', 'good')

The full run needs a tokenizer and a model: `run_text_classification(options)` (see run_scripts/run_classifier.py).
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks import multi_seed
from albert_tf.tasks.classification_functions import (classification_loss_fn, classification_predict_fn,
                                                      classification_serving_fn, model_inputs, regression_loss_fn,
                                                      regression_predict_fn, regression_serving_fn)
from albert_tf.tasks.finetuning_options import FinetuningOptions, check_finetuning_options, resolve_cached_dir
from albert_tf.tasks.finetuning_task import (EXAMPLE_INDEX, LABEL_IDS, DataSplit, FinetuningTask, RawTextExport,
                                            count_labels)
from albert_tf.tasks.model_source import resolve_model_source
from albert_tf.training import metrics
from data_gen.readers import labeled_text
from data_gen.readers.labeled_text import (MULTI_LABEL, REGRESSION, SINGLE_LABEL, LabeledExample, LabeledTextError,
                                           LabeledTextSchema)

LABELS_FILE = "labels.txt"
BEST_METRICS = {SINGLE_LABEL: "accuracy", MULTI_LABEL: "micro_f1", REGRESSION: "pearson"}
ORIGINAL_METRIC_NAMES = {SINGLE_LABEL: {"eval_accuracy": "accuracy", "eval_loss": "loss"},
                         MULTI_LABEL: {"eval_loss": "loss"},
                         # The per-example loss is the squared error, as in run_glue's STS-B.
                         REGRESSION: {"MSE": "loss", "eval_loss": "loss"}}
_SPLITS = (("train", "train_file", "do_train"), ("eval", "eval_file", "do_eval"),
           ("predict", "predict_file", "do_predict"))


@dataclasses.dataclass
class TextClassificationOptions:
    """A run on your own files: where they are, which fields hold the texts and labels, and the kind of label.

    Example:
    >>> options = TextClassificationOptions(FinetuningOptions("/tmp/topics"), text_field="text",
    ...                                     label_field="topics", multi_label=True, label_separator="|")
    >>> options.schema().label_kind, options.multi_label_threshold
    ('multi_label', 0.5)
    """

    finetuning: FinetuningOptions
    text_field: str
    label_field: Optional[str] = None
    text_b_field: Optional[str] = None
    train_file: Optional[str] = None
    eval_file: Optional[str] = None
    predict_file: Optional[str] = None
    file_format: Optional[str] = None
    labels: Optional[Sequence[str]] = None
    multi_label: bool = False
    label_separator: Optional[str] = None
    multi_label_threshold: float = 0.5
    regression: bool = False

    def schema(self) -> LabeledTextSchema:
        if self.multi_label and self.regression:
            raise LabeledTextError("Give --multi_label or --regression, not both.")
        kind = MULTI_LABEL if self.multi_label else REGRESSION if self.regression else SINGLE_LABEL
        if self.label_separator and kind != MULTI_LABEL:
            raise LabeledTextError(f"--label_separator={self.label_separator!r} splits multi-label fields; it needs "
                                   f"--multi_label.")
        return LabeledTextSchema(text_field=self.text_field, label_field=self.label_field,
                                 text_b_field=self.text_b_field, file_format=self.file_format, label_kind=kind,
                                 label_separator=self.label_separator)


# ---- multi-label loss and predictions --------------------------------------------------------------

def _sigmoid_cross_entropy(logits, labels):
    """Per-example binary cross-entropy, averaged over the labels."""
    losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, tf.float32),
                                                     logits=tf.cast(logits, tf.float32))
    return tf.reduce_mean(losses, axis=-1)


def multi_label_loss_fn(model, batch):
    """Mean binary cross-entropy of the sigmoid of each label's logit against the 0/1 `label_ids`."""
    logits = model(model_inputs(batch), training=True)
    return tf.reduce_mean(_sigmoid_cross_entropy(logits, batch[LABEL_IDS])), {}


def multi_label_predict_fn(model, batch):
    logits = tf.cast(model(model_inputs(batch), training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.sigmoid(logits), LABEL_IDS: batch[LABEL_IDS],
            EXAMPLE_INDEX: batch[EXAMPLE_INDEX], "per_example_loss": _sigmoid_cross_entropy(logits, batch[LABEL_IDS])}


def multi_label_serving_fn(model, inputs):
    logits = tf.cast(model(inputs, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.sigmoid(logits)}


# ---- predictions and metrics -------------------------------------------------------------------------

def predictions_from_outputs(schema: LabeledTextSchema, outputs: Dict[str, np.ndarray], threshold: float):
    """Class ids (argmax), 0/1 label indicators (probability >= threshold), or the regression scores."""
    if schema.label_kind == REGRESSION:
        return np.asarray(outputs["predictions"], dtype=np.float64)
    if schema.label_kind == MULTI_LABEL:
        return (outputs["probabilities"] >= threshold).astype(np.int64)
    return np.argmax(outputs["logits"], axis=-1)


def compute_metrics(schema: LabeledTextSchema, predictions, label_ids, labels: Sequence[str]) -> Dict[str, float]:
    """The metrics of the label kind (see the module's docstring) of predictions against the `label_ids` features.

    Example:
    >>> compute_metrics(LabeledTextSchema("text", "topics", label_kind=MULTI_LABEL), np.array([[1, 0], [1, 1]]),
    ...                 np.array([[1.0, 0.0], [0.0, 1.0]]), ("rain", "sun"))
    {'micro_f1': 0.8, 'macro_f1': 0.833..., 'exact_match': 0.5, 'f1_rain': 0.666..., 'f1_sun': 1.0}
    """
    if schema.label_kind == REGRESSION:
        return {"pearson": metrics.pearson_correlation(predictions, label_ids),
                "spearman": metrics.spearman_correlation(predictions, label_ids)}
    if schema.label_kind == MULTI_LABEL:
        true = np.asarray(label_ids).astype(np.int64)
        results = {"micro_f1": metrics.multilabel_micro_f1(predictions, true),
                   "macro_f1": metrics.multilabel_macro_f1(predictions, true),
                   "exact_match": metrics.exact_match_ratio(predictions, true)}
        results.update({f"f1_{label}": float(score)
                        for label, score in zip(labels, metrics.multilabel_f1_scores(predictions, true))})
        return results
    return {"accuracy": metrics.accuracy(predictions, label_ids), "macro_f1": metrics.macro_f1(predictions, label_ids),
            "micro_f1": metrics.micro_f1(predictions, label_ids)}


def prediction_strings(schema: LabeledTextSchema, predictions, labels: Sequence[str]) -> List[str]:
    """Each prediction as written: the label, a JSON list of labels (multi-label), or the score."""
    if schema.label_kind == REGRESSION:
        return [str(float(value)) for value in predictions]
    if schema.label_kind == MULTI_LABEL:
        return [json.dumps([label for label, chosen in zip(labels, row) if chosen]) for row in predictions]
    return [labels[int(value)] for value in predictions]


def label_string(schema: LabeledTextSchema, example: LabeledExample) -> str:
    if schema.label_kind == MULTI_LABEL:
        return json.dumps(list(example.label))
    return str(example.label)


def _write_tsv(path, header, rows):
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("\t".join(header) + "\n")
        handle.write("".join("\t".join(row) + "\n" for row in rows))


def write_eval_predictions(path: str, schema: LabeledTextSchema, examples: Sequence[LabeledExample], predictions,
                           labels: Sequence[str]) -> None:
    """`index\\tprediction\\tlabel` rows with a header, so any metric can be recomputed."""
    _write_tsv(path, ("index", "prediction", "label"),
               zip(map(str, range(len(examples))), prediction_strings(schema, predictions, labels),
                   [label_string(schema, example) for example in examples]))


def write_predictions(output_dir: str, schema: LabeledTextSchema, outputs, threshold: float,
                      labels: Sequence[str]) -> None:
    """predictions.tsv (`index\\tprediction` with a header) and test_results.tsv (probabilities or scores)."""
    predictions = predictions_from_outputs(schema, outputs, threshold)
    _write_tsv(os.path.join(output_dir, "predictions.tsv"), ("index", "prediction"),
               zip(map(str, range(len(predictions))), prediction_strings(schema, predictions, labels)))
    rows = outputs["predictions"][:, None] if schema.label_kind == REGRESSION else outputs["probabilities"]
    with tf.io.gfile.GFile(os.path.join(output_dir, "test_results.tsv"), "w") as handle:
        handle.write("".join("\t".join(str(value) for value in row) + "\n" for row in rows))


# ---- labels ------------------------------------------------------------------------------------------

def read_split_examples(options: TextClassificationOptions) -> Dict[str, List[LabeledExample]]:
    """The examples of every split the options ask for (predict: texts only), by split name."""
    schema = options.schema()
    examples = {}
    for split, file_option, do_option in _SPLITS:
        if not getattr(options.finetuning, do_option):
            continue
        path = getattr(options, file_option)
        if not path:
            raise LabeledTextError(f"--{do_option} needs --{file_option}.")
        examples[split] = labeled_text.read_examples(path, schema, with_labels=split != "predict")
        if not examples[split] and split != "predict":
            raise LabeledTextError(f"The {file_option.replace('_', ' ')} {path} holds no examples; --{do_option} "
                                   f"needs at least one.")
    return examples


def _checked_label_list(labels, origin):
    labels = tuple(labels)
    if any(not isinstance(label, str) or not label.strip() for label in labels):
        raise LabeledTextError(f"The labels of {origin} include an empty one: {list(labels)}.")
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise LabeledTextError(f"The labels of {origin} name {duplicates} more than once: {list(labels)}.")
    return labels


def read_labels_file(path: str) -> tuple:
    """The labels a run saved in `path` (its LABELS_FILE), one a line, in the model's output order; an empty or
    repeated one is refused in one sentence naming the file."""
    with tf.io.gfile.GFile(path, "r") as handle:
        return _checked_label_list([line.strip() for line in handle if line.strip()], path)


def resolve_labels(options: TextClassificationOptions, examples: Dict[str, List[LabeledExample]]) -> tuple:
    """The model's labels: `labels`, else output_dir/labels.txt, else the training file's sorted; written back to
    output_dir/labels.txt. Regression has none."""
    schema = options.schema()
    path = os.path.join(options.finetuning.output_dir, LABELS_FILE)
    if schema.label_kind == REGRESSION:
        if options.labels:
            raise LabeledTextError(f"--labels={','.join(options.labels)} names classes, but --regression predicts a "
                                   f"number.")
        return ()
    saved = read_labels_file(path) if tf.io.gfile.exists(path) else None
    if options.labels:
        labels = _checked_label_list(options.labels, "--labels")
        if saved is not None and saved != labels:
            raise LabeledTextError(f"--labels={','.join(labels)} differ from {path} ({','.join(saved)}), the labels of "
                                   f"the model in --output_dir; give the same labels in the same order, or another "
                                   f"--output_dir.")
    elif saved is not None:
        labels = saved
        logging.info("Using the %d labels of %s.", len(labels), path)
    elif "train" in examples:
        labels = labeled_text.collect_labels(examples["train"], schema)
        logging.info("The %d labels of %s: %s", len(labels), options.train_file, list(labels))
    else:
        raise LabeledTextError(f"No labels for the model: give --labels, train with --do_train (the labels of "
                               f"--train_file), or use the --output_dir of a run that wrote {LABELS_FILE}.")
    if schema.label_kind == SINGLE_LABEL and len(labels) < 2:
        raise LabeledTextError(f"A classifier needs at least two labels, got {list(labels)}; for one yes/no label "
                               f"use --multi_label.")
    if not labels:
        raise LabeledTextError(f"No labels for the model: {options.train_file} gives no example a label.")
    tf.io.gfile.makedirs(options.finetuning.output_dir)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("".join(f"{label}\n" for label in labels))
    return labels


def _label_origin(options):
    """Where resolve_labels will take the labels from, for the error about a label outside them."""
    path = os.path.join(options.finetuning.output_dir, LABELS_FILE)
    if options.labels:
        return "--labels"
    if tf.io.gfile.exists(path):
        return path
    return f"collected from --train_file {options.train_file}; give --labels to name others"


# ---- the task ------------------------------------------------------------------------------------

def build_task(options: TextClassificationOptions, tokenizer) -> FinetuningTask:
    """The FinetuningTask of a run on your own files, its splits loaded (and their features cached)."""
    finetuning_options = options.finetuning
    if not 0.0 < options.multi_label_threshold < 1.0:
        raise LabeledTextError(f"--multi_label_threshold must be between 0 and 1, got "
                               f"{options.multi_label_threshold}.")
    schema = options.schema()
    examples = read_split_examples(options)
    origin = _label_origin(options)
    labels = resolve_labels(options, examples)
    kind = schema.label_kind
    threshold = options.multi_label_threshold

    def load(split, file_option):
        path = getattr(options, file_option)
        _, features = labeled_text.load_split(
            path, split, schema, labels, tokenizer, finetuning_options.max_seq_length,
            resolve_cached_dir(finetuning_options), examples=examples[split],
            with_labels=split != "predict", label_origin=origin)
        return DataSplit(split, features.dataset, features.num_examples,
                         label_counts=count_labels(example.label for example in examples[split]))

    splits = {split: load(split, file_option) for split, file_option, _ in _SPLITS if split in examples}

    def task_metrics(split, outputs):
        return compute_metrics(schema, predictions_from_outputs(schema, outputs, threshold), outputs[LABEL_IDS],
                               labels)

    def task_eval_predictions(path, split, outputs):
        write_eval_predictions(path, schema, examples[split.name], predictions_from_outputs(schema, outputs, threshold),
                               labels)

    def task_predictions(output_dir, split, outputs):
        write_predictions(output_dir, schema, outputs, threshold, labels)

    functions = {SINGLE_LABEL: (classification_loss_fn, classification_predict_fn, classification_serving_fn),
                 MULTI_LABEL: (multi_label_loss_fn, multi_label_predict_fn, multi_label_serving_fn),
                 REGRESSION: (regression_loss_fn, regression_predict_fn, regression_serving_fn)}
    loss_fn, predict_fn, serving_fn = functions[kind]
    num_outputs = 1 if kind == REGRESSION else len(labels)
    sequence = tf.TensorSpec([None, finetuning_options.max_seq_length], tf.int32)
    return FinetuningTask(
        name=f"text_classification ({kind})",
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertClassifier(
            config, num_outputs, dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=loss_fn, predict_fn=predict_fn, serving_fn=serving_fn, compute_metrics=task_metrics,
        best_metric=BEST_METRICS[kind], original_metric_names=ORIGINAL_METRIC_NAMES[kind],
        train_data=splits.get("train"), eval_splits=[splits["eval"]] if "eval" in splits else [],
        predict_splits=[splits["predict"]] if "predict" in splits else [],
        write_eval_predictions=task_eval_predictions, write_predictions=task_predictions,
        raw_text_export=RawTextExport(2 if options.text_b_field else 1, multi_label=kind == MULTI_LABEL),
        sequence_features=INPUT_NAMES)


def run_text_classification(options: TextClassificationOptions) -> Dict[str, object]:
    """Fine-tunes, evaluates and predicts on your own files as `options` ask; returns `run_finetuning`'s results
    (with `num_trials` > 1, `multi_seed.run_trials`').

    A run stopped by SIGTERM raises checkpointing.TrainingPreempted once its checkpoint is saved; running it
    again resumes. See the module's docstring for the options.
    """
    check_finetuning_options(options.finetuning, exports_raw_text=True)
    source = resolve_model_source(options.finetuning)
    return multi_seed.run_trials(build_task(options, source.tokenizer), options.finetuning, source)
