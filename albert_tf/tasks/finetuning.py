"""The fine-tuning driver shared by the GLUE, RACE and SQuAD tasks (albert_tf/tasks/glue.py, race.py, squad.py).

A task module describes its task as a `FinetuningTask` (how to build the model, its loss and prediction
functions, its data splits, how to score and write predictions) and hands it to `run_finetuning` with
the common `FinetuningOptions`. The driver builds the strategy and the model, loads `--init_checkpoint`
in any supported format (or starts from random weights with a warning), trains with the shared
Trainer on the original's schedule, evaluates the final checkpoint (or, with `eval_every_checkpoint`,
every checkpoint that exists, never waiting for new ones: google-research/albert#243), keeps the best
checkpoint by the task's metric in `output_dir/best/`, writes eval_results.txt / eval_results.json,
predicts, and exports a SavedModel with a serving signature.

Conventions for the batches the task's datasets yield: the model's inputs under their model names,
`label_ids` for labels and `example_index` (int32, position in the split) so that predictions are put
back in order whatever the distribution strategy.
"""

import dataclasses
import json
import os
import re
import uuid
from typing import Callable, Dict, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import formats, hub_module, loading, locating, writing
from albert_tf.config import AlbertConfig, load_config
from albert_tf.export.serving import export_saved_model
from albert_tf.tokenization import AlbertTokenizer, DEFAULT_DIGIT_COMMA_RULE
from albert_tf.training.distribution import get_strategy
from albert_tf.training.optimization import OPTIMIZER_NAMES, create_optimizer
from albert_tf.training.trainer import Trainer
from albert_tf.training.training_settings import TrainingSettings, enable_determinism, set_mixed_precision

BEST_DIR_NAME = "best"
BEST_CHECKPOINT_NAME = "ckpt-best"
EXAMPLE_INDEX = "example_index"
LABEL_IDS = "label_ids"
# Training examples are shuffled within this many (the original shuffled within 100).
MAX_SHUFFLE_BUFFER = 10000

Outputs = Dict[str, np.ndarray]


@dataclasses.dataclass
class DataSplit:
    """A split of a task: `dataset()` returns its examples as an unbatched, finite tf.data.Dataset.

    For training data, `num_examples` is the count that sets the steps of `num_train_epochs` (the
    original counts examples, not SQuAD's features); for evaluation and prediction data it must be the
    number of dataset elements, and predictions are checked against it. Metrics of an evaluation split get
    `metric_suffix` appended (MNLI's mismatched dev set: "_mismatched"), and its eval_predictions file too.

    Example:
    >>> split = DataSplit("dev", lambda: tf.data.Dataset.range(3).map(lambda i: {"example_index": i}), 3)
    >>> [int(row["example_index"]) for row in split.dataset()]
    [0, 1, 2]
    """

    name: str
    dataset: Callable[[], tf.data.Dataset]
    num_examples: int
    metric_suffix: str = ""


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


