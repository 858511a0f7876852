"""SQuAD v1.1 / v2.0 fine-tuning: the span and answer-class losses, the official scoring and files, `run_squad`.

`train_file` / `predict_file` take the official SQuAD JSON, or `tfds:squad/v1.1:<split>` /
`tfds:squad/v2.0:<split>` for tensorflow-datasets prepared locally (data_gen.readers.squad reads both). Evaluation
scores `predict_file` with the official EM/F1 (data_gen.evaluation.squad_evaluation) and writes eval_results.{txt,json},
predictions.json, nbest_predictions.json and (v2.0) null_odds.json; prediction writes the same prediction
files for `predict_file` (answers not needed) from the best checkpoint, and when the file has answers scores
them too (predict_results.json), as the original's --do_predict did.

v2.0 answers a question when its null odds (the answer-class logit) is <= `null_score_diff_threshold`
(default 0.0, i.e. P(no answer) <= 0.5), or the threshold that maximises F1 on `null_threshold_search_file`,
a labelled split other than the one evaluated; exact_match and f1 are what the official evaluate-v2.0.py
reports on the predictions.json written (`v2_metrics`). The official script's search for the best threshold on the
evaluated split itself, run on every question's best non-null answer (as the original's first pass; the
official script run on predictions.json, which is already thresholded, can find less), is written as
oracle_best_f1(_thresh), and the numbers the original run_squad_v2.py reports (that threshold applied with
its strict `<`, then the official script's na_prob_thresh of 1.0) as original_exact_match, original_f1 and
original_null_score_diff_threshold: both are tuned on the split they score.

Usage (it needs the SQuAD files and a pretrained model, so it is not run here):

    from albert_tf.tasks.finetuning_options import FinetuningOptions
    from albert_tf.tasks.squad import SquadOptions, run_squad

    results = run_squad(SquadOptions(
        FinetuningOptions(output_dir="out/squad2", init_checkpoint="albert_base", max_seq_length=384,
                          train_step=None, num_train_epochs=3.0, warmup_proportion=0.1,
                          do_train=True, do_eval=True),
        train_file="train-v2.0.json", predict_file="dev-v2.0.json", version_2_with_negative=True))
    results["eval"]  # {'exact_match': ..., 'f1': ..., 'HasAns_f1': ..., 'NoAns_f1': ..., ...}
"""

import dataclasses
import json
import os
from typing import Dict, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from albert_tf.models.span_predictor import AlbertSpanPredictor
from albert_tf.models.squad_v2 import AlbertSquadV2
from albert_tf.tasks import multi_seed
from albert_tf.tasks.classification_functions import model_inputs, softmax_cross_entropy
from albert_tf.tasks.finetuning_options import FinetuningOptions, check_finetuning_options, resolve_cached_dir
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask
from albert_tf.tasks.model_source import resolve_model_source
from albert_tf.training.metric_names import returns_metrics
from data_gen.evaluation import squad_evaluation, squad_postprocess
from data_gen.readers import squad

THRESHOLD_SEARCH_SUFFIX = "_threshold_search"
PREDICT_RESULTS_NAME = "predict_results.json"
# The splits that are scored, by the option that reads them; a predict file without questions gives empty files.
_SCORED_SPLITS = {"dev": "--do_eval", "threshold_search": "--null_threshold_search_file"}


@dataclasses.dataclass
class SquadOptions:
    """A SQuAD run: its files, the version, how documents are windowed and answers chosen, and the fine-tuning
    options (the original's flags, same names and defaults).

    Example:
    >>> options = SquadOptions(FinetuningOptions("/tmp/squad", max_seq_length=384), predict_file="dev-v1.1.json",
    ...                        doc_stride=128)
    >>> check_options(options)
    >>> check_options(dataclasses.replace(options, null_threshold_search_file="dev-v1.1.json"))
    Traceback (most recent call last):
    ...
    ValueError: --null_threshold_search_file is for SQuAD v2.0 (--version_2_with_negative).
    """

    finetuning: FinetuningOptions
    train_file: Optional[str] = None
    predict_file: Optional[str] = None
    tfds_data_dir: Optional[str] = None
    version_2_with_negative: bool = False
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    start_n_top: int = 5
    end_n_top: int = 5
    null_score_diff_threshold: float = 0.0
    null_threshold_search_file: Optional[str] = None


