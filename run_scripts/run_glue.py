"""Fine-tunes ALBERT on a GLUE task: python -m run_scripts.run_glue --task_name=MRPC --data_dir=glue_data ...

Reads the GLUE data directory (the original file layout) or, with --tfds, tensorflow-datasets glue/<task>
prepared locally. Writes eval_results.{txt,json} (the .txt also under the original run_classifier's names,
e.g. eval_accuracy) and eval_predictions.tsv (dev), and with --do_predict the
GLUE submission file(s) (e.g. MRPC.tsv; MNLI writes MNLI-m.tsv, MNLI-mm.tsv and, when the diagnostic
data is there, AX.tsv) and, as the original, test_results.tsv with each test example's class probabilities
(test_results_MNLI-mm.tsv and test_results_AX.tsv for MNLI's others).
"""

from absl import flags

from albert_tf.tasks.glue import GlueOptions, run_glue
from albert_tf.training import host_allocator
from data_gen.readers import glue
from run_scripts import entry, finetuning_flags, training_flags

FLAGS = flags.FLAGS
finetuning_flags.define_finetuning_flags(
    original_flags={"threshold_to_export": "not supported: the exported classifier serves its logits; apply a "
                                           "threshold to them where it is served"})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("task_name", None, f"The GLUE task: {', '.join(glue.GLUE_TASKS)} (case-insensitive).")
flags.DEFINE_string("data_dir", None, "The GLUE data directory (CoLA/, MRPC/, MNLI/, diagnostic/, ...).")
flags.DEFINE_bool("tfds", False, "Read tensorflow-datasets glue/<task> (prepared locally) instead of --data_dir.")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data_dir (default: its own default).")
flags.DEFINE_bool("use_paper_hparams", False,
                  "Use run_glue.sh's learning rate, steps, warmup, checkpoint interval and batch size for the "
                  "task, and evaluate every checkpoint as the original run_classifier did (flags given "
                  "explicitly still win). One seed: the paper reports the median over 5 runs for the GLUE sets "
                  "with a large dev variance, without naming them (BUILD_NOTES.md); add --num_trials=5 for that.")
flags.mark_flag_as_required("task_name")


def glue_options() -> GlueOptions:
    """GlueOptions from the parsed flags; the fine-tuning flags given explicitly win over --use_paper_hparams."""
    return GlueOptions(finetuning_flags.finetuning_options(), task_name=FLAGS.task_name, data_dir=FLAGS.data_dir,
                       use_tfds=FLAGS.tfds, tfds_data_dir=FLAGS.tfds_data_dir,
                       use_paper_hparams=FLAGS.use_paper_hparams,
                       explicit_options=finetuning_flags.explicit_options())


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    training_flags.time_compile_paths_in_child_process("run_scripts.run_glue")
    finetuning_flags.run(run_glue, glue_options())


if __name__ == "__main__":
    entry.run(main)
