"""Fine-tuning on any single-sentence classification data: `run_sentence_classification`.

`data_dir` holds train.tsv and dev.tsv, each a `sentence<TAB>label` header and one row per example
(data_gen.sentence_classification; the reproduction's held-out document classification is one such directory).
The classes are the training file's labels in order of first appearance; the model is the GLUE classifier
(AlbertClassifier on the pooled [CLS] output) trained with the shared driver (finetuning.py), which resumes
from output_dir's last checkpoint. It writes eval_results.{txt,json}, labels.txt and eval_predictions.tsv.

Usage (it fine-tunes a model, so it is not run here):

    from albert_tf.tasks.finetuning import FinetuningOptions
    from albert_tf.tasks.sentence_classification import SentenceClassificationOptions, run_sentence_classification

    results = run_sentence_classification(SentenceClassificationOptions(
        data_dir="documents", finetuning=FinetuningOptions(output_dir="out/documents", init_checkpoint="model_dir",
                                                          spm_model_file="spm.model", do_train=True, do_eval=True)))
    results["eval"]  # {'accuracy': ..., 'loss': ..., 'global_step': 1000}
"""

import dataclasses
import os
from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tasks import finetuning
from albert_tf.tasks.finetuning import FinetuningOptions
from albert_tf.training import metrics
from data_gen import sentence_classification as data

LABELS_NAME = "labels.txt"


@dataclasses.dataclass
class SentenceClassificationOptions:
    """A run: the data directory (train.tsv, dev.tsv) and the fine-tuning options.

    Example:
    >>> options = SentenceClassificationOptions(FinetuningOptions("/tmp/documents"), data_dir="documents")
    >>> options.task_name
    'sentence_classification'
    """

    finetuning: FinetuningOptions
    data_dir: str
    task_name: str = "sentence_classification"


def training_labels(options: SentenceClassificationOptions) -> List[str]:
    """The classes: train.tsv's labels in order of first appearance."""
    return data.labels_of(data.read_examples(os.path.join(options.data_dir, data.SPLIT_FILES["train"])))


def build_task(options: SentenceClassificationOptions, tokenizer, labels: Sequence[str]) -> finetuning.FinetuningTask:
    """The FinetuningTask of a run over `labels`, its splits' features cached under the run's cached_dir."""
    finetuning_options = options.finetuning
    if finetuning_options.do_predict:
        raise ValueError(f"Sentence classification of {options.data_dir} has no test split to predict; leave out "
                         "do_predict.")
    cached_dir = finetuning.resolve_cached_dir(finetuning_options)

    def load(split):
        path = os.path.join(options.data_dir, data.SPLIT_FILES[split])
        examples, features = data.load_split(path, labels, tokenizer, finetuning_options.max_seq_length, cached_dir,
                                             f"{options.task_name}_{split}")
        return examples, finetuning.DataSplit(split, features.dataset, features.num_examples)

    train = load("train")[1] if finetuning_options.do_train else None
    dev_examples, dev = load("dev") if finetuning_options.do_eval else (None, None)

    def task_metrics(split, outputs):
        return {"accuracy": metrics.accuracy(np.argmax(outputs["logits"], axis=-1), outputs["label_ids"])}

    def task_eval_predictions(path, split, outputs):
        predictions = np.argmax(outputs["logits"], axis=-1)
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write("index\tprediction\tlabel\n" + "".join(
                f"{example.guid}\t{labels[int(prediction)]}\t{example.label}\n"
                for example, prediction in zip(dev_examples, predictions)))

    sequence = tf.TensorSpec([None, finetuning_options.max_seq_length], tf.int32)
    return finetuning.FinetuningTask(
        name=options.task_name,
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertClassifier(
            config, len(labels), dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=finetuning.classification_loss_fn, predict_fn=finetuning.classification_predict_fn,
        serving_fn=finetuning.classification_serving_fn, compute_metrics=task_metrics, best_metric="accuracy",
        original_metric_names={"eval_accuracy": "accuracy", "eval_loss": "loss"}, train_data=train,
        eval_splits=[dev] if dev else [], write_eval_predictions=task_eval_predictions)


def run_sentence_classification(options: SentenceClassificationOptions) -> Dict[str, object]:
    """Fine-tunes and evaluates as `options.finetuning` asks; returns `run_finetuning`'s results. Rerunning resumes
    from output_dir's last checkpoint."""
    labels = training_labels(options)
    task = build_task(options, finetuning.resolve_tokenizer(options.finetuning), labels)
    tf.io.gfile.makedirs(options.finetuning.output_dir)
    with tf.io.gfile.GFile(os.path.join(options.finetuning.output_dir, LABELS_NAME), "w") as handle:
        handle.write("".join(label + "\n" for label in labels))
    return finetuning.run_finetuning(task, options.finetuning)