def check_options(options: SquadOptions) -> None:
    """Fails, naming the flag, on options that cannot run together."""
    finetuning_options = options.finetuning
    if finetuning_options.do_train and not options.train_file:
        raise ValueError("--do_train needs --train_file.")
    if (finetuning_options.do_eval or finetuning_options.do_predict) and not options.predict_file:
        raise ValueError("--do_eval and --do_predict need --predict_file.")
    for name in ("n_best_size", "max_answer_length", "start_n_top", "end_n_top"):
        if getattr(options, name) < 1:
            raise ValueError(f"--{name} must be a positive integer, got {getattr(options, name)}.")
    if options.null_threshold_search_file:
        if not options.version_2_with_negative:
            raise ValueError("--null_threshold_search_file is for SQuAD v2.0 (--version_2_with_negative).")
        if options.null_threshold_search_file == options.predict_file:
            raise ValueError(f"--null_threshold_search_file={options.null_threshold_search_file!r} is the "
                             "evaluated --predict_file: a threshold found there is an oracle, and is already "
                             "reported as oracle_best_f1_thresh; name another labelled split.")
    squad.check_lengths(finetuning_options.max_seq_length, options.doc_stride, options.max_query_length)


# ---- losses and predictions ----------------------------------------------------------------------

def _encoder_inputs(batch, version_2):
    inputs = model_inputs(batch)
    if version_2:
        inputs["p_mask"] = batch["p_mask"]
    return inputs


@returns_metrics("start_loss", "end_loss")
def v1_loss_fn(model, batch):
    """(start CE + end CE) / 2, as the original's v1 model_fn."""
    outputs = model(_encoder_inputs(batch, False), training=True)
    start_loss = tf.reduce_mean(softmax_cross_entropy(outputs["start_logits"], batch["start_positions"]))
    end_loss = tf.reduce_mean(softmax_cross_entropy(outputs["end_logits"], batch["end_positions"]))
    return (start_loss + end_loss) / 2.0, {"start_loss": start_loss, "end_loss": end_loss}


def _log_prob_loss(log_probs, positions):
    one_hot = tf.one_hot(positions, depth=tf.shape(log_probs)[-1], dtype=tf.float32)
    return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))


@returns_metrics("start_loss", "end_loss", "answer_class_loss")
def v2_loss_fn(model, batch):
    """0.5 (start CE + end CE) + 0.5 BCE(cls_logits, is_impossible), as the original's v2 model_fn."""
    inputs = dict(_encoder_inputs(batch, True), start_positions=batch["start_positions"])
    outputs = model(inputs, training=True)
    start_loss = _log_prob_loss(outputs["start_log_probs"], batch["start_positions"])
    end_loss = _log_prob_loss(outputs["end_log_probs"], batch["end_positions"])
    class_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(batch["is_impossible"], tf.float32), logits=outputs["cls_logits"]))
    loss = 0.5 * (start_loss + end_loss) + 0.5 * class_loss
    return loss, {"start_loss": start_loss, "end_loss": end_loss, "answer_class_loss": class_loss}


def _predict_fn(version_2):
    def predict_fn(model, batch):
        outputs = model(_encoder_inputs(batch, version_2), training=False)
        return dict(outputs, unique_ids=batch["unique_ids"])

    return predict_fn


def _serving_fn(model, inputs):
    return model(inputs, training=False)


# ---- v2.0 metrics --------------------------------------------------------------------------------

def v2_metrics(gold: Mapping[str, Sequence[str]], best_answers: Mapping[str, str], null_odds: Mapping[str, float],
               threshold: float) -> Dict[str, float]:
    """The v2.0 metrics of eval_results.json, from each question's best non-null answer and null odds.

    exact_match, f1, total and HasAns_* / NoAns_* are what the official evaluate-v2.0.py reports on the
    predictions.json written at `threshold` (answered when null odds <= threshold, else ""). Scoring the
    best answers with the threshold as the official no-answer cut-off instead would count a question whose
    gold answers all normalise to nothing ("the") as wrong when it is not answered, where the official
    script scores that "" against the gold [""] as right. oracle_best_* is the official threshold search on
    the best answers of this split, original_* the numbers the original run_squad_v2.py reports.

    Example:
    >>> gold = {"q1": ["Paris"], "q2": ["the"], "q3": []}
    >>> metrics = v2_metrics(gold, {"q1": "Paris", "q2": "a", "q3": "x"}, {"q1": -1.0, "q2": 2.0, "q3": 3.0}, 0.0)
    >>> metrics["exact_match"], metrics["HasAns_total"], metrics["oracle_best_f1"]
    (100.0, 2, 100.0)
    """
    predictions = squad_postprocess.apply_null_threshold(best_answers, null_odds, threshold)
    metrics = squad_evaluation.evaluate_v2(gold, predictions)
    searched = squad_evaluation.evaluate_v2(gold, best_answers, null_odds)
    metrics.update({f"oracle_{name}": value for name, value in searched.items() if name.startswith("best_")})
    as_original = squad_evaluation.evaluate_v2_as_original(gold, best_answers, null_odds)
    metrics.update({f"original_{name}": value for name, value in as_original.items() if name != "total"})
    metrics["null_score_diff_threshold"] = threshold
    return metrics


