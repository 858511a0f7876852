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
from run_scripts.option_flags import define_option_flags
from run_scripts.training_flags import define_jit_compile_flag

FLAGS = flags.FLAGS
define_option_flags(QuickstartOptions, {
    "output_dir": "Everything the demo writes goes under this directory.",
    "input_file": "Your own training text instead of the built-in corpus.",
    "eval_input_file": "Your own held-out text (required with --input_file).",
    "holdout_fraction": "Share of the built-in corpus held out for evaluation.",
    "vocab_size": "SentencePiece vocabulary size.",
    "max_seq_length": "Sequence length of the pretraining instances.",
    "max_predictions_per_seq": "Masked positions per instance.",
    "dupe_factor": "Passes over the training text, each with different masks.",
    "num_train_steps": "Pretraining steps.",
    "train_batch_size": "Global training batch size.",
    "learning_rate": "Peak LAMB learning rate.",
    "num_workers": "Processes writing the pretraining shards.",
    "mixed_precision": "Dtype policy.",
    "seed": "Seed of the model's initialization and dropout (the pretraining data stay the same).",
}, choices={"mixed_precision": ["float32", "mixed_bfloat16"]})
define_jit_compile_flag()

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
