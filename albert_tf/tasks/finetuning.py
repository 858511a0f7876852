"""The fine-tuning driver shared by the GLUE, RACE, SQuAD, NER and your-own-files tasks (albert_tf/tasks/).

A task module describes its task as a `FinetuningTask` (albert_tf/tasks/finetuning_task.py: how to build the model,
its loss and prediction functions, its data splits, how to score and write predictions) and hands it to
`run_finetuning` with the common `FinetuningOptions` (albert_tf/tasks/finetuning_options.py) and the `ModelSource`
it resolved before reading its data (albert_tf/tasks/model_source.py). The driver builds the strategy and the model,
loads the initial weights (or starts from random weights with a warning), trains with the shared Trainer on the
original's schedule, evaluates and keeps the best checkpoint (albert_tf/tasks/checkpoint_evaluation.py), predicts,
and exports a SavedModel with a serving signature (of token ids, or with `with_preprocessing` of raw text).
"""

import os
from typing import Dict, Optional

import keras
import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import formats
from albert_tf.export.serving import export_saved_model
from albert_tf.export.text_classifier import export_classifier_with_preprocessor
from albert_tf.tasks import checkpoint_evaluation, dynamic_padding
from albert_tf.tasks.finetuning_options import (FinetuningOptions, check_finetuning_options,
                                                resolve_checkpoints_kept, resolve_train_steps)
from albert_tf.tasks.finetuning_task import DataSplit, FinetuningTask
from albert_tf.tasks.model_source import ModelSource, resolve_model_source, resolve_tokenizer
from albert_tf.training.distribution import get_strategy
from albert_tf.training.optimization import create_optimizer
from albert_tf.training.trainer import Trainer
from albert_tf.training.training_settings import enable_determinism, set_mixed_precision

# Training examples are shuffled within this many (the original shuffled within 100).
MAX_SHUFFLE_BUFFER = 10000
# Fewer steps than this after warmup leave a fine-tuned model near its initial weights at fine-tuning rates: 18 steps
# (the defaults on 200 examples) end a two-class task below chance.
MIN_STEPS_AFTER_WARMUP = 100
SMALL_DATA_GUIDE = "docs/fine-tuning.md, \"Small datasets\""