# ---- the task ------------------------------------------------------------------------------------

class _SquadSplits:
    """The examples, cached features and post-processed answers behind each split, by split name."""

    def __init__(self, options, tokenizer):
        self._options = options
        self._tokenizer = tokenizer
        self.examples = {}
        self.alignments = {}
        self._processed = {}
        self.threshold = options.null_score_diff_threshold

    def load(self, name, source, is_training):
        options = self._options
        examples = squad.read_squad_examples(source, is_training, options.tfds_data_dir)
        if not examples and name in _SCORED_SPLITS:
            raise ValueError(f"{source} holds no questions; {_SCORED_SPLITS[name]} scores it, so it needs at least "
                             "one.")
        unanswerable = sum(example.is_impossible for example in examples)
        if unanswerable and not options.version_2_with_negative:
            raise ValueError(f"{source} has {unanswerable} unanswerable questions (is_impossible): it is SQuAD v2.0 "
                             f"data, which needs --version_2_with_negative (the v1.1 head cannot answer "
                             f"\"no answer\").")
        features = squad.load_features(
            source, examples, self._tokenizer, max_seq_length=options.finetuning.max_seq_length,
            doc_stride=options.doc_stride, max_query_length=options.max_query_length, is_training=is_training,
            cached_dir=resolve_cached_dir(options.finetuning))
        self.examples[name] = examples
        if not is_training:
            self.alignments[name] = squad.FeatureAlignment.from_cached(features)
        # Training steps count examples, as the original; evaluation counts the features it predicts.
        count = len(examples) if is_training else features.num_examples
        return DataSplit(name, lambda: features.dataset().map(squad.model_batch), count,
                                    THRESHOLD_SEARCH_SUFFIX if name == "threshold_search" else "")

    def answers(self, split, outputs):
        """Post-processed answers of `outputs`, computed once per prediction run."""
        cached = self._processed.get(split.name)
        if cached is not None and cached[0] is outputs:
            return cached[1]
        examples, alignment = self.examples[split.name], self.alignments[split.name]
        if self._options.version_2_with_negative:
            processed = squad_postprocess.postprocess_v2(examples, alignment, outputs, self._options.n_best_size,
                                                         self._options.max_answer_length)
        else:
            processed = squad_postprocess.postprocess_v1(examples, alignment, outputs, self._options.n_best_size,
                                                         self._options.max_answer_length)
        self._processed[split.name] = (outputs, processed)
        return processed

    def search_threshold(self, split, outputs):
        best_answers, _, null_odds = self.answers(split, outputs)
        results = squad_evaluation.evaluate_v2(squad.gold_answers(self.examples[split.name]), best_answers,
                                               null_odds)
        self.threshold = results["best_f1_thresh"]
        logging.info("Null threshold %g maximises F1 (%.2f) on %s; it is applied to %s.", self.threshold,
                     results["best_f1"], self._options.null_threshold_search_file, self._options.predict_file)
        return {"best_f1": results["best_f1"], "best_f1_thresh": results["best_f1_thresh"],
                "best_exact": results["best_exact"], "best_exact_thresh": results["best_exact_thresh"]}

    def compute_metrics(self, split, outputs):
        if split.name == "threshold_search":
            return self.search_threshold(split, outputs)
        gold = squad.gold_answers(self.examples[split.name])
        if not self._options.version_2_with_negative:
            return squad_evaluation.evaluate_v1(gold, self.answers(split, outputs)[0])
        best_answers, _, null_odds = self.answers(split, outputs)
        return v2_metrics(gold, best_answers, null_odds, self.threshold)

    def write_files(self, directory, split, outputs):
        if split.name == "threshold_search":
            return
        if self._options.version_2_with_negative:
            best_answers, nbest, null_odds = self.answers(split, outputs)
            predictions = squad_postprocess.apply_null_threshold(best_answers, null_odds, self.threshold)
        else:
            (predictions, nbest), null_odds = self.answers(split, outputs), None
        paths = squad_postprocess.write_prediction_files(directory, predictions, nbest, null_odds)
        logging.info("Wrote %s", ", ".join(paths.values()))

    def write_predictions(self, output_dir, split, outputs):
        if split.name == "threshold_search":
            self.search_threshold(split, outputs)
            return
        self.write_files(output_dir, split, outputs)
        # The original's --do_predict also scored a predict file that has answers (its usual dev file).
        examples = self.examples[split.name]
        if examples and all(example.answer_texts or example.is_impossible for example in examples):
            metrics = self.compute_metrics(split, outputs)
            path = os.path.join(output_dir, PREDICT_RESULTS_NAME)
            with tf.io.gfile.GFile(path, "w") as handle:
                handle.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
            logging.info("%s has answers, so its predictions are scored too (%s): %s", self._options.predict_file,
                         path, ", ".join(f"{name} = {value:.4g}" for name, value in sorted(metrics.items())))


