"""Fine-tunes ALBERT on SQuAD v1.1 or (with --version_2_with_negative) v2.0.

    python -m run_scripts.run_squad --preset=albert-base --init_checkpoint=albert_base \\
        --spm_model_file=albert_base/30k-clean.model --train_file=train-v2.0.json \\
        --predict_file=dev-v2.0.json --version_2_with_negative --do_train --do_eval --output_dir=out

--train_file / --predict_file take the official SQuAD JSON, or `tfds:squad/v1.1:<split>` /
`tfds:squad/v2.0:<split>` for tensorflow-datasets prepared locally. --do_eval scores --predict_file with
the official EM/F1 and writes eval_results.{txt,json}, predictions.json, nbest_predictions.json and
(v2.0) null_odds.json; --do_predict writes the same prediction files for --predict_file (answers not
needed) from the best checkpoint, and when the file has answers scores them too (predict_results.json),
as the original's --do_predict did.

v2.0 answers a question when its null odds (the answer-class logit) is <= --null_score_diff_threshold
(default 0.0, i.e. P(no answer) <= 0.5), or the threshold that maximises F1 on
--null_threshold_search_file, a labelled split other than the one evaluated. The official script's
search for the best threshold on the evaluated split itself, run on every question's best non-null
answer (as the original's first pass; the official script run on predictions.json, which is already
thresholded, can find less), is written as oracle_best_f1(_thresh), and
the numbers the original run_squad_v2.py reports (that threshold applied with its strict `<`, then the
official script's na_prob_thresh of 1.0) as original_exact_match, original_f1 and
original_null_score_diff_threshold: both are tuned on the split they score.
"""

import json
import os

import tensorflow as tf
from absl import app, flags, logging

from albert_tf import AlbertSpanPredictor, AlbertSquadV2
from albert_tf.tasks import finetuning
from albert_tf.training import host_allocator
from data_gen import squad, squad_evaluation, squad_postprocess
from run_scripts import original_flags
from run_scripts import finetuning_flags

FLAGS = flags.FLAGS
finetuning_flags.define_finetuning_flags(learning_rate=5e-5, max_seq_length=384, num_train_epochs=3.0,
                                         warmup_proportion=0.1, train_batch_size=32, eval_batch_size=8,
                                         predict_batch_size=8, save_checkpoints_steps=1000,
                                         original_flags={"train_feature_file": original_flags.CACHED_FEATURES,
                                                         "predict_feature_file": original_flags.CACHED_FEATURES,
                                                         "predict_feature_left_file": original_flags.CACHED_FEATURES,
                                                         "use_einsum": original_flags.NO_EINSUM_CHOICE})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("train_file", None, "SQuAD JSON for training (train-v1.1.json), or tfds:squad/<v>:<split>.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to evaluate / predict (dev-v1.1.json), or "
                    "tfds:squad/<v>:<split>.")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data_dir for tfds: sources (default: its own).")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer (the v2 head).")
flags.DEFINE_integer("doc_stride", 128, "Pieces between the starts of two document spans.")
flags.DEFINE_integer("max_query_length", 64, "Questions are cut to their first this many pieces.")
flags.DEFINE_integer("n_best_size", 20, "Answers per question in nbest_predictions.json (and v1's start/end "
                     "candidates per span).")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
flags.DEFINE_integer("start_n_top", 5, "v2.0: beam of start positions.")
flags.DEFINE_integer("end_n_top", 5, "v2.0: beam of end positions per start.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: answer a question when its null odds (answer-class logit) is <= this.")
flags.DEFINE_string("null_threshold_search_file", None,
                    "v2.0: a labelled SQuAD v2.0 split (file or tfds: source, not --predict_file) on which the "
                    "threshold that maximises F1 is found and then used instead of --null_score_diff_threshold.")

THRESHOLD_SEARCH_SUFFIX = "_threshold_search"
PREDICT_RESULTS_NAME = "predict_results.json"