def run_finetuning(task: FinetuningTask, options: FinetuningOptions,
                   source: Optional[ModelSource] = None) -> Dict[str, object]:
    """Trains, evaluates, predicts and exports as `options` ask; returns what it measured.

    The result has `eval` (the final checkpoint's metrics with `global_step`), `best` (the best
    checkpoint's, with `checkpoint`) and `prediction_checkpoint` (the weights predictions came from). `source` is
    what the task resolved before reading its data; without it the config and weights are resolved here.

    Example:
    >>> task = FinetuningTask(name="mrpc", build_model=..., ...)  # doctest: +SKIP
    >>> run_finetuning(task, FinetuningOptions(output_dir="/tmp/mrpc", preset="albert-base",
    ...                                        init_checkpoint="albert_base/model.ckpt-best",
    ...                                        do_train=True, do_eval=True))["eval"]  # doctest: +SKIP
    {'accuracy': 0.86, 'f1': 0.90, 'loss': 0.41, 'global_step': 1000}
    """
    check_finetuning_options(options, exports_raw_text=task.raw_text_export is not None)
    check_task_data(task, options)
    if source is None:
        # The task has tokenized its data already, or needs no tokenizer.
        source = resolve_model_source(options, with_tokenizer=False)
    config = source.config
    tf.io.gfile.makedirs(options.output_dir)
    if options.deterministic:
        enable_determinism(options.seed)
    else:
        keras.utils.set_random_seed(options.seed)
    set_mixed_precision(options.mixed_precision)
    strategy = get_strategy(options.strategy, options.tpu)
    train_steps = warmup_steps = None
    if options.do_train:
        train_steps, warmup_steps = resolve_train_steps(options, task.train_data.num_examples)
        # Beside the checkpoints, so later runs, best/ and convert_checkpoint find the model's config.
        config.to_json_file(os.path.join(options.output_dir, formats.ALBERT_CONFIG_NAME))
    with strategy.scope():
        # Dropout only acts in training; without it the model holds no dropout seed state, which a checkpoint
        # trained at another --dropout_prob (0: none) may lack.
        model = task.build_model(config, options.dropout_prob if options.do_train else 0.0, options.recompute_blocks)
        model(_example_inputs(task.input_signature), training=False)
        _initialize_weights(model, options, source)
        optimizer = None
        if options.do_train:
            optimizer = create_optimizer(options.optimizer, options.learning_rate, train_steps, warmup_steps)
    trainer = Trainer(strategy, model, optimizer, task.loss_fn if options.do_train else None,
                      model_dir=options.output_dir, steps_per_loop=options.steps_per_loop,
                      jit_compile=options.jit_compile, save_checkpoints_steps=options.save_checkpoints_steps,
                      keep_checkpoint_max=resolve_checkpoints_kept(options),
                      summary_dir=os.path.join(options.output_dir, "train"))
    results = {}
    trimmed = dynamic_padding.features_to_trim(task, options)
    if options.do_train:
        logging.info("%s", describe_training(task, options, train_steps, warmup_steps))
        warning = short_run_warning(options, train_steps, warmup_steps)
        if warning:
            logging.warning("%s", warning)
        dataset_fn = _train_dataset_fn(task.train_data, options.seed, trimmed, options.group_by_length)
        results["train"] = trainer.train(dataset_fn, train_steps, options.train_batch_size)
    best_checkpoint = None
    if options.do_eval:
        evaluation = checkpoint_evaluation.evaluate_checkpoints(trainer, task, options, train_steps)
        results.update(eval=evaluation["final"], best=evaluation["best"])
        best_checkpoint = evaluation["best"].get("checkpoint")
    if options.do_predict or options.export_dir:
        prediction_checkpoint = checkpoint_evaluation.prediction_checkpoint(options, best_checkpoint)
        if prediction_checkpoint:
            logging.info("Predicting and exporting with %s.", prediction_checkpoint)
            trainer.restore(prediction_checkpoint)
        else:
            logging.warning("No fine-tuned checkpoint in %s: predicting with the initial weights.",
                            options.output_dir)
        results["prediction_checkpoint"] = prediction_checkpoint
    if options.do_predict:
        for split in task.predict_splits:
            if not split.num_examples:
                logging.warning("The %s split holds no examples: its prediction files are written without rows.",
                                split.name)
            outputs = checkpoint_evaluation.predict_split(trainer, split, options.predict_batch_size,
                                                           dynamic_padding.prediction_function(task, trimmed),
                                                           trimmed)
            task.write_predictions(options.output_dir, split, outputs)
            logging.info("Wrote the %s predictions of %d examples to %s.", split.name, split.num_examples,
                         options.output_dir)
    if options.export_dir and options.with_preprocessing:
        _export_with_preprocessor(model, task, options, source)
    elif options.export_dir:
        export_saved_model(model, task.input_signature, task.serving_fn, options.export_dir)
    return results


def describe_training(task: FinetuningTask, options: FinetuningOptions, train_steps: int, warmup_steps: int) -> str:
    """The line that starts training: the examples (per label for a classification task), the steps and epochs
    they make, the warmup and the optimizer.

    Example:
    >>> task = FinetuningTask("topics", None, {}, None, None, None, "accuracy",
    ...                       train_data=DataSplit("train", None, 200, label_counts={"rain": 120, "sun": 80}))
    >>> for part in describe_training(task, FinetuningOptions("/tmp/topics", do_train=True), 18, 1).split(": "):
    ...     print(part)
    Fine-tuning topics on 200 training examples (rain 120, sun 80) in batches of 32
    18 steps (2.9 epochs), the first 1 warming up, adamw at learning rate 5e-05.
    """
    data = task.train_data
    per_label = ""
    if data.label_counts:
        per_label = " ({})".format(", ".join(f"{label} {count}" for label, count in data.label_counts.items()))
    epochs = train_steps * options.train_batch_size / max(data.num_examples, 1)
    return (f"Fine-tuning {task.name} on {data.num_examples} training examples{per_label}"
            f" in batches of {options.train_batch_size}: {train_steps} steps ({epochs:.1f} epochs), the first "
            f"{warmup_steps} warming up, {options.optimizer} at learning rate {options.learning_rate:g}.")


