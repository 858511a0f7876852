"""Pretraining ALBERT (MLM + SOP) with the shared Trainer, as the original run_pretraining.py does.

`run_pretraining` trains on TFRecords from create_pretraining_data and evaluates every checkpoint, as
`run_scripts.run_pretraining` does; `Pretraining` is the run itself, for callers that bring their own dataset
functions (the demo, albert_tf/tasks/quickstart.py). The records are read by data_gen.pretraining.input_pipeline.

Usage (it needs pretraining records, so it is not run here):

    from albert_tf import AlbertConfig
    from albert_tf.tasks.pretraining import PretrainingOptions, run_pretraining

    results = run_pretraining(AlbertConfig.from_preset("albert-base"), PretrainingOptions(
        output_dir="run", input_file="shards/train-*", train_batch_size=4096, do_train=True, do_eval=True))
    results["eval"]  # {'masked_lm_accuracy': ..., 'sentence_order_accuracy': ..., 'global_step': 125000, ...}
"""

import dataclasses
import functools
import json
import os
from typing import Callable, Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import formats, writing
from albert_tf.config import AlbertConfig
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.training.distribution import get_strategy
from albert_tf.training.metric_names import returns_metrics
from albert_tf.training.optimization import create_optimizer
from albert_tf.training.pretraining_losses import PRETRAINING_LOSS_METRICS, pretraining_loss, pretraining_metric_sums
from albert_tf.training.summaries import write_scalars
from albert_tf.training.trainer import Trainer
from albert_tf.training.training_settings import TrainingSettings, enable_determinism, set_mixed_precision
from data_gen.pretraining.input_pipeline import (damaged_shards, expand_file_pattern, framing_damage,
                                                 pretraining_dataset_fn)

BEST_METRIC = "masked_lm_accuracy"
EVAL_KEYS = ("loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy", "sentence_order_loss")

# dataset_fn(input_context, batch_size, skip_batches) -> tf.data.Dataset, the Trainer's protocol.
DatasetFn = Callable[[Optional[tf.distribute.InputContext], int, int], tf.data.Dataset]


@dataclasses.dataclass
class PretrainingOptions(TrainingSettings):
    """The original run_pretraining.py flags (same names and defaults) plus this project's additions.

    `input_file` is a glob or a comma-separated list of globs; evaluation reads `eval_input_file`, by default
    `input_file` as the original. `sentence_loss_weight` scales the SOP (or NSP) loss in the objective: 1, the
    original's sum, by default; 0 trains the masked LM alone.
    """

    output_dir: str
    input_file: Optional[str] = None
    eval_input_file: Optional[str] = None
    do_train: bool = True
    do_eval: bool = False
    init_checkpoint: Optional[str] = None
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    optimizer: str = "lamb"
    learning_rate: float = 0.00176
    poly_power: float = 1.0
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    start_warmup_step: int = 0
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    max_eval_steps: int = 100
    init_from_group0: bool = False
    gradient_accumulation_steps: int = 1
    log_every_steps: int = 100
    sentence_loss_weight: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if not self.sentence_loss_weight >= 0.0:
            raise ValueError(f"sentence_loss_weight={self.sentence_loss_weight} must be >= 0 (0 trains the masked "
                             "LM alone).")


def _pretraining_loss_fn(model, batch, sentence_loss_weight=1.0):
    return pretraining_loss(model(batch, training=True), batch, sentence_loss_weight=sentence_loss_weight)


def _pretraining_metrics_fn(model, batch):
    return pretraining_metric_sums(model(batch, training=False), batch)


def check_output_dir_config(output_dir: str, config: AlbertConfig) -> None:
    """Writes the config into output_dir, or checks it equals the one a previous run left there."""
    path = os.path.join(output_dir, formats.ALBERT_CONFIG_NAME)
    if tf.io.gfile.exists(path):
        previous = AlbertConfig.from_json_file(path).to_dict()
        current = config.to_dict()
        differing = sorted(key for key in set(previous) | set(current) if previous.get(key) != current.get(key))
        if differing:
            details = ", ".join(f"{key}: {previous.get(key)!r} there vs {current.get(key)!r} now" for key in differing)
            raise ValueError(f"{output_dir} holds a run of a different config ({details}); use a new --output_dir "
                             "or the same config.")
        return
    tf.io.gfile.makedirs(output_dir)
    config.to_json_file(path)