@dataclasses.dataclass
class FinetuningOptions(TrainingSettings):
    """The fine-tuning flags the scripts share (run_scripts/finetuning_flags.py), with the original's names.

    The tokenizer is `spm_model_file` or `vocab_file`, else the SentencePiece model that comes with the
    weights (`resolve_tokenizer`); feature caches go to `cached_dir`, by default `output_dir`.

    Give `train_step` (with `warmup_step`) or `num_train_epochs` (with `warmup_proportion`); the original
    GLUE and RACE scripts count steps, its SQuAD scripts count epochs. `num_trials` is read by
    `multi_seed.run_trials`, which the tasks call; `run_finetuning` runs one trial.

    Example:
    >>> options = FinetuningOptions(output_dir="/tmp/squad", preset="albert-base", max_seq_length=384,
    ...                             train_step=None, num_train_epochs=2.0, warmup_proportion=0.1, do_train=True)
    >>> resolve_train_steps(options, num_train_examples=88000)
    (5500, 550)
    """

    output_dir: str
    albert_config_file: Optional[str] = None
    preset: Optional[str] = None
    init_checkpoint: Optional[str] = None
    hub_module_handle: Optional[str] = None
    spm_model_file: Optional[str] = None
    vocab_file: Optional[str] = None
    do_lower_case: bool = True
    digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE
    cached_dir: Optional[str] = None
    max_seq_length: int = 512
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    optimizer: str = "adamw"
    train_step: Optional[int] = 1000
    warmup_step: int = 0
    num_train_epochs: Optional[float] = None
    warmup_proportion: Optional[float] = None
    save_checkpoints_steps: int = 1000
    # None: every checkpoint with eval_every_checkpoint (the original's fine-tuning scripts kept them all),
    # else the 5 most recent. 0 keeps every checkpoint.
    keep_checkpoint_max: Optional[int] = None
    eval_every_checkpoint: bool = False
    dropout_prob: float = 0.1
    export_dir: Optional[str] = None
    # Fine-tuning runs with seeds seed, seed + 1, ... in output_dir/trial-<k>/ (albert_tf/tasks/multi_seed.py).
    num_trials: int = 1

    def __post_init__(self):
        super().__post_init__()
        # Checked here, before a task loads its data for a run that cannot go ahead.
        if self.num_trials < 1:
            raise ValueError(f"--num_trials must be a positive integer, got {self.num_trials}.")
        if self.num_trials > 1 and not (self.do_train and self.do_eval):
            raise ValueError(f"--num_trials={self.num_trials} needs --do_train and --do_eval: the trials differ only "
                             "in the seed of training, and are compared by their dev metrics.")


# ---- loss and prediction functions shared by the classification-style tasks ------------------------

def model_inputs(batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The encoder inputs of a batch (input_word_ids, input_mask, input_type_ids)."""
    return {name: batch[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}


def softmax_cross_entropy(logits, labels):
    """Per-example -sum(one_hot(label) * log_softmax(logits)), the original's classification loss."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    one_hot = tf.one_hot(tf.cast(labels, tf.int32), depth=tf.shape(logits)[-1], dtype=tf.float32)
    return -tf.reduce_sum(one_hot * log_probs, axis=-1)


def classification_loss_fn(model, batch):
    """Mean softmax cross-entropy of `label_ids` (GLUE classification, RACE over its choices)."""
    logits = model(model_inputs(batch), training=True)
    correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(batch[LABEL_IDS], tf.int32))
    return (tf.reduce_mean(softmax_cross_entropy(logits, batch[LABEL_IDS])),
            {"accuracy": tf.reduce_mean(tf.cast(correct, tf.float32))})


def classification_predict_fn(model, batch):
    logits = tf.cast(model(model_inputs(batch), training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), LABEL_IDS: batch[LABEL_IDS],
            EXAMPLE_INDEX: batch[EXAMPLE_INDEX], "per_example_loss": softmax_cross_entropy(logits, batch[LABEL_IDS])}