def short_run_warning(options: FinetuningOptions, train_steps: int, warmup_steps: int) -> Optional[str]:
    """A warning when training has fewer than MIN_STEPS_AFTER_WARMUP steps after warmup, else None.

    Example:
    >>> short_run_warning(FinetuningOptions("/tmp/topics", do_train=True), 1000, 100) is None
    True
    """
    after_warmup = train_steps - warmup_steps
    if after_warmup >= MIN_STEPS_AFTER_WARMUP:
        return None
    return (f"Only {after_warmup} training steps after warmup ({train_steps} in all): too few for the model to move "
            f"far from its initial weights at learning rate {options.learning_rate:g}. On a small training set, "
            f"train for more epochs in smaller batches, e.g. --num_train_epochs=20 --train_batch_size=16 "
            f"({SMALL_DATA_GUIDE}).")


def check_task_data(task: FinetuningTask, options: FinetuningOptions) -> None:
    """Fails, naming the option, when `options` ask for a split that `task` was given no data for."""
    needed = {"do_train": task.train_data, "do_eval": task.eval_splits, "do_predict": task.predict_splits}
    for flag, data in needed.items():
        if getattr(options, flag) and not data:
            raise ValueError(f"--{flag} is set but task {task.name!r} was given no data for it.")


def _export_with_preprocessor(model, task, options, source):
    # The weights already located (or the hub module already read) give the SentencePiece model beside them.
    tokenizer = source.tokenizer or resolve_tokenizer(options, source.checkpoint, source.hub_module)
    export_classifier_with_preprocessor(
        model, options.export_dir, tokenizer.spm_model_file, do_lower_case=tokenizer.do_lower_case,
        seq_length=options.max_seq_length, num_text_inputs=task.raw_text_export.num_text_inputs,
        digit_comma_rule=tokenizer.digit_comma_rule, multi_label=task.raw_text_export.multi_label)


def _example_inputs(input_signature):
    return {name: tf.zeros([1 if size is None else size for size in spec.shape], spec.dtype)
            for name, spec in input_signature.items()}


def _initialize_weights(model, options, source):
    if tf.train.latest_checkpoint(options.output_dir) and options.do_train:
        logging.info("%s holds a checkpoint: training resumes from it instead of %s.", options.output_dir,
                     source.weights or "random initialisation")
        return
    if source.weights is None:
        logging.warning("No --init_checkpoint or --hub_module_handle: the model starts from RANDOM "
                        "initialisation (useful for tests and ablations, not for benchmark numbers).")
        return
    logging.info("Initialising %s from %s.", model.name, source.weights)
    source.load_weights(model)


def _train_dataset_fn(split: DataSplit, seed: int, sequence_features=(), group_by_length=False):
    buffer_size = max(1, min(split.num_examples, MAX_SHUFFLE_BUFFER))

    def dataset_fn(input_context, batch_size, skip_batches):
        data = split.dataset()
        if input_context is not None and input_context.num_input_pipelines > 1:
            data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        # A seeded shuffle that reshuffles each epoch deterministically, so skipping batches resumes exactly.
        data = data.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True).repeat()
        if group_by_length:
            data = dynamic_padding.group_by_length(data, batch_size)
        else:
            data = data.batch(batch_size, drop_remainder=True)
        data = data.skip(skip_batches)
        if sequence_features:
            data = data.map(lambda batch: dynamic_padding.trim_to_longest(batch, sequence_features))
        return data.prefetch(tf.data.AUTOTUNE)

    return dataset_fn
