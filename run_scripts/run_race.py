"""Fine-tunes ALBERT on RACE: python -m run_scripts.run_race --data_dir=race_data --output_dir=... --do_train

Reads RACE/{train,dev,test}/{middle,high}/*.txt (per-article files or the merged all.txt). Writes
eval_results.{txt,json} (accuracy, accuracy_middle, accuracy_high, loss; the .txt also under the original's
names eval_accuracy and eval_loss) and eval_predictions.tsv on dev; with --do_predict, test_predictions.tsv and
the test accuracies and loss in predict_results.{txt,json}.
"""

from absl import flags

from albert_tf.tasks.race import RaceOptions, run_race
from albert_tf.training import host_allocator
from run_scripts import entry, finetuning_flags, original_flags, training_flags

FLAGS = flags.FLAGS
_KEEP_CHECKPOINT_HINT = ("nothing to pass: the original never read it and kept every checkpoint, as "
                         "--eval_every_checkpoint does (--keep_checkpoint_max sets another number)")
finetuning_flags.define_finetuning_flags(learning_rate=1e-5, max_seq_length=512, train_step=12000, warmup_step=1000,
                                         save_checkpoints_steps=100, do_train=True, do_eval=True,
                                         original_flags={"train_file": original_flags.CACHED_FEATURES,
                                                         "eval_file": original_flags.CACHED_FEATURES,
                                                         "predict_file": original_flags.CACHED_FEATURES,
                                                         "task_name": "nothing to pass: run_race runs RACE",
                                                         "num_keep_checkpoint": _KEEP_CHECKPOINT_HINT})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("data_dir", None, "The directory holding RACE/ (or RACE/ itself).")
flags.DEFINE_integer("max_qa_length", 128, "Tokens kept from the end of each question + option.")
flags.DEFINE_bool("high_only", False, "Only the high-school questions.")
flags.DEFINE_bool("middle_only", False, "Only the middle-school questions.")
flags.mark_flag_as_required("data_dir")


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    training_flags.time_compile_paths_in_child_process("run_scripts.run_race")
    options = RaceOptions(finetuning_flags.finetuning_options(), data_dir=FLAGS.data_dir,
                          max_qa_length=FLAGS.max_qa_length, high_only=FLAGS.high_only, middle_only=FLAGS.middle_only)
    finetuning_flags.run(run_race, options)


if __name__ == "__main__":
    entry.run(main)
