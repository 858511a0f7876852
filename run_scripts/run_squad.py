"""Fine-tunes ALBERT on SQuAD v1.1 or (with --version_2_with_negative) v2.0.

    python -m run_scripts.run_squad --preset=albert-base --init_checkpoint=albert_base \\
        --spm_model_file=albert_base/30k-clean.model --train_file=train-v2.0.json \\
        --predict_file=dev-v2.0.json --version_2_with_negative --do_train --do_eval --output_dir=out

--train_file / --predict_file take the official SQuAD JSON, or `tfds:squad/v1.1:<split>` /
`tfds:squad/v2.0:<split>` for tensorflow-datasets prepared locally. --do_eval scores --predict_file with
the official EM/F1 and writes eval_results.{txt,json}, predictions.json, nbest_predictions.json and
(v2.0) null_odds.json; --do_predict writes the same prediction files for --predict_file (answers not
needed) from the best checkpoint, and when the file has answers scores them too (predict_results.json),
as the original's --do_predict did.

v2.0 answers a question when its null odds (the answer-class logit) is <= --null_score_diff_threshold
(default 0.0, i.e. P(no answer) <= 0.5), or the threshold that maximises F1 on
--null_threshold_search_file, a labelled split other than the one evaluated. The official script's
search for the best threshold on the evaluated split itself, run on every question's best non-null
answer (as the original's first pass; the official script run on predictions.json, which is already
thresholded, can find less), is written as oracle_best_f1(_thresh), and
the numbers the original run_squad_v2.py reports (that threshold applied with its strict `<`, then the
official script's na_prob_thresh of 1.0) as original_exact_match, original_f1 and
original_null_score_diff_threshold: both are tuned on the split they score.
"""

import dataclasses

from absl import flags

from albert_tf.tasks.squad import SquadOptions, run_squad
from albert_tf.training import host_allocator
from run_scripts import entry, finetuning_flags, original_flags, training_flags

FLAGS = flags.FLAGS
finetuning_flags.define_finetuning_flags(max_seq_length=384, num_train_epochs=3.0,
                                         warmup_proportion=0.1,
                                         original_flags={"train_feature_file": original_flags.CACHED_FEATURES,
                                                         "predict_feature_file": original_flags.CACHED_FEATURES,
                                                         "predict_feature_left_file": original_flags.CACHED_FEATURES,
                                                         "use_einsum": original_flags.NO_EINSUM_CHOICE})
# --help lists the shared flags with the script's own.
flags.adopt_module_key_flags(finetuning_flags)
flags.DEFINE_string("train_file", None, "SQuAD JSON for training (train-v1.1.json), or tfds:squad/<v>:<split>.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to evaluate / predict (dev-v1.1.json), or "
                    "tfds:squad/<v>:<split>.")
flags.DEFINE_string("tfds_data_dir", None, "tensorflow-datasets data_dir for tfds: sources (default: its own).")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer (the v2 head).")
flags.DEFINE_integer("doc_stride", 128, "Pieces between the starts of two document spans.")
flags.DEFINE_integer("max_query_length", 64, "Questions are cut to their first this many pieces.")
flags.DEFINE_integer("n_best_size", 20, "Answers per question in nbest_predictions.json (and v1's start/end "
                     "candidates per span).")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
flags.DEFINE_integer("start_n_top", 5, "v2.0: beam of start positions.")
flags.DEFINE_integer("end_n_top", 5, "v2.0: beam of end positions per start.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: answer a question when its null odds (answer-class logit) is <= this.")
flags.DEFINE_string("null_threshold_search_file", None,
                    "v2.0: a labelled SQuAD v2.0 split (file or tfds: source, not --predict_file) on which the "
                    "threshold that maximises F1 is found and then used instead of --null_score_diff_threshold.")


def squad_options() -> SquadOptions:
    """SquadOptions from the parsed flags."""
    return SquadOptions(finetuning_flags.finetuning_options(),
                        **{field.name: FLAGS[field.name].value for field in dataclasses.fields(SquadOptions)
                           if field.name != "finetuning"})


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    training_flags.time_compile_paths_in_child_process("run_scripts.run_squad")
    finetuning_flags.run(run_squad, squad_options())


if __name__ == "__main__":
    entry.run(main)
