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
from run_scripts import entry
from run_scripts.original_flags import define_original_flags
from run_scripts.training_flags import (define_compute_flags, define_distribution_flags,
                                        recompute_blocks_from_flags)

FLAGS = flags.FLAGS
# The original run_pretraining.py flags, same names and defaults.
flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the model to pretrain.")
flags.DEFINE_string("input_file", None, "Input TFRecord files: a glob or a comma-separated list of globs.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, eval results and TensorBoard summaries go.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights: a TF1, Hugging Face or albert-tf checkpoint.")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the input records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.")
flags.DEFINE_bool("do_train", True, "Train (on by default, as in the original; --nodo_train with --do_eval only "
                  "evaluates).")
flags.DEFINE_bool("do_eval", False, "Evaluate every checkpoint in output_dir.")
flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 64, "Global evaluation batch size.")
flags.DEFINE_enum("optimizer", "lamb", ["lamb", "adamw"], "The optimizer.")
flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial decay.")
flags.DEFINE_integer("num_train_steps", 125000, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", 3125, "Linear warmup steps.")
flags.DEFINE_integer("start_warmup_step", 0, "The step warmup counts from.")
flags.DEFINE_integer("save_checkpoints_steps", 5000, "Checkpoint every this many steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept (the original's default); 0 keeps all.")
flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches per checkpoint.")
flags.DEFINE_bool("init_from_group0", False, "Initialise every group from group 0 of init_checkpoint.")
# Added by albert-tf.
flags.DEFINE_string("preset", None, "A named config instead of --albert_config_file, e.g. albert-base.")
flags.DEFINE_string("eval_input_file", None, "Evaluation TFRecords (default: --input_file, as the original).")
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Micro-batches per optimizer step.")
flags.DEFINE_integer("log_every_steps", 100, "Log loss, learning rate, throughput and ETA this often.")
flags.DEFINE_float("sentence_loss_weight", 1.0, "Weight of the SOP (or NSP) loss in the objective; 0 trains the "
                   "masked LM alone.")
define_compute_flags()
define_distribution_flags()
define_original_flags({"masked_lm_budget": "not supported: the original's masked_lm_budget mode was "
                                           "unfinished"})
flags.mark_flags_as_required(["input_file", "output_dir"])


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
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