def classification_serving_fn(model, inputs):
    logits = tf.cast(model(inputs, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}


def regression_loss_fn(model, batch):
    """Mean squared error of the single output against float `label_ids` (STS-B), as the original."""
    predictions = model(model_inputs(batch), training=True)[:, 0]
    return tf.reduce_mean(tf.square(predictions - tf.cast(batch[LABEL_IDS], tf.float32))), {}


def regression_predict_fn(model, batch):
    predictions = tf.cast(model(model_inputs(batch), training=False), tf.float32)[:, 0]
    labels = tf.cast(batch[LABEL_IDS], tf.float32)
    return {"predictions": predictions, LABEL_IDS: labels, EXAMPLE_INDEX: batch[EXAMPLE_INDEX],
            "per_example_loss": tf.square(predictions - labels)}


def regression_serving_fn(model, inputs):
    return {"predictions": tf.cast(model(inputs, training=False), tf.float32)[:, 0]}


# ---- options -------------------------------------------------------------------------------------

def resolve_config(options: FinetuningOptions) -> AlbertConfig:
    """The model config: --albert_config_file or --preset, else the one that comes with the weights.

    That is an albert_config.json beside --init_checkpoint or in --hub_module_handle's assets/, or a
    Hugging Face config.json; without either, the albert_config.json an earlier training run left in
    output_dir.
    """
    if options.albert_config_file or options.preset:
        config = load_config(options.albert_config_file, options.preset)
    elif options.hub_module_handle:
        module = hub_module.read_hub_module(options.hub_module_handle)
        config = module.config
        logging.info("Using the model config of the hub module %s.", module.encoder_dir)
    else:
        found = locating.find_config(options.init_checkpoint) if options.init_checkpoint else None
        trained_config_file = os.path.join(options.output_dir, formats.ALBERT_CONFIG_NAME)
        if found is None and tf.io.gfile.exists(trained_config_file):
            found = AlbertConfig.from_json_file(trained_config_file), trained_config_file
        if found is None:
            raise ValueError("Give --albert_config_file or --preset to define the model" + (
                f"; no config comes with {options.init_checkpoint}." if options.init_checkpoint else "."))
        config, config_file = found
        logging.info("Using the model config %s.", config_file)
    if options.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={options.max_seq_length} exceeds the model's max_position_embeddings="
                         f"{config.max_position_embeddings}: the model was only trained up to that length.")
    return config


def resolve_tokenizer(options: FinetuningOptions) -> AlbertTokenizer:
    """The tokenizer of --spm_model_file or --vocab_file, else the SentencePiece model that comes with
    --hub_module_handle (its assets/) or --init_checkpoint (beside it, as in the released tarballs)."""
    if options.spm_model_file or options.vocab_file:
        return AlbertTokenizer(spm_model_file=options.spm_model_file, vocab_file=options.vocab_file,
                               do_lower_case=options.do_lower_case, digit_comma_rule=options.digit_comma_rule)
    if options.hub_module_handle:
        module = hub_module.read_hub_module(options.hub_module_handle)
        logging.info("Using the SentencePiece model of the hub module %s.", module.spm_model_file)
        return AlbertTokenizer(spm_model_file=module.spm_model_file, do_lower_case=module.do_lower_case,
                               digit_comma_rule=options.digit_comma_rule)
    source = options.init_checkpoint
    if not source:
        raise ValueError("Give --spm_model_file (or --vocab_file) to tokenize the input.")
    models = [path for path in locating.find_vocab_files(source) if path.endswith(".model")]
    if len(models) != 1:
        raise ValueError(f"Found {len(models)} SentencePiece models with {source} ({models}), need exactly one; "
                         "give --spm_model_file.")
    logging.info("Using the SentencePiece model %s.", models[0])
    return AlbertTokenizer(spm_model_file=models[0], do_lower_case=options.do_lower_case,
                           digit_comma_rule=options.digit_comma_rule)


def resolve_cached_dir(options: FinetuningOptions) -> str:
    """--cached_dir, defaulting to --output_dir as the original.

    Example:
    >>> resolve_cached_dir(FinetuningOptions("/tmp/mrpc"))
    '/tmp/mrpc'
    """
    return options.cached_dir or options.output_dir