def _check_flags(options):
    if options.do_train and not FLAGS.train_file:
        raise ValueError("--do_train needs --train_file.")
    if (options.do_eval or options.do_predict) and not FLAGS.predict_file:
        raise ValueError("--do_eval and --do_predict need --predict_file.")
    for name in ("n_best_size", "max_answer_length", "start_n_top", "end_n_top"):
        if FLAGS[name].value < 1:
            raise ValueError(f"--{name} must be a positive integer, got {FLAGS[name].value}.")
    if FLAGS.null_threshold_search_file:
        if not FLAGS.version_2_with_negative:
            raise ValueError("--null_threshold_search_file is for SQuAD v2.0 (--version_2_with_negative).")
        if FLAGS.null_threshold_search_file == FLAGS.predict_file:
            raise ValueError(f"--null_threshold_search_file={FLAGS.null_threshold_search_file!r} is the evaluated "
                             "--predict_file: a threshold found there is an oracle, and is already reported as "
                             "oracle_best_f1_thresh; name another labelled split.")
    squad.check_lengths(options.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length)


# ---- losses and predictions ----------------------------------------------------------------------

def _encoder_inputs(batch, version_2):
    inputs = finetuning.model_inputs(batch)
    if version_2:
        inputs["p_mask"] = batch["p_mask"]
    return inputs


def v1_loss_fn(model, batch):
    """(start CE + end CE) / 2, as the original's v1 model_fn."""
    outputs = model(_encoder_inputs(batch, False), training=True)
    start_loss = tf.reduce_mean(finetuning.softmax_cross_entropy(outputs["start_logits"], batch["start_positions"]))
    end_loss = tf.reduce_mean(finetuning.softmax_cross_entropy(outputs["end_logits"], batch["end_positions"]))
    return (start_loss + end_loss) / 2.0, {"start_loss": start_loss, "end_loss": end_loss}


def _log_prob_loss(log_probs, positions):
    one_hot = tf.one_hot(positions, depth=tf.shape(log_probs)[-1], dtype=tf.float32)
    return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))


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


# ---- the task ------------------------------------------------------------------------------------

class _SquadSplits:
    """The examples, cached features and post-processed answers behind each split, by split name."""

    def __init__(self, options, tokenizer):
        self._options = options
        self._tokenizer = tokenizer
        self.examples = {}
        self.alignments = {}
        self._processed = {}
        self.threshold = FLAGS.null_score_diff_threshold

    def load(self, name, source, is_training):
        examples = squad.read_squad_examples(source, is_training, FLAGS.tfds_data_dir)
        unanswerable = sum(example.is_impossible for example in examples)
        if unanswerable and not FLAGS.version_2_with_negative:
            raise ValueError(f"{source} has {unanswerable} unanswerable questions (is_impossible): it is SQuAD v2.0 "
                             f"data, which needs --version_2_with_negative (the v1.1 head cannot answer "
                             f"\"no answer\").")
        features = squad.load_features(
            source, examples, self._tokenizer, max_seq_length=self._options.max_seq_length,
            doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length, is_training=is_training,
            cached_dir=finetuning_flags.cached_dir())
        self.examples[name] = examples
        if not is_training:
            self.alignments[name] = squad.FeatureAlignment.from_cached(features)
        # Training steps count examples, as the original; evaluation counts the features it predicts.
        count = len(examples) if is_training else features.num_examples
        return finetuning.DataSplit(name, lambda: features.dataset().map(squad.model_batch), count,
                                    THRESHOLD_SEARCH_SUFFIX if name == "threshold_search" else "")

    def answers(self, split, outputs):
        """Post-processed answers of `outputs`, computed once per prediction run."""
        cached = self._processed.get(split.name)
        if cached is not None and cached[0] is outputs:
            return cached[1]
        examples, alignment = self.examples[split.name], self.alignments[split.name]
        if FLAGS.version_2_with_negative:
            processed = squad_postprocess.postprocess_v2(examples, alignment, outputs, FLAGS.n_best_size,
                                                         FLAGS.max_answer_length)
        else:
            processed = squad_postprocess.postprocess_v1(examples, alignment, outputs, FLAGS.n_best_size,
                                                         FLAGS.max_answer_length)
        self._processed[split.name] = (outputs, processed)
        return processed

    def search_threshold(self, split, outputs):
        best_answers, _, null_odds = self.answers(split, outputs)
        results = squad_evaluation.evaluate_v2(squad.gold_answers(self.examples[split.name]), best_answers,
                                               null_odds)
        self.threshold = results["best_f1_thresh"]
        logging.info("Null threshold %g maximises F1 (%.2f) on %s; it is applied to %s.", self.threshold,
                     results["best_f1"], FLAGS.null_threshold_search_file, FLAGS.predict_file)
        return {"best_f1": results["best_f1"], "best_f1_thresh": results["best_f1_thresh"],
                "best_exact": results["best_exact"], "best_exact_thresh": results["best_exact_thresh"]}

    def compute_metrics(self, split, outputs):
        if split.name == "threshold_search":
            return self.search_threshold(split, outputs)
        gold = squad.gold_answers(self.examples[split.name])
        if not FLAGS.version_2_with_negative:
            return squad_evaluation.evaluate_v1(gold, self.answers(split, outputs)[0])
        best_answers, _, null_odds = self.answers(split, outputs)
        results = squad_evaluation.evaluate_v2(gold, best_answers, null_odds, na_prob_thresh=self.threshold)
        metrics = {name: value for name, value in results.items() if not name.startswith("best_")}
        metrics.update({f"oracle_{name}": value for name, value in results.items() if name.startswith("best_")})
        as_original = squad_evaluation.evaluate_v2_as_original(gold, best_answers, null_odds)
        metrics.update({f"original_{name}": value for name, value in as_original.items() if name != "total"})
        metrics["null_score_diff_threshold"] = self.threshold
        return metrics

    def write_files(self, directory, split, outputs):
        if split.name == "threshold_search":
            return
        if FLAGS.version_2_with_negative:
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
        if all(example.answer_texts or example.is_impossible for example in self.examples[split.name]):
            metrics = self.compute_metrics(split, outputs)
            path = os.path.join(output_dir, PREDICT_RESULTS_NAME)
            with tf.io.gfile.GFile(path, "w") as handle:
                handle.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
            logging.info("%s has answers, so its predictions are scored too (%s): %s", FLAGS.predict_file, path,
                         ", ".join(f"{name} = {value:.4g}" for name, value in sorted(metrics.items())))


