"""The demo (`make demo`): ALBERT end to end on the built-in docstring corpus, in about ten minutes on 2 cores.

1. Writes the corpus (the standard library's docstrings) and holds out a part for evaluation, unless
   `input_file` / `eval_input_file` point at your own text (one sentence per line, blank line between documents).
2. Trains a SentencePiece vocabulary and writes SOP pretraining shards (n-gram masking, as the original).
3. Pretrains a small ALBERT with LAMB, then evaluates on the held-out shards.
4. Reports masked_lm_accuracy and sentence_order_accuracy beside the trivial baselines.

Usage (it runs for minutes, so it is not run here):

    from albert_tf.tasks.quickstart import QuickstartOptions, run_quickstart, summary_text

    summary = run_quickstart(QuickstartOptions(output_dir="demo_output"))
    print(summary_text(summary))
"""

import dataclasses
import json
import os
import time
from typing import Dict, Optional, Union

from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions
from albert_tf.tokenization import AlbertTokenizer
from data_gen.pretraining import build_vocab, corpora
from data_gen.pretraining.create_pretraining_data import create_pretraining_data, output_shard_paths
from data_gen.pretraining.input_pipeline import (masked_lm_majority_baseline, pretraining_dataset_fn,
                                                 sentence_order_majority_baseline)

DEMO_MODEL = dict(embedding_size=128, hidden_size=192, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=768, max_position_embeddings=512, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, share_type="all")
# What next_sentence_labels says in the original's sentence-order mode.
SENTENCE_ORDER_LABELS = {0: "in order", 1: "swapped or random B"}


@dataclasses.dataclass
class QuickstartOptions:
    """What the demo writes where, the data it makes and how long it trains (run_scripts.quickstart's flags).

    `seed` seeds the model's initialization and dropout; the pretraining data stay the same.

    Example:
    >>> QuickstartOptions(output_dir="demo_output").num_train_steps
    1200
    """

    output_dir: str = "demo_output"
    input_file: Optional[str] = None
    eval_input_file: Optional[str] = None
    holdout_fraction: float = 0.1
    vocab_size: int = 5000
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    dupe_factor: int = 5
    num_train_steps: int = 1200
    train_batch_size: int = 32
    learning_rate: float = 0.01
    num_workers: int = 2
    mixed_precision: str = "float32"
    jit_compile: Union[bool, str] = "auto"
    seed: int = PretrainingOptions.seed


def _stage(number, title):
    logging.info("=" * 20 + " %d. %s " + "=" * 20, number, title)
    return time.time()


def _corpus_files(options, output_dir):
    if options.input_file:
        if not options.eval_input_file:
            raise ValueError("--input_file needs --eval_input_file, the held-out text to evaluate on.")
        return options.input_file, options.eval_input_file
    train_path = os.path.join(output_dir, "corpus", "train.txt")
    eval_path = os.path.join(output_dir, "corpus", "eval.txt")
    stats = corpora.write_corpus(train_path, holdout_fraction=options.holdout_fraction, holdout_path=eval_path)
    logging.info("Built-in corpus: %s", stats)
    return train_path, eval_path


def run_quickstart(options: QuickstartOptions) -> Dict[str, object]:
    """Runs the demo's four stages under `options.output_dir`; returns the summary it writes to demo_results.json.

    The summary holds the output directory, the model config, the held-out evaluation, the majority baselines
    (the masked-LM token most frequent in training, the held-out instances' most frequent sentence-order label)
    and the seconds it took; `summary_text` formats it as the demo prints it.
    """
    output_dir = os.path.abspath(options.output_dir)
    logging.info("Writing everything under %s", output_dir)
    started = time.time()

    _stage(1, "corpus")
    train_text, eval_text = _corpus_files(options, output_dir)

    _stage(2, "vocabulary and pretraining shards")
    spm_model = build_vocab.train_sentencepiece(build_vocab.expand_input_files(train_text),
                                                os.path.join(output_dir, "vocab", "spm"),
                                                vocab_size=options.vocab_size)
    data_dir = os.path.join(output_dir, "data")
    shapes = dict(max_seq_length=options.max_seq_length, max_predictions_per_seq=options.max_predictions_per_seq)
    train_shards = output_shard_paths(os.path.join(data_dir, "train.tfrecord"), options.num_workers)
    eval_shards = output_shard_paths(os.path.join(data_dir, "eval.tfrecord"), 1)
    create_pretraining_data(train_text, train_shards, spm_model, dupe_factor=options.dupe_factor,
                            num_workers=options.num_workers, **shapes)
    create_pretraining_data(eval_text, eval_shards, spm_model, dupe_factor=2, random_seed=54321, **shapes)

    _stage(3, "pretraining")
    config = AlbertConfig(vocab_size=options.vocab_size, **DEMO_MODEL)
    logging.info("Model config:\n%s", config.to_json_string())
    model_dir = os.path.join(output_dir, "model")
    pretraining_options = PretrainingOptions(
        output_dir=model_dir, train_batch_size=options.train_batch_size, eval_batch_size=64,
        learning_rate=options.learning_rate, num_train_steps=options.num_train_steps,
        num_warmup_steps=options.num_train_steps // 10, save_checkpoints_steps=options.num_train_steps,
        max_eval_steps=1000, steps_per_loop=10, log_every_steps=20, jit_compile=options.jit_compile,
        mixed_precision=options.mixed_precision, seed=options.seed, **shapes)
    run = Pretraining(config, pretraining_options)
    run.train(pretraining_dataset_fn(",".join(train_shards), is_training=True, seed=1, **shapes),
              source=train_shards[0])

    _stage(4, "evaluation on the held-out text")
    results = run.evaluate_checkpoints(pretraining_dataset_fn(",".join(eval_shards), is_training=False, **shapes))
    baseline = masked_lm_majority_baseline(",".join(train_shards), ",".join(eval_shards), **shapes)
    baseline["piece"] = AlbertTokenizer(spm_model_file=spm_model).convert_ids_to_tokens([baseline["token_id"]])[0]
    order_baseline = sentence_order_majority_baseline(",".join(eval_shards), **shapes)
    summary = {"output_dir": output_dir, "config": config.to_dict(), "eval": results,
               "masked_lm_majority_baseline": baseline, "sentence_order_majority_baseline": order_baseline,
               "seconds": round(time.time() - started)}
    with open(os.path.join(output_dir, "demo_results.json"), "w") as handle:
        json.dump(summary, handle, indent=2)
    return summary


def summary_text(summary: Dict[str, object]) -> str:
    """The demo's closing lines: where everything is and the held-out metrics beside the trivial baselines."""
    results, baseline = summary["eval"], summary["masked_lm_majority_baseline"]
    order_baseline = summary["sentence_order_majority_baseline"]
    table = [
        "| metric (held-out) | ALBERT | trivial baseline |",
        "|---|---|---|",
        f"| masked_lm_accuracy | {results['masked_lm_accuracy']:.3f} | {baseline['accuracy']:.3f} "
        f"(always {baseline['piece']!r}, the most frequent masked training token) |",
        f"| sentence_order_accuracy | {results['sentence_order_accuracy']:.3f} | {order_baseline['accuracy']:.3f} "
        f"(always {SENTENCE_ORDER_LABELS[order_baseline['label']]!r}, the majority label of the held-out instances) |",
    ]
    return "\n".join(["", f"ALBERT demo finished in {summary['seconds']} s; everything is under "
                          f"{summary['output_dir']}", ""] + table + [""])