def check_first_batch(batch: Dict[str, tf.Tensor], config: AlbertConfig, source: str) -> None:
    """Fails before training when the data cannot fit the config (ids, types or lengths out of range)."""
    word_ids = batch["input_word_ids"].numpy()
    if word_ids.shape[1] > config.max_position_embeddings:
        raise ValueError(f"{source}: sequences of length {word_ids.shape[1]} exceed the config's "
                         f"max_position_embeddings={config.max_position_embeddings}.")
    if word_ids.max() >= config.vocab_size or word_ids.min() < 0:
        raise ValueError(f"{source}: token id {int(word_ids.max())} is outside the config's vocab_size="
                         f"{config.vocab_size}; was the data made with another vocabulary?")
    type_ids = batch["input_type_ids"].numpy()
    if type_ids.max() >= config.type_vocab_size:
        raise ValueError(f"{source}: token type id {int(type_ids.max())} is outside type_vocab_size="
                         f"{config.type_vocab_size}.")
    masked_ids = batch["masked_lm_ids"].numpy()
    if masked_ids.max() >= config.vocab_size:
        raise ValueError(f"{source}: masked_lm_ids holds id {int(masked_ids.max())} >= vocab_size="
                         f"{config.vocab_size}.")


def _eval_results_lines(results: Dict[str, float]) -> str:
    return "".join(f"{key} = {results[key]}\n" for key in sorted(results))


def _write_eval_results(output_dir: str, results: Dict[str, float], text: Optional[str] = None) -> None:
    """eval_results.json, and eval_results.txt holding `text` (by default the results' own lines)."""
    with tf.io.gfile.GFile(os.path.join(output_dir, "eval_results.txt"), "w") as handle:
        handle.write(_eval_results_lines(results) if text is None else text)
    with tf.io.gfile.GFile(os.path.join(output_dir, "eval_results.json"), "w") as handle:
        handle.write(json.dumps(results, indent=2, sort_keys=True) + "\n")


def _copy_checkpoint(checkpoint_path: str, destination_dir: str) -> str:
    """Copies a checkpoint (with its config) to destination_dir/ckpt-best.*, replacing the previous best."""
    if tf.io.gfile.exists(destination_dir):
        tf.io.gfile.rmtree(destination_dir)
    tf.io.gfile.makedirs(destination_dir)
    return writing.copy_checkpoint(checkpoint_path, os.path.join(destination_dir, "ckpt-best"))


