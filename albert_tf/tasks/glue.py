"""GLUE fine-tuning: run_glue.sh's hyperparameters, GLUE's metrics and output files, and `run_glue`.

`run_glue` reads the GLUE data directory (the original file layout, data_gen.readers.glue) or tensorflow-datasets
glue/<task> prepared locally, and fine-tunes, evaluates and predicts with the shared driver (finetuning.py).
It writes eval_results.{txt,json} (the .txt also under the original run_classifier's names, e.g.
eval_accuracy) and eval_predictions.tsv (dev), and for prediction the GLUE submission file(s) (e.g. MRPC.tsv;
MNLI writes MNLI-m.tsv, MNLI-mm.tsv and, when the diagnostic data is there, AX.tsv) and, as the original,
test_results.tsv with each test example's class probabilities (test_results_MNLI-mm.tsv and
test_results_AX.tsv for MNLI's others).

Usage (it needs the GLUE data and a pretrained model, so it is not run here):

    from albert_tf.tasks.finetuning_options import FinetuningOptions
    from albert_tf.tasks.glue import GlueOptions, run_glue

    results = run_glue(GlueOptions(
        task_name="MRPC", data_dir="glue_data", use_paper_hparams=True,
        finetuning=FinetuningOptions(output_dir="out/mrpc", init_checkpoint="albert_base",
                                     do_train=True, do_eval=True, do_predict=True)))
    results["eval"]  # {'accuracy': ..., 'f1': ..., 'loss': ..., 'global_step': 800}
"""

import dataclasses
import os
from typing import Collection, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks import multi_seed
from albert_tf.tasks.classification_functions import (classification_loss_fn, classification_predict_fn,
                                                      classification_serving_fn, regression_loss_fn,
                                                      regression_predict_fn, regression_serving_fn)
from albert_tf.tasks.finetuning_options import FinetuningOptions, check_finetuning_options, resolve_cached_dir
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask, RawTextExport, count_labels
from albert_tf.tasks.model_source import resolve_model_source
from albert_tf.training import metrics
from data_gen.readers import glue as glue_data
from data_gen.readers.glue import GlueExample, GlueTask


@dataclasses.dataclass
class GlueOptions:
    """A GLUE run: the task, where its data is, and the fine-tuning options.

    Give `data_dir` (the GLUE download's layout) or `use_tfds` (tensorflow-datasets glue/<task>, prepared
    locally under `tfds_data_dir` or its default). With `use_paper_hparams`, run_glue.sh's learning rate,
    steps, warmup, checkpoint interval and batch size replace those of `finetuning`, and every checkpoint
    is evaluated as the original run_classifier did, except for the fields named in `explicit_options`
    (those the caller chose, e.g. the flags given on the command line). That is one seed; for the paper's
    median over 5 runs (albert_tf/tasks/multi_seed.py) set `finetuning.num_trials=5`.

    Example:
    >>> options = GlueOptions(FinetuningOptions("/tmp/rte", learning_rate=1e-5), task_name="RTE",
    ...                       data_dir="glue_data", use_paper_hparams=True, explicit_options=["learning_rate"])
    >>> resolved = resolve_options(options)
    >>> resolved.learning_rate, resolved.train_step, resolved.eval_every_checkpoint
    (1e-05, 800, True)
    """

    finetuning: FinetuningOptions
    task_name: str
    data_dir: Optional[str] = None
    use_tfds: bool = False
    tfds_data_dir: Optional[str] = None
    use_paper_hparams: bool = False
    explicit_options: Collection[str] = ()


# ---- run_glue.sh's hyperparameters ---------------------------------------------------------------