def resolve_train_steps(options: FinetuningOptions, num_train_examples: int):
    """(num_train_steps, num_warmup_steps) as the original computes them.

    With num_train_epochs: int(examples / train_batch_size * epochs) steps; with warmup_proportion:
    int(steps * proportion) warmup steps, else warmup_step.

    Example:
    >>> resolve_train_steps(FinetuningOptions("/tmp", num_train_epochs=2.0, warmup_proportion=0.1,
    ...                                       train_batch_size=32, train_step=None), 1000)
    (62, 6)
    """
    if options.num_train_epochs is not None:
        if options.train_step is not None:
            raise ValueError(f"Give train_step ({options.train_step}) or num_train_epochs "
                             f"({options.num_train_epochs}), not both.")
        train_steps = int(num_train_examples / options.train_batch_size * options.num_train_epochs)
    elif options.train_step is not None:
        train_steps = options.train_step
    else:
        raise ValueError("Give train_step or num_train_epochs to say how long to train.")
    if train_steps < 1:
        raise ValueError(f"Training would take {train_steps} steps ({num_train_examples} examples, batch "
                         f"{options.train_batch_size}, epochs {options.num_train_epochs}); it needs at least 1.")
    if options.warmup_proportion is not None:
        if not 0.0 <= options.warmup_proportion <= 1.0:
            raise ValueError(f"warmup_proportion must be in [0, 1], got {options.warmup_proportion}.")
        warmup_steps = int(train_steps * options.warmup_proportion)
    else:
        warmup_steps = options.warmup_step
    return train_steps, warmup_steps


def _check_options(task: FinetuningTask, options: FinetuningOptions):
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir):
        raise ValueError("Nothing to do: set at least one of --do_train, --do_eval, --do_predict or --export_dir.")
    if options.optimizer not in OPTIMIZER_NAMES:
        raise ValueError(f"Unknown --optimizer={options.optimizer!r}; allowed: {', '.join(OPTIMIZER_NAMES)}.")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
                 "steps_per_loop"):
        if getattr(options, name) < 1:
            raise ValueError(f"--{name} must be a positive integer, got {getattr(options, name)}.")
    if options.keep_checkpoint_max is not None and options.keep_checkpoint_max < 0:
        raise ValueError(f"--keep_checkpoint_max must be 0 (keep every checkpoint) or a positive integer, got "
                         f"{options.keep_checkpoint_max}.")
    if not 0.0 <= options.dropout_prob < 1.0:
        raise ValueError(f"--dropout_prob must be in [0, 1), got {options.dropout_prob}.")
    needed = {"do_train": task.train_data, "do_eval": task.eval_splits, "do_predict": task.predict_splits}
    for flag, data in needed.items():
        if getattr(options, flag) and not data:
            raise ValueError(f"--{flag} is set but task {task.name!r} was given no data for it.")


# ---- datasets ------------------------------------------------------------------------------------

def _train_dataset_fn(split: DataSplit, seed: int):
    buffer_size = max(1, min(split.num_examples, MAX_SHUFFLE_BUFFER))

    def dataset_fn(input_context, batch_size, skip_batches):
        data = split.dataset()
        if input_context is not None and input_context.num_input_pipelines > 1:
            data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        # A seeded shuffle that reshuffles each epoch deterministically, so skipping batches resumes exactly.
        data = data.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True).repeat()
        return data.batch(batch_size, drop_remainder=True).skip(skip_batches).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def _finite_dataset_fn(split: DataSplit):
    def dataset_fn(input_context, batch_size, skip_batches):
        data = split.dataset()
        if input_context is not None and input_context.num_input_pipelines > 1:
            data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return data.batch(batch_size).skip(skip_batches).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


# ---- the run -------------------------------------------------------------------------------------

