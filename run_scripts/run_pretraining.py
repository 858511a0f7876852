"""Pretrains ALBERT (MLM + SOP) on TFRecords from create_pretraining_data.

    python -m run_scripts.run_pretraining --input_file='shards/train-*' --output_dir=run \
        --preset=albert-base --train_batch_size=4096 --do_train --do_eval
"""

import sys

from absl import app, flags, logging

from albert_tf.config import load_config
from albert_tf.tasks.pretraining import PretrainingOptions, run_pretraining
from albert_tf.training import host_allocator
from albert_tf.training.checkpointing import NonFiniteLossError, TrainingPreempted
from albert_tf.training.optimization import OPTIMIZER_NAMES
from run_scripts import entry
from run_scripts.option_flags import define_option_flags
from run_scripts.original_flags import define_original_flags
from run_scripts.training_flags import (define_compute_flags, define_distribution_flags,
                                        recompute_blocks_from_flags, time_compile_paths_in_child_process)

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the model to pretrain.")
flags.DEFINE_string("preset", None, "A named config instead of --albert_config_file, e.g. albert-base.")
# The original run_pretraining.py flags, same names; their defaults are PretrainingOptions' (the original's).
define_option_flags(PretrainingOptions, {
    "input_file": "Input TFRecord files: a glob or a comma-separated list of globs.",
    "output_dir": "Where checkpoints, eval results and TensorBoard summaries go.",
    "init_checkpoint": "Initial weights: a TF1, Hugging Face or albert-tf checkpoint.",
    "max_seq_length": "Sequence length of the input records.",
    "max_predictions_per_seq": "Masked positions per record.",
    "do_train": "Train (on by default, as in the original; --nodo_train with --do_eval only evaluates).",
    "do_eval": "Evaluate every checkpoint in output_dir.",
    "train_batch_size": "Global training batch size.",
    "eval_batch_size": "Global evaluation batch size.",
    "optimizer": "The optimizer.",
    "learning_rate": "Peak learning rate.",
    "poly_power": "Power of the polynomial decay.",
    "num_train_steps": "Training steps.",
    "num_warmup_steps": "Linear warmup steps.",
    "start_warmup_step": "The step warmup counts from.",
    "save_checkpoints_steps": "Checkpoint every this many steps.",
    "keep_checkpoint_max": "Checkpoints kept (the original's default); 0 keeps all.",
    "max_eval_steps": "Evaluation batches per checkpoint.",
    "init_from_group0": "Initialise every group from group 0 of init_checkpoint.",
    # Added by albert-tf.
    "eval_input_file": "Evaluation TFRecords (default: --input_file, as the original).",
    "gradient_accumulation_steps": "Micro-batches per optimizer step.",
    "log_every_steps": "Log loss, learning rate, throughput and ETA this often.",
    "sentence_loss_weight": "Weight of the SOP (or NSP) loss in the objective; 0 trains the masked LM alone.",
}, defaults={"output_dir": None}, choices={"optimizer": OPTIMIZER_NAMES})
define_compute_flags()
define_distribution_flags()
define_original_flags({"masked_lm_budget": "not supported: the original's masked_lm_budget mode was "
                                           "unfinished"})
flags.mark_flags_as_required(["input_file", "output_dir"])


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    time_compile_paths_in_child_process("run_scripts.run_pretraining")
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise app.UsageError("At least one of --do_train or --do_eval must be set.")
    config = load_config(FLAGS.albert_config_file, FLAGS.preset)
    options = PretrainingOptions(**{field: getattr(FLAGS, field) for field in PretrainingOptions.__dataclass_fields__
                                    if field != "recompute_blocks"}, recompute_blocks=recompute_blocks_from_flags())
    try:
        run_pretraining(config, options)
    except TrainingPreempted as preempted:
        logging.warning("%s", preempted)
        sys.exit(0)
    except NonFiniteLossError as error:
        logging.error("%s", error)
        sys.exit(1)


if __name__ == "__main__":
    entry.run(main)