def _squad_task(options, tokenizer):
    version_2 = FLAGS.version_2_with_negative
    splits = _SquadSplits(options, tokenizer)
    search = ([("threshold_search", FLAGS.null_threshold_search_file)] if FLAGS.null_threshold_search_file
              else [])
    train = splits.load("train", FLAGS.train_file, is_training=True) if options.do_train else None
    evaluation = [splits.load(name, source, False) for name, source in search + [("dev", FLAGS.predict_file)]
                  ] if options.do_eval else []
    prediction = [splits.load(name, source, False) for name, source in search + [("predict", FLAGS.predict_file)]
                  ] if options.do_predict else []
    # Named specs, so the exported serving signature takes its inputs by these names.
    names = ("input_word_ids", "input_mask", "input_type_ids") + (("p_mask",) if version_2 else ())
    signature = {name: tf.TensorSpec([None, options.max_seq_length], tf.float32 if name == "p_mask" else tf.int32,
                                     name=name) for name in names}

    def build_model(config, dropout_rate, recompute_blocks):
        if version_2:
            return AlbertSquadV2(config, start_n_top=FLAGS.start_n_top, end_n_top=FLAGS.end_n_top,
                                 dropout_rate=dropout_rate, recompute_blocks=recompute_blocks)
        return AlbertSpanPredictor(config, recompute_blocks=recompute_blocks)

    return finetuning.FinetuningTask(
        name="squad_v2" if version_2 else "squad_v1", build_model=build_model, input_signature=signature,
        loss_fn=v2_loss_fn if version_2 else v1_loss_fn, predict_fn=_predict_fn(version_2),
        compute_metrics=splits.compute_metrics, best_metric="f1", train_data=train, eval_splits=evaluation,
        predict_splits=prediction,
        write_eval_predictions=lambda path, split, outputs: splits.write_files(os.path.dirname(path), split,
                                                                               outputs),
        write_predictions=splits.write_predictions, serving_fn=_serving_fn)


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    options = finetuning_flags.finetuning_options()
    _check_flags(options)
    tokenizer = finetuning_flags.tokenizer_from_flags()
    finetuning_flags.run(_squad_task(options, tokenizer), options)


if __name__ == "__main__":
    app.run(main)