# run_glue.sh's per-task hyperparameters (max_seq_length 512 for all); WNLI and AX have none there.
PAPER_HPARAMS = {
    "sst-2": dict(warmup_step=1256, learning_rate=1e-5, train_step=20935, save_checkpoints_steps=100,
                  train_batch_size=32),
    "mnli": dict(warmup_step=1000, learning_rate=3e-5, train_step=10000, save_checkpoints_steps=100,
                 train_batch_size=128),
    "cola": dict(warmup_step=320, learning_rate=1e-5, train_step=5336, save_checkpoints_steps=100,
                 train_batch_size=16),
    "qnli": dict(warmup_step=1986, learning_rate=1e-5, train_step=33112, save_checkpoints_steps=200,
                 train_batch_size=32),
    "qqp": dict(warmup_step=1000, learning_rate=5e-5, train_step=14000, save_checkpoints_steps=100,
                train_batch_size=128),
    "rte": dict(warmup_step=200, learning_rate=3e-5, train_step=800, save_checkpoints_steps=100,
                train_batch_size=32),
    "sts-b": dict(warmup_step=214, learning_rate=2e-5, train_step=3598, save_checkpoints_steps=100,
                  train_batch_size=16),
    "mrpc": dict(warmup_step=200, learning_rate=2e-5, train_step=800, save_checkpoints_steps=100,
                 train_batch_size=32),
}
_STEP_HPARAMS = ("train_step", "warmup_step")


def paper_hparams(task_name: str, explicit: Sequence[str] = ()) -> Dict[str, object]:
    """run_glue.sh's hyperparameters for a task, except those named in `explicit` (flags the user gave).

    Giving num_train_epochs or warmup_proportion drops the table's step counts too.

    Example:
    >>> paper_hparams("mrpc", explicit=["learning_rate"])
    {'warmup_step': 200, 'train_step': 800, 'save_checkpoints_steps': 100, 'train_batch_size': 32}
    """
    task = glue_data.get_task(task_name)
    if task.name not in PAPER_HPARAMS:
        raise ValueError(f"run_glue.sh has no hyperparameters for {task.name!r}; it has {', '.join(PAPER_HPARAMS)}.")
    counts_epochs = bool({"num_train_epochs", "warmup_proportion"} & set(explicit))
    return {name: value for name, value in PAPER_HPARAMS[task.name].items()
            if name not in explicit and not (counts_epochs and name in _STEP_HPARAMS)}


def resolve_options(options: GlueOptions) -> FinetuningOptions:
    """The fine-tuning options of a GLUE run: `options.finetuning`, with run_glue.sh's with `use_paper_hparams`."""
    task = glue_data.get_task(options.task_name)
    finetuning_options = options.finetuning
    if options.use_paper_hparams:
        overrides = paper_hparams(task.name, list(options.explicit_options))
        if "eval_every_checkpoint" not in options.explicit_options:
            overrides["eval_every_checkpoint"] = True
        logging.info("run_glue.sh hyperparameters for %s: %s", task.name, overrides)
        finetuning_options = dataclasses.replace(finetuning_options, **overrides)
    if task.name == "ax" and (finetuning_options.do_train or finetuning_options.do_eval):
        raise ValueError("--task_name=ax is prediction only (--do_predict) with a model fine-tuned on MNLI "
                         "(--init_checkpoint or its --output_dir); it has no training or dev data.")
    if not options.use_tfds and not options.data_dir:
        raise ValueError("Give --data_dir (the GLUE data directory) or --tfds.")
    return finetuning_options


# ---- metrics -------------------------------------------------------------------------------------

# The metrics GLUE reports for each task, and the one that picks the best checkpoint.
METRIC_NAMES = {"cola": ("mcc", "accuracy"), "sst-2": ("accuracy",), "mrpc": ("f1", "accuracy"),
                "sts-b": ("pearson", "spearman"), "qqp": ("f1", "accuracy"), "qnli": ("accuracy",),
                "rte": ("accuracy",), "wnli": ("accuracy",), "mnli": ("accuracy",), "ax": ()}
BEST_METRICS = {"cola": "mcc", "sts-b": "pearson"}
DEFAULT_BEST_METRIC = "accuracy"


def best_metric(task: GlueTask) -> str:
    """The metric that picks the best checkpoint: CoLA's mcc, STS-B's pearson, else accuracy.

    Example:
    >>> best_metric(glue_data.get_task("MRPC"))
    'accuracy'
    """
    return BEST_METRICS.get(task.name, DEFAULT_BEST_METRIC)


def predictions_from_outputs(task: GlueTask, outputs: Dict[str, np.ndarray]) -> np.ndarray:
    """Class ids (argmax of `logits`) or STS-B scores (`predictions`) from the fine-tuning outputs."""
    if task.is_regression:
        return np.asarray(outputs["predictions"], dtype=np.float64)
    return np.argmax(outputs["logits"], axis=-1)