def run_finetuning(task: FinetuningTask, options: FinetuningOptions) -> Dict[str, object]:
    """Trains, evaluates, predicts and exports as `options` ask; returns what it measured.

    The result has `eval` (the final checkpoint's metrics with `global_step`), `best` (the best
    checkpoint's, with `checkpoint`) and `prediction_checkpoint` (the weights predictions came from).

    Example:
    >>> task = FinetuningTask(name="mrpc", build_model=..., ...)  # doctest: +SKIP
    >>> run_finetuning(task, FinetuningOptions(output_dir="/tmp/mrpc", preset="albert-base",
    ...                                        init_checkpoint="albert_base/model.ckpt-best",
    ...                                        do_train=True, do_eval=True))["eval"]  # doctest: +SKIP
    {'accuracy': 0.86, 'f1': 0.90, 'loss': 0.41, 'global_step': 1000}
    """
    _check_options(task, options)
    tf.io.gfile.makedirs(options.output_dir)
    if options.deterministic:
        enable_determinism(options.seed)
    else:
        keras.utils.set_random_seed(options.seed)
    set_mixed_precision(options.mixed_precision)
    config = resolve_config(options)
    strategy = get_strategy(options.strategy, options.tpu)
    train_steps = warmup_steps = None
    if options.do_train:
        train_steps, warmup_steps = resolve_train_steps(options, task.train_data.num_examples)
        # Beside the checkpoints, so later runs, best/ and convert_checkpoint find the model's config.
        config.to_json_file(os.path.join(options.output_dir, formats.ALBERT_CONFIG_NAME))
    with strategy.scope():
        model = task.build_model(config, options.dropout_prob, options.recompute_blocks)
        model(_example_inputs(task.input_signature), training=False)
        _initialize_weights(model, options)
        optimizer = None
        if options.do_train:
            optimizer = create_optimizer(options.optimizer, options.learning_rate, train_steps, warmup_steps)
    trainer = Trainer(strategy, model, optimizer, task.loss_fn if options.do_train else None,
                      model_dir=options.output_dir, steps_per_loop=options.steps_per_loop,
                      jit_compile=options.jit_compile, save_checkpoints_steps=options.save_checkpoints_steps,
                      keep_checkpoint_max=_checkpoints_kept(options),
                      summary_dir=os.path.join(options.output_dir, "train"))
    results = {}
    if options.do_train:
        logging.info("Fine-tuning %s: %d examples, batch %d, %d steps (%d warmup), %s, learning rate %g.",
                     task.name, task.train_data.num_examples, options.train_batch_size, train_steps, warmup_steps,
                     options.optimizer, options.learning_rate)
        results["train"] = trainer.train(_train_dataset_fn(task.train_data, options.seed), train_steps,
                                         options.train_batch_size)
    best_checkpoint = None
    if options.do_eval:
        evaluation = _evaluate_checkpoints(trainer, task, options, train_steps)
        results.update(eval=evaluation["final"], best=evaluation["best"])
        best_checkpoint = evaluation["best"].get("checkpoint")
    if options.do_predict or options.export_dir:
        prediction_checkpoint = _prediction_checkpoint(options, best_checkpoint)
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
            outputs = _predict(trainer, split, options.predict_batch_size, task.predict_fn)
            task.write_predictions(options.output_dir, split, outputs)
            logging.info("Wrote the %s predictions of %d examples to %s.", split.name, split.num_examples,
                         options.output_dir)
    if options.export_dir:
        export_saved_model(model, task.input_signature, task.serving_fn, options.export_dir)
    return results


def _prediction_checkpoint(options, best_checkpoint):
    """This run's best checkpoint; else the last one if this run trained; else an earlier run's best/
    (the original always predicted with model.ckpt-best); else the last checkpoint; else None."""
    if best_checkpoint:
        return best_checkpoint
    latest = tf.train.latest_checkpoint(options.output_dir)
    earlier_best = os.path.join(options.output_dir, BEST_DIR_NAME, BEST_CHECKPOINT_NAME)
    if not options.do_train and tf.io.gfile.exists(earlier_best + ".index"):
        return earlier_best
    return latest


def _example_inputs(input_signature):
    return {name: tf.zeros([1 if size is None else size for size in spec.shape], spec.dtype)
            for name, spec in input_signature.items()}


def _initialize_weights(model, options):
    source = options.init_checkpoint or options.hub_module_handle
    if tf.train.latest_checkpoint(options.output_dir) and options.do_train:
        logging.info("%s holds a checkpoint: training resumes from it instead of %s.", options.output_dir,
                     source or "random initialisation")
        return
    if not source:
        logging.warning("No --init_checkpoint or --hub_module_handle: the model starts from RANDOM "
                        "initialisation (useful for tests and ablations, not for benchmark numbers).")
        return
    logging.info("Initialising %s from %s.", model.name, source)
    if options.init_checkpoint:
        loading.load_weights(model, source, format="auto", allow_missing_heads=True)
    else:
        hub_module.load_encoder_weights(model, source)


