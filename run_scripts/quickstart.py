"""`make demo`: ALBERT end to end on the built-in docstring corpus, in about ten minutes on 2 cores.

    python -m run_scripts.quickstart --output_dir=demo_output
    python -m run_scripts.quickstart --output_dir=my_run --input_file=my_corpus.txt --eval_input_file=my_eval.txt

1. Writes the corpus (the standard library's docstrings) and holds out a part for evaluation, unless
   --input_file / --eval_input_file point at your own text (one sentence per line, blank line between documents).
2. Trains a SentencePiece vocabulary and writes SOP pretraining shards (n-gram masking, as the original).
3. Pretrains a small ALBERT with LAMB, then evaluates on the held-out shards.
4. Prints masked_lm_accuracy and sentence_order_accuracy beside the trivial baselines.
"""

import dataclasses

from absl import app, flags

from albert_tf.tasks.quickstart import QuickstartOptions, run_quickstart, summary_text
from albert_tf.training import host_allocator
from run_scripts import entry
from run_scripts.training_flags import define_jit_compile_flag

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", "demo_output", "Everything the demo writes goes under this directory.")
flags.DEFINE_string("input_file", None, "Your own training text instead of the built-in corpus.")
flags.DEFINE_string("eval_input_file", None, "Your own held-out text (required with --input_file).")
flags.DEFINE_float("holdout_fraction", 0.1, "Share of the built-in corpus held out for evaluation.")
flags.DEFINE_integer("vocab_size", 5000, "SentencePiece vocabulary size.")
flags.DEFINE_integer("max_seq_length", 64, "Sequence length of the pretraining instances.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Masked positions per instance.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the training text, each with different masks.")
flags.DEFINE_integer("num_train_steps", 1200, "Pretraining steps.")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_float("learning_rate", 0.01, "Peak LAMB learning rate.")
flags.DEFINE_integer("num_workers", 2, "Processes writing the pretraining shards.")
flags.DEFINE_enum("mixed_precision", "float32", ["float32", "mixed_bfloat16"], "Dtype policy.")
define_jit_compile_flag()
flags.DEFINE_integer("seed", QuickstartOptions.seed, "Seed of the model's initialization and dropout (the "
                     "pretraining data stay the same).")


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    if FLAGS.input_file and not FLAGS.eval_input_file:
        raise app.UsageError("--input_file needs --eval_input_file, the held-out text to evaluate on.")
    options = QuickstartOptions(**{field.name: FLAGS[field.name].value
                                   for field in dataclasses.fields(QuickstartOptions)})
    print(summary_text(run_quickstart(options)))


if __name__ == "__main__":
    entry.run(main)
