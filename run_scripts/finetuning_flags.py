"""absl flags shared by run_glue, run_race and run_squad, and their conversion to FinetuningOptions.

A script calls `define_finetuning_flags(...)` at import with its own defaults (the original scripts'),
defines its task flags, and in main() calls `finetuning_options()`, builds its task's options and hands them to
`run` with the task's function (albert_tf.tasks).
"""

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional

from absl import app, flags, logging

from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.training.checkpointing import TrainingPreempted
from albert_tf.training.optimization import OPTIMIZER_NAMES
from run_scripts.option_flags import define_option_flags
from run_scripts.original_flags import define_original_flags
from run_scripts.tokenizer_flags import define_digit_comma_rule_flag
from run_scripts.training_flags import define_compute_flags, define_distribution_flags, recompute_blocks_from_flags

FLAGS = flags.FLAGS


def define_finetuning_flags(*, original_flags: Optional[Mapping[str, str]] = None, **script_defaults) -> None:
    """Defines the shared flags, defaulting to FinetuningOptions' values except where the calling script's
    original had others (`script_defaults`, e.g. `learning_rate=1e-5`).

    A script whose original counted epochs (`num_train_epochs`) has no default step count. `original_flags`
    ({name: what to do instead}) are the calling script's original flags that albert-tf refuses by name, besides
    the TPU flags and --albert_hub_module_handle that all of them had.
    """
    if "num_train_epochs" in script_defaults:
        script_defaults.setdefault("train_step", None)
    define_option_flags(FinetuningOptions, {
        "albert_config_file": "albert_config.json of the model (or give --preset).",
        "preset": "A named config instead of --albert_config_file, e.g. albert-base.",
        "init_checkpoint": "Weights to start from, in any supported format: an original TF1 checkpoint, one of "
                           "ours, Hugging Face safetensors. Without it (and --hub_module_handle) training starts "
                           "from random weights.",
        "hub_module_handle": "An exported encoder SavedModel directory to start from.",
        "spm_model_file": "The SentencePiece model (30k-clean.model).",
        "vocab_file": "A WordPiece vocabulary instead of --spm_model_file (Chinese models).",
        "do_lower_case": "Lowercase the input text (uncased models).",
        "max_seq_length": "Tokens per sequence after [CLS]/[SEP] and padding.",
        "output_dir": "Checkpoints, eval results and predictions go here.",
        "cached_dir": "Where feature caches are kept (default: --output_dir).",
        "do_train": "Fine-tune on the training split.",
        "do_eval": "Evaluate on the dev split.",
        "do_predict": "Write predictions for the test split.",
        "train_batch_size": "Global training batch size.",
        "eval_batch_size": "Global evaluation batch size.",
        "predict_batch_size": "Global prediction batch size.",
        "learning_rate": "Peak learning rate (after warmup, before linear decay).",
        "train_step": "Training steps (or give --num_train_epochs).",
        "warmup_step": "Linear warmup steps (or give --warmup_proportion).",
        "num_train_epochs": "Epochs over the training examples, instead of --train_step.",
        "warmup_proportion": "Fraction of the steps used for warmup, instead of --warmup_step.",
        "optimizer": "The original's AdamW or LAMB.",
        "save_checkpoints_steps": "Save a checkpoint every this many steps.",
        "keep_checkpoint_max": "How many recent checkpoints to keep; 0 keeps all. Default: all with "
                               "--eval_every_checkpoint (the original kept every one and searched them for the "
                               "best), else 5.",
        "eval_every_checkpoint": "Evaluate every checkpoint that exists after training (not only the last), "
                                 "keeping the best.",
        "dropout_prob": "Dropout on the task head's input, the pooled output (the sequence output for run_ner), "
                        "as the original's 0.1.",
        "export_dir": "Export the fine-tuned model here as a SavedModel (serving_default).",
        "pad_to_max_seq_length": "Pad every batch to --max_seq_length (fixed shapes) rather than to its longest "
                                 "example rounded up to a power of two (a TPU and SQuAD v1.1 always "
                                 "pad). The results are the same to float rounding.",
        "group_by_length": "Train on batches of examples of similar length (each window of 50 batches of the "
                           "shuffled data sorted by length, as Hugging Face's group_by_length), so that less is "
                           "padded. The examples come in another order, so training follows another trajectory.",
        "with_preprocessing": "With --export_dir (run_glue, run_classifier): the SavedModel takes raw strings "
                              "(text_a, and text_b for pairs) and holds its SentencePiece preprocessor; load it "
                              "with `import tensorflow_text`.",
        "num_trials": "Fine-tune this many times, trial k (0-based) with seed --seed + k in "
                      "--output_dir/trial-<k>/, and report each trial and the median, mean and std of every "
                      "metric in --output_dir/eval_results.json; best/, the predictions and --export_dir come "
                      "from the trial with the best dev metric. Finished trials are kept when rerun. Needs "
                      "--do_train and --do_eval.",
    }, defaults={"output_dir": None, **script_defaults}, choices={"optimizer": OPTIMIZER_NAMES})
    define_digit_comma_rule_flag()
    define_compute_flags()
    define_distribution_flags()
    define_original_flags({"albert_hub_module_handle": "pass --hub_module_handle (an export of "
                           "run_scripts.export_to_tfhub) or, for an original TF1 hub module, --init_checkpoint",
                           **(original_flags or {})})
    flags.mark_flag_as_required("output_dir")


def _exclusive(first, second):
    """Values of two alternative flags: the one given on the command line wins over the other's default."""
    if FLAGS[first].present and FLAGS[second].present:
        raise app.UsageError(f"Give --{first} or --{second}, not both.")
    if FLAGS[first].present:
        return FLAGS[first].value, None
    if FLAGS[second].present:
        return None, FLAGS[second].value
    return FLAGS[first].value, FLAGS[second].value


def finetuning_options() -> FinetuningOptions:
    """FinetuningOptions from the parsed flags."""
    train_step, num_train_epochs = _exclusive("train_step", "num_train_epochs")
    warmup_step, warmup_proportion = _exclusive("warmup_step", "warmup_proportion")
    names = [field.name for field in dataclasses.fields(FinetuningOptions)]
    values = {name: FLAGS[name].value for name in names}
    values.update(train_step=train_step, num_train_epochs=num_train_epochs, warmup_step=warmup_step or 0,
                  warmup_proportion=warmup_proportion,
                  recompute_blocks=recompute_blocks_from_flags())
    return FinetuningOptions(**values)


def explicit_options() -> List[str]:
    """The FinetuningOptions fields whose flags the command line gave (they win over run_glue.sh's values)."""
    return [field.name for field in dataclasses.fields(FinetuningOptions) if FLAGS[field.name].present]


def run(run_task: Callable[[object], Dict[str, object]], task_options) -> None:
    """Runs `run_task(task_options)` (e.g. run_glue); a preempted run (SIGTERM) exits cleanly, to resume when
    rerun."""
    try:
        results = run_task(task_options)
    except TrainingPreempted as preempted:
        logging.warning("%s", preempted)
        return
    logging.info("Done: %s", results)