# ---- evaluation ----------------------------------------------------------------------------------

def _checkpoint_step(path):
    match = re.search(r"-(\d+)$", path)
    return int(match.group(1)) if match else 0


def _checkpoints_kept(options):
    if options.keep_checkpoint_max is not None:
        return options.keep_checkpoint_max
    return 0 if options.eval_every_checkpoint else 5


def _checkpoints_to_evaluate(options, train_steps):
    state = tf.train.get_checkpoint_state(options.output_dir)
    paths = [path for path in (state.all_model_checkpoint_paths if state else [])
             if tf.io.gfile.exists(path + ".index")]
    paths.sort(key=_checkpoint_step)
    if not options.eval_every_checkpoint:
        if len(paths) > 1:
            logging.info("Evaluating the latest of %d checkpoints, %s; --eval_every_checkpoint evaluates each and "
                         "keeps the best, as the original did.", len(paths), paths[-1])
        return paths[-1:]
    if train_steps and len(paths) < train_steps // options.save_checkpoints_steps:
        logging.warning("--eval_every_checkpoint evaluates the %d checkpoint(s) that still exist; "
                        "--keep_checkpoint_max=%d deleted the older ones (0 keeps them all, as the original did).",
                        len(paths), _checkpoints_kept(options))
    return paths


def _predict(trainer, split, batch_size, predict_fn) -> Outputs:
    outputs = trainer.predict(_finite_dataset_fn(split), predict_fn, batch_size)
    if not outputs:
        outputs = _empty_outputs(trainer.model, split, predict_fn)
    if EXAMPLE_INDEX in outputs:
        order = np.argsort(outputs[EXAMPLE_INDEX], kind="stable")
        outputs = {name: value[order] for name, value in outputs.items()}
    count = len(next(iter(outputs.values()))) if outputs else 0
    if count != split.num_examples:
        raise ValueError(f"Split {split.name!r} should hold {split.num_examples} examples but prediction "
                         f"returned {count}.")
    return outputs


def _empty_outputs(model, split, predict_fn) -> Outputs:
    """predict_fn's outputs with no rows, for a split without examples: a task writes the same files, just empty.

    An empty dataset runs no prediction step, so the names, dtypes and row shapes come from tracing one.
    """
    element_spec = _finite_dataset_fn(split)(None, 1, 0).element_spec
    traced = tf.function(lambda batch: predict_fn(model, batch), autograph=False).get_concrete_function(element_spec)
    return {name: np.zeros([0] + [size or 0 for size in tensor.shape[1:]], tensor.dtype.as_numpy_dtype)
            for name, tensor in traced.structured_outputs.items()}


def _evaluate_splits(trainer, task, options):
    """Metrics of every eval split (with their suffixes) and the raw outputs, for the loaded weights."""
    metrics, outputs_by_split = {}, []
    for split in task.eval_splits:
        outputs = _predict(trainer, split, options.eval_batch_size, task.predict_fn)
        split_metrics = dict(task.compute_metrics(split, outputs))
        if "per_example_loss" in outputs:
            split_metrics["loss"] = float(np.mean(outputs["per_example_loss"]))
        metrics.update({name + split.metric_suffix: float(value) for name, value in split_metrics.items()})
        outputs_by_split.append((split, outputs))
    if task.best_metric not in metrics:
        raise ValueError(f"Task {task.name!r} selects checkpoints by {task.best_metric!r}, which its metrics "
                         f"{sorted(metrics)} do not include.")
    return metrics, outputs_by_split