def build_task(options: SquadOptions, tokenizer) -> FinetuningTask:
    """The FinetuningTask of a SQuAD run, its splits loaded (and their features cached) as the options ask."""
    finetuning_options = options.finetuning
    version_2 = options.version_2_with_negative
    splits = _SquadSplits(options, tokenizer)
    search = ([("threshold_search", options.null_threshold_search_file)] if options.null_threshold_search_file
              else [])
    train = splits.load("train", options.train_file, is_training=True) if finetuning_options.do_train else None
    evaluation = [splits.load(name, source, False) for name, source in search + [("dev", options.predict_file)]
                  ] if finetuning_options.do_eval else []
    prediction = [splits.load(name, source, False) for name, source in search + [("predict", options.predict_file)]
                  ] if finetuning_options.do_predict else []
    # Named specs, so the exported serving signature takes its inputs by these names.
    names = ("input_word_ids", "input_mask", "input_type_ids") + (("p_mask",) if version_2 else ())
    signature = {name: tf.TensorSpec([None, finetuning_options.max_seq_length],
                                     tf.float32 if name == "p_mask" else tf.int32, name=name) for name in names}

    def build_model(config, dropout_rate, recompute_blocks):
        if version_2:
            return AlbertSquadV2(config, start_n_top=options.start_n_top, end_n_top=options.end_n_top,
                                 dropout_rate=dropout_rate, recompute_blocks=recompute_blocks)
        return AlbertSpanPredictor(config, recompute_blocks=recompute_blocks)

    return FinetuningTask(
        name="squad_v2" if version_2 else "squad_v1", build_model=build_model, input_signature=signature,
        loss_fn=v2_loss_fn if version_2 else v1_loss_fn, predict_fn=_predict_fn(version_2),
        compute_metrics=splits.compute_metrics, best_metric="f1", train_data=train, eval_splits=evaluation,
        predict_splits=prediction,
        write_eval_predictions=lambda path, split, outputs: splits.write_files(os.path.dirname(path), split,
                                                                               outputs),
        write_predictions=splits.write_predictions, serving_fn=_serving_fn,
        # v2's beams exclude padding through p_mask, so a cut batch gives them as they were; v1's n-best takes the
        # highest logits over every position, padding included (as the original), which cut columns would change.
        sequence_features=names if version_2 else ())


def run_squad(options: SquadOptions) -> Dict[str, object]:
    """Fine-tunes, evaluates and predicts SQuAD as `options` ask; returns `run_finetuning`'s results
    (with `num_trials` > 1, `multi_seed.run_trials`').

    A run stopped by SIGTERM raises checkpointing.TrainingPreempted once its checkpoint is saved; running it
    again resumes. See the module's docstring for an example.
    """
    check_finetuning_options(options.finetuning)
    check_options(options)
    source = resolve_model_source(options.finetuning)
    return multi_seed.run_trials(build_task(options, source.tokenizer), options.finetuning, source)