class Pretraining:
    """Builds the strategy, model, optimizer and Trainer from options, then trains and evaluates.

    Example:
    >>> options = PretrainingOptions(output_dir="/tmp/albert_run", train_batch_size=8,
    ...                              num_train_steps=100, num_warmup_steps=10)  # doctest: +SKIP
    >>> run = Pretraining(AlbertConfig.from_preset("albert-base"), options)  # doctest: +SKIP
    >>> run.train(train_dataset_fn)  # doctest: +SKIP
    >>> run.evaluate_checkpoints(eval_dataset_fn)  # doctest: +SKIP
    """

    def __init__(self, config: AlbertConfig, options: PretrainingOptions):
        self.config = config
        self.options = options
        if options.deterministic:
            enable_determinism(options.seed)
        set_mixed_precision(options.mixed_precision)
        check_output_dir_config(options.output_dir, config)
        self.strategy = get_strategy(options.strategy, options.tpu)
        with self.strategy.scope():
            self.model = AlbertPretrainer(config, recompute_blocks=options.recompute_blocks)
            self.optimizer = create_optimizer(
                options.optimizer, options.learning_rate, options.num_train_steps, options.num_warmup_steps,
                start_warmup_step=options.start_warmup_step, poly_power=options.poly_power)
        self.trainer = Trainer(
            self.strategy, self.model, self.optimizer,
            returns_metrics(*PRETRAINING_LOSS_METRICS)(
                functools.partial(_pretraining_loss_fn, sentence_loss_weight=options.sentence_loss_weight)),
            model_dir=options.output_dir,
            steps_per_loop=options.steps_per_loop, jit_compile=options.jit_compile,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
            save_checkpoints_steps=options.save_checkpoints_steps, keep_checkpoint_max=options.keep_checkpoint_max,
            log_every_steps=options.log_every_steps, summary_dir=os.path.join(options.output_dir, "train"))

    def _initialize_from_checkpoint(self):
        if tf.train.latest_checkpoint(self.options.output_dir):
            return
        if not self.options.init_checkpoint:
            return
        from albert_tf.checkpoints.loading import load_weights

        logging.info("Initialising from %s", self.options.init_checkpoint)
        # Heads missing from the file (Hugging Face's albert-base-v2 has no SOP head) start fresh, with a warning.
        load_weights(self.model, self.options.init_checkpoint, format="auto", allow_missing_heads=True,
                     init_from_group0=self.options.init_from_group0)

    def train(self, dataset_fn: DatasetFn, source: str = "the training data") -> Dict[str, float]:
        """Trains to num_train_steps, resuming from output_dir; checks the first batch against the config."""
        cut_short = _files_cut_short(source)
        if cut_short:
            raise ValueError(f"The training data {_damage_text(cut_short)}: write the shard again, or leave it out of "
                             "--input_file.")
        try:
            check_first_batch(next(iter(dataset_fn(None, 2, 0))), self.config, source)
            self._initialize_from_checkpoint()
            return self.trainer.train(dataset_fn, self.options.num_train_steps, self.options.train_batch_size)
        except tf.errors.DataLossError as error:
            raise ValueError(_damaged_input_text(source, error, self.trainer.step, self.options.output_dir)) from None

    def evaluate_latest(self, dataset_fn: DatasetFn) -> Dict[str, float]:
        """The last checkpoint's metrics on dataset_fn, writing nothing: for further held-out sets."""
        path = tf.train.latest_checkpoint(self.options.output_dir)
        if not path:
            raise ValueError(f"No checkpoint to evaluate in {self.options.output_dir}; train first (--do_train).")
        self.trainer.restore(path)
        results = self.trainer.evaluate(dataset_fn, _pretraining_metrics_fn, self.options.eval_batch_size,
                                        max_steps=self.options.max_eval_steps)
        results["global_step"] = self.trainer.step
        return results

    def evaluate_checkpoints(self, dataset_fn: DatasetFn) -> Dict[str, float]:
        """Evaluates every checkpoint in output_dir in step order, as the original's eval loop (without
        waiting for new ones); keeps the best by masked_lm_accuracy in output_dir/best, lists every
        checkpoint's results in eval_results.txt (with the original's `saved ... to ...` line when the best
        changes) and TensorBoard (output_dir/eval), and the last checkpoint's in eval_results.json."""
        state = tf.train.get_checkpoint_state(self.options.output_dir)
        paths = list(state.all_model_checkpoint_paths) if state else []
        if not paths:
            raise ValueError(f"No checkpoint to evaluate in {self.options.output_dir}; train first (--do_train).")
        writer = tf.summary.create_file_writer(os.path.join(self.options.output_dir, "eval"))
        best_path = os.path.join(self.options.output_dir, "best")
        best_value = -np.inf
        best_file = os.path.join(best_path, "eval_results.json")
        if tf.io.gfile.exists(best_file):
            with tf.io.gfile.GFile(best_file) as handle:
                best_value = json.load(handle)[BEST_METRIC]
        results, text = {}, ""
        for path in paths:
            self.trainer.restore(path)
            results = self.trainer.evaluate(dataset_fn, _pretraining_metrics_fn, self.options.eval_batch_size,
                                            max_steps=self.options.max_eval_steps)
            results["global_step"] = self.trainer.step
            logging.info("Eval at step %d: %s", results["global_step"], results)
            with writer.as_default():
                write_scalars({key: results[key] for key in EVAL_KEYS}, step=results["global_step"])
            text += _eval_results_lines(results)
            if results[BEST_METRIC] > best_value:
                best_value = results[BEST_METRIC]
                text += f"saved {path} to {_copy_checkpoint(path, best_path)}\n"
                _write_eval_results(best_path, results)
        writer.flush()
        _write_eval_results(self.options.output_dir, results, text)
        return results


