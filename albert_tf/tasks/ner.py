"""Named-entity recognition (CoNLL-2003 token classification): entity F1, CoNLL prediction files, and `run_ner`.

The original ALBERT has no NER script; this one fine-tunes AlbertTokenClassifier with the shared driver
(finetuning.py) on the CoNLL files data_gen.readers.conll reads (train.txt, dev.txt or valid.txt, test.txt), or on
tensorflow-datasets' conll2003 prepared locally (`tfds_name`), with the label-alignment rule described there:
each word's label on its first piece, other positions ignored.

The metrics are conlleval's (data_gen.evaluation.conll_evaluation), on the words of the dev split: entity-level
`precision`, `recall` and `f1` (the best checkpoint's metric), token `accuracy`, and `loss` (the mean over
windows of each window's mean token cross-entropy). It writes eval_results.{txt,json},
eval_predictions.txt (best/ too) and, with do_predict, test_predictions.txt and the test scores in
predict_results.{txt,json}. The prediction files are in CoNLL format, which conlleval reads: one line per
word with the word, its gold tag and the predicted tag last, both in the data's tag scheme, and a blank line
after each sentence. labels.txt in output_dir lists the model's labels (`O`, then `B-X`, `I-X` per entity
type): a run that finds it uses it, else the labels are those of the splits it loads.

Usage (it needs the CoNLL-2003 data and a pretrained model, so it is not run here):

    from albert_tf.tasks.finetuning_options import FinetuningOptions
    from albert_tf.tasks.ner import NerOptions, run_ner

    results = run_ner(NerOptions(
        FinetuningOptions(output_dir="out/conll", init_checkpoint="albert_base", max_seq_length=128,
                          learning_rate=3e-5, train_step=None, num_train_epochs=3.0, warmup_proportion=0.1,
                          do_train=True, do_eval=True, do_predict=True),
        data_dir="conll2003", tag_scheme="iob1"))
    results["eval"]  # {'f1': ..., 'precision': ..., 'recall': ..., 'accuracy': ..., 'loss': ..., ...}
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.tasks import multi_seed
from albert_tf.tasks.classification_functions import model_inputs, softmax_cross_entropy
from albert_tf.tasks.finetuning_options import FinetuningOptions, check_finetuning_options, resolve_cached_dir
from albert_tf.tasks.finetuning_task import EXAMPLE_INDEX, LABEL_IDS, DataSplit, FinetuningTask
from albert_tf.tasks.model_source import resolve_model_source
from albert_tf.training.metric_names import returns_metrics
from data_gen.evaluation.conll_evaluation import entity_scores
from data_gen.readers import conll as conll_data
from data_gen.readers.conll import IGNORED_LABEL, ConllSentence
from data_gen.readers.tag_schemes import OUTSIDE, chunks, tags_in_scheme

LABELS_FILE = "labels.txt"
_SPLIT_FLAGS = {"train": "do_train", "dev": "do_eval", "test": "do_predict"}


@dataclasses.dataclass
class NerOptions:
    """A CoNLL NER run: the data (the `data_dir` of CoNLL files, or `tfds_name` conll2003 prepared locally under
    `tfds_data_dir` or tensorflow-datasets' default), its tag scheme (iob1, iob2 or bioes) and the fine-tuning
    options.

    Example:
    >>> NerOptions(FinetuningOptions("/tmp/ner"), data_dir="conll2003").tag_scheme
    'iob1'
    """

    finetuning: FinetuningOptions
    data_dir: Optional[str] = None
    tag_scheme: str = "iob1"
    tfds_name: Optional[str] = None
    tfds_data_dir: Optional[str] = None


# ---- loss and predictions ------------------------------------------------------------------------

def _token_losses(logits, labels):
    """Per-position cross-entropy and the float mask of the labelled positions."""
    labelled = tf.not_equal(labels, IGNORED_LABEL)
    losses = softmax_cross_entropy(logits, tf.where(labelled, labels, tf.zeros_like(labels)))
    weights = tf.cast(labelled, tf.float32)
    return losses * weights, weights


@returns_metrics("accuracy")
def token_classification_loss_fn(model, batch):
    """Mean cross-entropy over the labelled positions (first pieces of words) of the batch."""
    logits = model(model_inputs(batch), training=True)
    labels = tf.cast(batch[LABEL_IDS], tf.int32)
    losses, weights = _token_losses(logits, labels)
    count = tf.maximum(tf.reduce_sum(weights), 1.0)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32) * weights
    return tf.reduce_sum(losses) / count, {"accuracy": tf.reduce_sum(correct) / count}


def token_classification_predict_fn(model, batch):
    logits = tf.cast(model(model_inputs(batch), training=False), tf.float32)
    labels = tf.cast(batch[LABEL_IDS], tf.int32)
    losses, weights = _token_losses(logits, labels)
    per_example_loss = tf.reduce_sum(losses, axis=1) / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
    return {"predictions": tf.argmax(logits, axis=-1, output_type=tf.int32), "word_ids": batch["word_ids"],
            "sentence_index": batch["sentence_index"], EXAMPLE_INDEX: batch[EXAMPLE_INDEX],
            "per_example_loss": per_example_loss}


def token_classification_serving_fn(model, inputs):
    logits = tf.cast(model(inputs, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}


def predicted_tags(sentences: Sequence[ConllSentence], outputs, labels: Sequence[str], tag_scheme: str
                   ) -> List[List[str]]:
    """Each sentence's predicted tags in `tag_scheme`, from the label predicted at each word's first piece.

    The model's IOB2 predictions are read as chunks by conlleval's rules (an `I-X` after `O` opens a
    chunk), which are then written in the data's scheme.
    """
    model_tags = [[OUTSIDE] * len(sentence.words) for sentence in sentences]
    for sentence_index, word_ids, predictions in zip(outputs["sentence_index"], outputs["word_ids"],
                                                     outputs["predictions"]):
        labelled = word_ids >= 0
        for word, label in zip(word_ids[labelled], predictions[labelled]):
            model_tags[sentence_index][word] = labels[label]
    return [tags_in_scheme(chunks(tags), len(tags), tag_scheme) for tags in model_tags]


def write_predictions(path: str, sentences: Sequence[ConllSentence], predictions: Sequence[Sequence[str]]) -> None:
    """CoNLL lines `word gold predicted`, a blank line after each sentence (what conlleval reads)."""
    with tf.io.gfile.GFile(path, "w") as handle:
        for sentence, tags in zip(sentences, predictions):
            handle.write("".join(f"{word} {gold} {tag}\n" for word, gold, tag in zip(sentence.words, sentence.tags,
                                                                                   tags)))
            handle.write("\n")


def write_results(path_prefix: str, results: Dict[str, float]) -> None:
    """`name = value` lines in path_prefix.txt and the same in path_prefix.json."""
    with tf.io.gfile.GFile(path_prefix + ".txt", "w") as handle:
        handle.write("".join(f"{name} = {value}\n" for name, value in sorted(results.items())))
    with tf.io.gfile.GFile(path_prefix + ".json", "w") as handle:
        handle.write(json.dumps(results, indent=2, sort_keys=True) + "\n")


# ---- the task ------------------------------------------------------------------------------------

def resolve_labels(options: NerOptions, sentences_by_split: Dict[str, List[ConllSentence]]) -> tuple:
    """output_dir/labels.txt when it exists, else the labels of the loaded splits' entity types; written back."""
    path = os.path.join(options.finetuning.output_dir, LABELS_FILE)
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "r") as handle:
            labels = tuple(line.strip() for line in handle if line.strip())
        logging.info("Using the %d labels of %s.", len(labels), path)
    else:
        labels = conll_data.label_list([sentence for sentences in sentences_by_split.values()
                                        for sentence in sentences])
        tf.io.gfile.makedirs(options.finetuning.output_dir)
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write("".join(f"{label}\n" for label in labels))
    return labels