def with_original_names(metrics: Mapping[str, float], original_metric_names: Mapping[str, str]) -> Dict[str, float]:
    """`metrics` plus each metric that `original_metric_names` ({original: ours}) names, under its original name.

    Example:
    >>> with_original_names({"accuracy": 0.5, "loss": 0.7}, {"eval_accuracy": "accuracy", "eval_loss": "loss"})
    {'accuracy': 0.5, 'loss': 0.7, 'eval_accuracy': 0.5, 'eval_loss': 0.7}
    """
    return {**metrics, **{original: metrics[ours] for original, ours in original_metric_names.items()
                          if ours in metrics}}


def _evaluate_checkpoints(trainer, task, options, train_steps):
    paths = _checkpoints_to_evaluate(options, train_steps)
    if not paths:
        logging.warning("No checkpoint in %s: evaluating the initial weights (from --init_checkpoint, "
                        "--hub_module_handle or random) as global_step 0.", options.output_dir)
    text_path = os.path.join(options.output_dir, "eval_results.txt")
    final = best = None
    with tf.io.gfile.GFile(text_path, "w") as text:
        for path in paths or [None]:
            if path:
                trainer.restore(path)
            metrics, outputs_by_split = _evaluate_splits(trainer, task, options)
            metrics["global_step"] = _checkpoint_step(path) if path else 0
            logging.info("Eval of %s: %s", path or "the initial weights", metrics)
            # The original's `best` line holds the best value before this checkpoint (-1 at first).
            previous_best = best[1][task.best_metric] if best else -1
            final = (path, metrics, outputs_by_split)
            if best is None or metrics[task.best_metric] > best[1][task.best_metric]:
                best = final
            lines = with_original_names(metrics, task.original_metric_names)
            lines.update({f"best_{task.best_metric}": best[1][task.best_metric],
                          "best_global_step": best[1]["global_step"]})
            text.write("".join(f"{name} = {lines[name]}\n" for name in sorted(lines)))
            text.write(f"best = {previous_best}\n{'=' * 50}\n")
            text.flush()
    _write_json(os.path.join(options.output_dir, "eval_results.json"), final[1])
    _write_eval_predictions(task, options.output_dir, final[2])
    best_summary = dict(best[1])
    if best[0]:
        best_summary["checkpoint"] = _save_best(task, options.output_dir, best)
    return {"final": final[1], "best": best_summary}


def _write_eval_predictions(task, directory, outputs_by_split):
    if task.write_eval_predictions is None:
        return
    for split, outputs in outputs_by_split:
        name = f"eval_predictions{split.metric_suffix}.{task.eval_predictions_extension}"
        task.write_eval_predictions(os.path.join(directory, name), split, outputs)


def _save_best(task, output_dir, best):
    """Copies the best checkpoint, its metrics and its eval predictions into output_dir/best/, atomically."""
    path, metrics, outputs_by_split = best
    best_dir = os.path.join(output_dir, BEST_DIR_NAME)
    staging = os.path.join(output_dir, f".{BEST_DIR_NAME}.tmp-{uuid.uuid4().hex}")
    tf.io.gfile.makedirs(staging)
    writing.copy_checkpoint(path, os.path.join(staging, BEST_CHECKPOINT_NAME))
    with tf.io.gfile.GFile(os.path.join(staging, "checkpoint"), "w") as handle:
        handle.write(f'model_checkpoint_path: "{BEST_CHECKPOINT_NAME}"\n'
                     f'all_model_checkpoint_paths: "{BEST_CHECKPOINT_NAME}"\n')
    _write_json(os.path.join(staging, "eval_results.json"), dict(metrics, source_checkpoint=path))
    _write_eval_predictions(task, staging, outputs_by_split)
    if tf.io.gfile.exists(best_dir):
        tf.io.gfile.rmtree(best_dir)
    tf.io.gfile.rename(staging, best_dir)
    logging.info("Best checkpoint by %s: %s (%s) -> %s", task.best_metric, path, metrics[task.best_metric],
                 best_dir)
    return os.path.join(best_dir, BEST_CHECKPOINT_NAME)


def _write_json(path, values):
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(values, indent=2, sort_keys=True) + "\n")