def compute_metrics(task: GlueTask, predictions, labels) -> Dict[str, float]:
    """The task's GLUE metrics: mcc (CoLA), pearson+spearman (STS-B), f1+accuracy (MRPC, QQP), else accuracy."""
    functions = {"accuracy": metrics.accuracy, "f1": metrics.f1_score, "mcc": metrics.matthews_corrcoef,
                 "pearson": metrics.pearson_correlation, "spearman": metrics.spearman_correlation}
    return {name: functions[name](predictions, labels) for name in METRIC_NAMES[task.name]}


def original_metric_names(task: GlueTask) -> Dict[str, str]:
    """{name in the original run_classifier's eval_results.txt: ours} for the task's dev metrics.

    Example:
    >>> original_metric_names(glue_data.GLUE_TASKS["cola"])
    {'eval_accuracy': 'accuracy', 'eval_loss': 'loss', 'matthew_corr': 'mcc'}
    """
    if task.is_regression:
        # The per-example loss is the squared error, so the original's MSE and eval_loss were the same number.
        return {"MSE": "loss", "eval_loss": "loss"}
    names = {"eval_accuracy": "accuracy", "eval_loss": "loss"}
    if task.name == "cola":
        names["matthew_corr"] = "mcc"
    return names


# ---- output files --------------------------------------------------------------------------------

def prediction_strings(task: GlueTask, predictions) -> List[str]:
    """Predictions as GLUE's submission labels: the label string, or the STS-B score."""
    if task.is_regression:
        return [str(float(value)) for value in predictions]
    return [task.labels[int(value)] for value in predictions]


def write_eval_predictions(path: str, task: GlueTask, examples: Sequence[GlueExample], predictions) -> None:
    """`index\\tprediction\\tlabel` rows (with a header) for a dev set, so any metric can be recomputed."""
    labels = [example.label for example in examples]
    _write_tsv(path, ("index", "prediction", "label"),
               zip([example.guid for example in examples], prediction_strings(task, predictions),
                   [str(label) for label in labels]))


def write_submission(path: str, task: GlueTask, examples: Sequence[GlueExample], predictions) -> None:
    """A GLUE submission file: `index\\tprediction` rows with a header, labels as strings."""
    _write_tsv(path, ("index", "prediction"),
               zip([example.guid for example in examples], prediction_strings(task, predictions)))


def probabilities_file(task: GlueTask, predicted_task: GlueTask, split: str) -> str:
    """The original's `test_results.tsv` for the task's first test split; `test_results_<submission>.tsv` else.

    Example:
    >>> mnli = glue_data.get_task("MNLI")
    >>> [probabilities_file(mnli, mnli, split) for split in mnli.test_splits]
    ['test_results.tsv', 'test_results_MNLI-mm.tsv']
    >>> probabilities_file(mnli, glue_data.get_task("AX"), "test")
    'test_results_AX.tsv'
    """
    if predicted_task is task and split == task.test_splits[0]:
        return "test_results.tsv"
    return "test_results_" + predicted_task.submission_files[split]


def write_probabilities(path: str, task: GlueTask, outputs: Dict[str, np.ndarray]) -> None:
    """The original run_classifier's test_results.tsv: each example's class probabilities (STS-B: its score),
    tab separated, one line each, no header."""
    rows = outputs["predictions"][:, None] if task.is_regression else outputs["probabilities"]
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("".join("\t".join(str(value) for value in row) + "\n" for row in rows))


def _write_tsv(path, header, rows):
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("\t".join(header) + "\n")
        for row in rows:
            handle.write("\t".join(row) + "\n")


# ---- the task ------------------------------------------------------------------------------------