def build_task(options: NerOptions, tokenizer) -> FinetuningTask:
    """The FinetuningTask of a CoNLL run, its splits loaded (and their features cached) as the options ask."""
    finetuning_options = options.finetuning
    tag_scheme = conll_data.check_tag_scheme(options.tag_scheme)
    if bool(options.data_dir) == bool(options.tfds_name):
        raise ValueError("Give --data_dir (the CoNLL files) or --tfds=conll2003, " +
                         ("not both." if options.data_dir else "one of them."))
    splits = [split for split, flag in _SPLIT_FLAGS.items() if getattr(finetuning_options, flag)]
    sentences = {}
    for split in splits:
        if options.tfds_name:
            sentences[split] = conll_data.read_tfds_sentences(options.tfds_name, split, tag_scheme,
                                                              options.tfds_data_dir)
            described = f"tensorflow-datasets {options.tfds_name} {split} split"
        else:
            path = conll_data.split_file(options.data_dir, split)
            sentences[split] = conll_data.read_sentences(path, tag_scheme)
            described = f"{split} file {path}"
        if not sentences[split]:
            # Every split is scored (dev and test hold gold tags), so an empty one has nothing to report.
            raise ValueError(f"The CoNLL {described} holds no sentences; --{_SPLIT_FLAGS[split]} needs at least "
                             f"one.")
    labels = resolve_labels(options, sentences)

    def load(split):
        _, features = conll_data.load_split(
            options.data_dir, split, tokenizer, finetuning_options.max_seq_length,
            resolve_cached_dir(finetuning_options), tag_scheme, labels, sentences=sentences[split])
        return DataSplit(split, features.dataset, features.num_examples)

    def scores(split, outputs):
        predictions = predicted_tags(sentences[split.name], outputs, labels, tag_scheme)
        return predictions, entity_scores([sentence.tags for sentence in sentences[split.name]], predictions)

    def task_eval_predictions(path, split, outputs):
        write_predictions(path, sentences[split.name], scores(split, outputs)[0])

    def task_predictions(output_dir, split, outputs):
        predictions, results = scores(split, outputs)
        results["loss"] = float(np.mean(outputs["per_example_loss"]))
        write_predictions(os.path.join(output_dir, "test_predictions.txt"), sentences[split.name], predictions)
        write_results(os.path.join(output_dir, "predict_results"), results)
        logging.info("Test results: %s", results)

    sequence = tf.TensorSpec([None, finetuning_options.max_seq_length], tf.int32)
    return FinetuningTask(
        name="ner",
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertTokenClassifier(
            config, len(labels), dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=token_classification_loss_fn, predict_fn=token_classification_predict_fn,
        serving_fn=token_classification_serving_fn,
        compute_metrics=lambda split, outputs: scores(split, outputs)[1], best_metric="f1",
        train_data=load("train") if finetuning_options.do_train else None,
        eval_splits=[load("dev")] if finetuning_options.do_eval else [],
        predict_splits=[load("test")] if finetuning_options.do_predict else [],
        write_eval_predictions=task_eval_predictions, write_predictions=task_predictions,
        eval_predictions_extension="txt", sequence_features=INPUT_NAMES + (LABEL_IDS, "word_ids"),
        sequence_outputs={"predictions": 0, "word_ids": -1})


def run_ner(options: NerOptions) -> Dict[str, object]:
    """Fine-tunes, evaluates and predicts CoNLL NER as `options` ask; returns `run_finetuning`'s results
    (with `num_trials` > 1, `multi_seed.run_trials`').

    A run stopped by SIGTERM raises checkpointing.TrainingPreempted once its checkpoint is saved; running it
    again resumes. See the module's docstring for an example.
    """
    check_finetuning_options(options.finetuning)
    source = resolve_model_source(options.finetuning)
    return multi_seed.run_trials(build_task(options, source.tokenizer), options.finetuning, source)
