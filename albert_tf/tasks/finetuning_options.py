"""The options every fine-tuning task shares (`FinetuningOptions`), the checks they pass before a task reads or
writes anything (`check_finetuning_options`), and what follows from them: the feature cache's directory, the
training and warmup steps, the checkpoints kept.

Example:
>>> options = FinetuningOptions(output_dir="/tmp/squad", preset="albert-base", max_seq_length=384,
...                             train_step=None, num_train_epochs=2.0, warmup_proportion=0.1, do_train=True)
>>> check_finetuning_options(options)
>>> resolve_train_steps(options, num_train_examples=88000)
(5500, 550)
"""

import dataclasses
from typing import Optional

from albert_tf.tokenization import DEFAULT_DIGIT_COMMA_RULE
from albert_tf.training.distribution import STRATEGY_NAMES
from albert_tf.training.optimization import OPTIMIZER_NAMES
from albert_tf.training.training_settings import MIXED_PRECISION_POLICIES, TrainingSettings

# The checkpoints kept without --keep_checkpoint_max and --eval_every_checkpoint.
DEFAULT_CHECKPOINTS_KEPT = 5


@dataclasses.dataclass
class FinetuningOptions(TrainingSettings):
    """The fine-tuning flags the scripts share (run_scripts/finetuning_flags.py), with the original's names.

    The model's config, tokenizer and weights come from these options (albert_tf/tasks/model_source.py): the
    tokenizer is `spm_model_file` or `vocab_file`, else the SentencePiece model that comes with the weights;
    feature caches go to `cached_dir`, by default `output_dir`.

    Give `train_step` (with `warmup_step`) or `num_train_epochs` (with `warmup_proportion`); the original
    GLUE and RACE scripts count steps, its SQuAD scripts count epochs. `num_trials` is read by
    `multi_seed.run_trials`, which the tasks call; `run_finetuning` runs one trial.

    Example:
    >>> FinetuningOptions(output_dir="/tmp/mrpc", do_train=True).train_step
    1000
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
    # else DEFAULT_CHECKPOINTS_KEPT. 0 keeps every checkpoint.
    keep_checkpoint_max: Optional[int] = None
    eval_every_checkpoint: bool = False
    dropout_prob: float = 0.1
    export_dir: Optional[str] = None
    # The export takes raw strings (the preprocessor inside the SavedModel), for the classification tasks.
    with_preprocessing: bool = False
    # Every batch at max_seq_length, not cut to its longest member (albert_tf/tasks/dynamic_padding.py).
    pad_to_max_seq_length: bool = False
    # Training batches drawn from windows sorted by length (dynamic_padding.group_by_length): another order.
    group_by_length: bool = False
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


def check_finetuning_options(options: FinetuningOptions, exports_raw_text: bool = False) -> None:
    """Fails, naming the option, on options that no run can go ahead with, whatever its data: the tasks call it
    before they read or write anything. `exports_raw_text`: the task's model is a classifier that
    `with_preprocessing` can export behind its preprocessor.

    Example:
    >>> check_finetuning_options(FinetuningOptions("/tmp/mrpc", do_eval=True, eval_batch_size=0))
    Traceback (most recent call last):
    ...
    ValueError: --eval_batch_size must be a positive integer, got 0.
    """
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir):
        raise ValueError("Nothing to do: set at least one of --do_train, --do_eval, --do_predict or --export_dir.")
    if options.optimizer not in OPTIMIZER_NAMES:
        raise ValueError(f"Unknown --optimizer={options.optimizer!r}; allowed: {', '.join(OPTIMIZER_NAMES)}.")
    if options.mixed_precision not in MIXED_PRECISION_POLICIES:
        raise ValueError(f"Unknown --mixed_precision={options.mixed_precision!r}; allowed: "
                         f"{', '.join(MIXED_PRECISION_POLICIES)}.")
    if options.strategy not in STRATEGY_NAMES:
        raise ValueError(f"Unknown --strategy={options.strategy!r}; allowed: {', '.join(STRATEGY_NAMES)}.")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
                 "steps_per_loop"):
        if getattr(options, name) < 1:
            raise ValueError(f"--{name} must be a positive integer, got {getattr(options, name)}.")
    if options.keep_checkpoint_max is not None and options.keep_checkpoint_max < 0:
        raise ValueError(f"--keep_checkpoint_max must be 0 (keep every checkpoint) or a positive integer, got "
                         f"{options.keep_checkpoint_max}.")
    if not 0.0 <= options.dropout_prob < 1.0:
        raise ValueError(f"--dropout_prob must be in [0, 1), got {options.dropout_prob}.")
    if options.with_preprocessing and not options.export_dir:
        raise ValueError("--with_preprocessing puts the preprocessor in the --export_dir model; give --export_dir.")
    if options.with_preprocessing and not exports_raw_text:
        raise ValueError("--with_preprocessing exports a classifier of raw text, which run_glue and run_classifier "
                         "fine-tune; export this model without it and tokenize where it is served.")
    if options.with_preprocessing and options.vocab_file:
        raise ValueError("--with_preprocessing builds its preprocessor from a SentencePiece model; --vocab_file "
                         f"{options.vocab_file} is a WordPiece vocabulary.")
    if options.do_train:
        _check_training_length(options)


def _check_training_length(options: FinetuningOptions) -> None:
    """The checks of how long to train that need no count of the training examples."""
    if options.num_train_epochs is not None and options.train_step is not None:
        raise ValueError(f"Give train_step ({options.train_step}) or num_train_epochs "
                         f"({options.num_train_epochs}), not both.")
    if options.num_train_epochs is None and options.train_step is None:
        raise ValueError("Give train_step or num_train_epochs to say how long to train.")
    if options.warmup_proportion is not None and not 0.0 <= options.warmup_proportion <= 1.0:
        raise ValueError(f"warmup_proportion must be in [0, 1], got {options.warmup_proportion}.")


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
    _check_training_length(options)
    if options.num_train_epochs is not None:
        train_steps = int(num_train_examples / options.train_batch_size * options.num_train_epochs)
    else:
        train_steps = options.train_step
    if train_steps < 1:
        raise ValueError(f"Training would take {train_steps} steps ({num_train_examples} examples, batch "
                         f"{options.train_batch_size}, epochs {options.num_train_epochs}); it needs at least 1.")
    if options.warmup_proportion is not None:
        warmup_steps = int(train_steps * options.warmup_proportion)
    else:
        warmup_steps = options.warmup_step
    return train_steps, warmup_steps


def resolve_checkpoints_kept(options: FinetuningOptions) -> int:
    """--keep_checkpoint_max; by default every checkpoint with --eval_every_checkpoint (0), else 5.

    Example:
    >>> resolve_checkpoints_kept(FinetuningOptions("/tmp/rte", eval_every_checkpoint=True))
    0
    """
    if options.keep_checkpoint_max is not None:
        return options.keep_checkpoint_max
    return 0 if options.eval_every_checkpoint else DEFAULT_CHECKPOINTS_KEPT