def _splits(task, options, finetuning_options, tokenizer):
    """DataSplits for training, evaluation and prediction, and the examples behind each, by split name."""
    examples = {}

    def load(glue_task, split, name=None, metric_suffix=""):
        split_examples, features = glue_data.load_split(
            glue_task, split, tokenizer, finetuning_options.max_seq_length,
            resolve_cached_dir(finetuning_options), data_dir=options.data_dir, use_tfds=options.use_tfds,
            tfds_data_dir=options.tfds_data_dir)
        name = name or split
        examples[name] = (glue_task, split, split_examples)
        label_counts = {} if glue_task.is_regression else count_labels(example.label for example in split_examples)
        return DataSplit(name, features.dataset, features.num_examples, metric_suffix, label_counts)

    train = load(task, "train") if finetuning_options.do_train else None
    evaluation = [load(task, split, metric_suffix="_mismatched" if split == "dev_mismatched" else "")
                  for split in (task.eval_splits if finetuning_options.do_eval else [])]
    prediction = [load(task, split) for split in (task.test_splits if finetuning_options.do_predict else [])]
    if finetuning_options.do_predict and task.name == "mnli":
        prediction.extend(_diagnostic_split(load, options))
    return train, evaluation, prediction, examples


def _diagnostic_split(load, options):
    """The AX diagnostic set, which GLUE scores with the MNLI model, when the data source has it."""
    ax = glue_data.get_task("ax")
    if not options.use_tfds and not tf.io.gfile.exists(glue_data.split_file(options.data_dir, ax, "test")):
        logging.warning("No %s: AX.tsv (predicted by the MNLI model) is not written.",
                        glue_data.split_file(options.data_dir, ax, "test"))
        return []
    try:
        return [load(ax, "test", name="ax_test")]
    except ValueError as error:
        logging.warning("AX.tsv (predicted by the MNLI model) is not written: %s", error)
        return []


def build_task(options: GlueOptions, finetuning_options: FinetuningOptions, tokenizer) -> FinetuningTask:
    """The FinetuningTask of a GLUE run, its splits loaded (and their features cached) as `finetuning_options` ask."""
    task = glue_data.get_task(options.task_name)
    train, evaluation, prediction, examples = _splits(task, options, finetuning_options, tokenizer)
    regression = task.is_regression

    def task_metrics(split, outputs):
        return compute_metrics(task, predictions_from_outputs(task, outputs), outputs["label_ids"])

    def task_eval_predictions(path, split, outputs):
        write_eval_predictions(path, task, examples[split.name][2], predictions_from_outputs(task, outputs))

    def task_predictions(output_dir, split, outputs):
        glue_task, glue_split, split_examples = examples[split.name]
        path = os.path.join(output_dir, glue_task.submission_files[glue_split])
        write_submission(path, glue_task, split_examples, predictions_from_outputs(task, outputs))
        write_probabilities(os.path.join(output_dir, probabilities_file(task, glue_task, glue_split)), task,
                            outputs)

    sequence = tf.TensorSpec([None, finetuning_options.max_seq_length], tf.int32)
    return FinetuningTask(
        name=task.name,
        build_model=lambda config, dropout_rate, recompute_blocks: AlbertClassifier(
            config, task.num_labels, dropout_rate, recompute_blocks=recompute_blocks),
        input_signature={"input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence},
        loss_fn=regression_loss_fn if regression else classification_loss_fn,
        predict_fn=regression_predict_fn if regression else classification_predict_fn,
        serving_fn=regression_serving_fn if regression else classification_serving_fn,
        compute_metrics=task_metrics, best_metric=best_metric(task),
        original_metric_names=original_metric_names(task), train_data=train, eval_splits=evaluation,
        predict_splits=prediction, write_eval_predictions=task_eval_predictions,
        write_predictions=task_predictions, raw_text_export=RawTextExport(len(task.tfds_text_features)),
        sequence_features=INPUT_NAMES)


def run_glue(options: GlueOptions) -> Dict[str, object]:
    """Fine-tunes, evaluates and predicts a GLUE task as `options` ask; returns `run_finetuning`'s results
    (with `num_trials` > 1, `multi_seed.run_trials`').

    A run stopped by SIGTERM raises checkpointing.TrainingPreempted once its checkpoint is saved; running it
    again resumes. See the module's docstring for an example.
    """
    finetuning_options = resolve_options(options)
    check_finetuning_options(finetuning_options, exports_raw_text=True)
    source = resolve_model_source(finetuning_options)
    return multi_seed.run_trials(build_task(options, finetuning_options, source.tokenizer), finetuning_options,
                                 source)
