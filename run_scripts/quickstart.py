"""`make demo`: ALBERT end to end on the built-in docstring corpus, in about ten minutes on 2 cores.

    python -m run_scripts.quickstart --output_dir=demo_output
    python -m run_scripts.quickstart --output_dir=my_run --input_file=my_corpus.txt --eval_input_file=my_eval.txt

1. Writes the corpus (the standard library's docstrings) and holds out a part for evaluation, unless
   --input_file / --eval_input_file point at your own text (one sentence per line, blank line between documents).
2. Trains a SentencePiece vocabulary and writes SOP pretraining shards (n-gram masking, as the original).
3. Pretrains a small ALBERT with LAMB, then evaluates on the held-out shards.
4. Prints masked_lm_accuracy and sentence_order_accuracy beside the trivial baselines.
"""

import json
import os
import time

from absl import app, flags, logging

from albert_tf.config import AlbertConfig
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions
from albert_tf.tokenization import AlbertTokenizer
from albert_tf.training import host_allocator
from data_gen import build_vocab, corpora
from data_gen.create_pretraining_data import create_pretraining_data, output_shard_paths
from data_gen.pretraining_input import masked_lm_majority_baseline, pretraining_dataset_fn

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
flags.DEFINE_bool("jit_compile", True, "Compile the training step with XLA.")
flags.DEFINE_integer("seed", PretrainingOptions.seed, "Seed of the model's initialization and dropout (the "
                     "pretraining data stay the same).")

DEMO_MODEL = dict(embedding_size=128, hidden_size=192, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=768, max_position_embeddings=512, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, share_type="all")


def _stage(number, title):
    logging.info("=" * 20 + " %d. %s " + "=" * 20, number, title)
    return time.time()


def _corpus_files(output_dir):
    if FLAGS.input_file:
        if not FLAGS.eval_input_file:
            raise app.UsageError("--input_file needs --eval_input_file, the held-out text to evaluate on.")
        return FLAGS.input_file, FLAGS.eval_input_file
    train_path = os.path.join(output_dir, "corpus", "train.txt")
    eval_path = os.path.join(output_dir, "corpus", "eval.txt")
    stats = corpora.write_corpus(train_path, holdout_fraction=FLAGS.holdout_fraction, holdout_path=eval_path)
    logging.info("Built-in corpus: %s", stats)
    return train_path, eval_path


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    output_dir = os.path.abspath(FLAGS.output_dir)
    logging.info("Writing everything under %s", output_dir)
    started = time.time()

    _stage(1, "corpus")
    train_text, eval_text = _corpus_files(output_dir)

    _stage(2, "vocabulary and pretraining shards")
    spm_model = build_vocab.train_sentencepiece(build_vocab.expand_input_files(train_text),
                                                os.path.join(output_dir, "vocab", "spm"),
                                                vocab_size=FLAGS.vocab_size)
    data_dir = os.path.join(output_dir, "data")
    shapes = dict(max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq)
    train_shards = output_shard_paths(os.path.join(data_dir, "train.tfrecord"), FLAGS.num_workers)
    eval_shards = output_shard_paths(os.path.join(data_dir, "eval.tfrecord"), 1)
    create_pretraining_data(train_text, train_shards, spm_model, dupe_factor=FLAGS.dupe_factor,
                            num_workers=FLAGS.num_workers, **shapes)
    create_pretraining_data(eval_text, eval_shards, spm_model, dupe_factor=2, random_seed=54321, **shapes)

    _stage(3, "pretraining")
    config = AlbertConfig(vocab_size=FLAGS.vocab_size, **DEMO_MODEL)
    logging.info("Model config:\n%s", config.to_json_string())
    model_dir = os.path.join(output_dir, "model")
    options = PretrainingOptions(
        output_dir=model_dir, train_batch_size=FLAGS.train_batch_size, eval_batch_size=64,
        learning_rate=FLAGS.learning_rate, num_train_steps=FLAGS.num_train_steps,
        num_warmup_steps=FLAGS.num_train_steps // 10, save_checkpoints_steps=FLAGS.num_train_steps,
        max_eval_steps=1000, steps_per_loop=10, log_every_steps=20, jit_compile=FLAGS.jit_compile,
        mixed_precision=FLAGS.mixed_precision, seed=FLAGS.seed, **shapes)
    run = Pretraining(config, options)
    run.train(pretraining_dataset_fn(",".join(train_shards), is_training=True, seed=1, **shapes),
              source=train_shards[0])

    _stage(4, "evaluation on the held-out text")
    results = run.evaluate_checkpoints(pretraining_dataset_fn(",".join(eval_shards), is_training=False, **shapes))
    baseline = masked_lm_majority_baseline(",".join(train_shards), ",".join(eval_shards), **shapes)
    baseline["piece"] = AlbertTokenizer(spm_model_file=spm_model).convert_ids_to_tokens([baseline["token_id"]])[0]
    table = [
        "| metric (held-out) | ALBERT | trivial baseline |",
        "|---|---|---|",
        f"| masked_lm_accuracy | {results['masked_lm_accuracy']:.3f} | {baseline['accuracy']:.3f} "
        f"(always {baseline['piece']!r}, the most frequent masked training token) |",
        f"| sentence_order_accuracy | {results['sentence_order_accuracy']:.3f} | 0.500 (a coin) |",
    ]
    summary = {"output_dir": output_dir, "config": config.to_dict(), "eval": results,
               "masked_lm_majority_baseline": baseline, "seconds": round(time.time() - started)}
    with open(os.path.join(output_dir, "demo_results.json"), "w") as handle:
        json.dump(summary, handle, indent=2)
    print("\n".join(["", f"ALBERT demo finished in {summary['seconds']} s; everything is under {output_dir}", ""]
                    + table + [""]))


if __name__ == "__main__":
    app.run(main)