def _files_cut_short(source: str) -> Dict[str, str]:
    """{file: damage} for the TFRecord files of the pattern `source` whose framing is cut short (a reader takes a
    cut header for the end of the file, so they would train silently on fewer records); {} where `source`
    names no files."""
    try:
        files = expand_file_pattern(source)
    except (ValueError, FileNotFoundError):
        return {}
    return {path: damage for path in files for damage in [framing_damage(path)] if damage}


def _damage_text(damaged: Dict[str, str]) -> str:
    return "; ".join(f"{path} is damaged: {reason}" for path, reason in damaged.items())


def _what_is_damaged(source: str, error: tf.errors.DataLossError) -> str:
    """Which shard of `source` holds the damaged record `error` met (each read alone, since the interleaved reader
    does not say) and what is wrong with it."""
    try:
        damaged = damaged_shards(source)
    except (ValueError, FileNotFoundError):
        damaged = {}
    return (_damage_text(damaged) if damaged
            else f"{source} holds a damaged record ({error.message.strip().splitlines()[0]})")


def _damaged_input_text(source: str, error: tf.errors.DataLossError, step: int, output_dir: str) -> str:
    """One sentence on a training stopped by a damaged record: which shard, what is wrong, the step and what is
    kept."""
    what = _what_is_damaged(source, error)
    checkpoint = tf.train.latest_checkpoint(output_dir)
    kept = (f"its last checkpoint, {checkpoint}, is kept" if checkpoint else f"no checkpoint had been saved in "
            f"{output_dir} yet")
    return (f"The training data {what}. Training stopped at step {step} and {kept}: write the shard again, or "
            "leave it out of --input_file, and rerun to resume.")


def run_pretraining(config: AlbertConfig, options: PretrainingOptions) -> Dict[str, Dict[str, float]]:
    """Trains on `input_file` (with `do_train`), then evaluates every checkpoint (with `do_eval`).

    Returns {"train": the last step's loss and step} and {"eval": the last checkpoint's metrics}, for what ran.
    Training stopped by SIGTERM raises checkpointing.TrainingPreempted once its checkpoint is saved (rerunning
    resumes); a NaN or Inf loss raises checkpointing.NonFiniteLossError. See the module's docstring for an
    example.
    """
    if not options.do_train and not options.do_eval:
        raise ValueError("At least one of --do_train or --do_eval must be set.")
    eval_pattern = options.eval_input_file or options.input_file
    if (options.do_train or not eval_pattern) and not options.input_file:
        raise ValueError("Give --input_file, the pretraining TFRecords (a glob or a comma-separated list of globs).")
    run = Pretraining(config, options)
    lengths = dict(max_seq_length=options.max_seq_length, max_predictions_per_seq=options.max_predictions_per_seq)
    results = {}
    if options.do_train:
        results["train"] = run.train(pretraining_dataset_fn(options.input_file, is_training=True, seed=options.seed,
                                                            **lengths), source=options.input_file)
    if options.do_eval:
        try:
            results["eval"] = run.evaluate_checkpoints(pretraining_dataset_fn(eval_pattern, is_training=False,
                                                                              **lengths))
        except tf.errors.DataLossError as error:
            flag = "--eval_input_file" if options.eval_input_file else "--input_file"
            raise ValueError(f"The evaluation data {_what_is_damaged(eval_pattern, error)}: write the shard again, "
                             f"or leave it out of {flag}.") from None
        for key in sorted(results["eval"]):
            logging.info("  %s = %s", key, results["eval"][key])
    return results
