"""Speed and memory of ALBERT training, inference and data generation: python -m run_scripts.benchmark

    python -m run_scripts.benchmark --preset=albert-base --batch_size=8 --seq_length=128 \
        --workloads=pretrain_step,encode --mixed_precision=mixed_bfloat16 --output_json=bench.json
    python -m run_scripts.benchmark --workloads= --compare_presets=bert-large,albert-large,albert-xxlarge
    python -m run_scripts.benchmark --compare_peers=keras-hub,transformers --output_json=peers.json

Workloads: pretrain_step (the real pretraining step, LAMB included), finetune_step (classifier, AdamW),
encode (forward only), input_pipeline (pretraining reader batches/s over shards written first) and
create_pretraining_data (instances/s per worker). Prints a Markdown table (see albert_tf/benchmarking/flops.py
for the FLOP formula, albert_tf/benchmarking/workloads.py for how the peak is measured) and writes the records
to --output_json. Runs on the GPU when TensorFlow sees one. --compare_peers times our pretraining step (with
AdamW) beside keras-hub's and transformers' ALBERT on the same workload, in float32 and bfloat16 (see
albert_tf/benchmarking/peer_comparison.py; `make peers` installs keras-hub); alone, it runs no other workload.
"""

import json
import os

from absl import app, flags

from albert_tf.benchmarking.peer_comparison import check_peers_installed, compare_peers, parse_peers
from albert_tf.benchmarking.peer_protocol import PEERS, PRECISIONS
from albert_tf.benchmarking.tables import comparison_table, markdown_table, peer_table
from albert_tf.benchmarking.suite import (DATA_WORKLOADS, WORKLOADS, BenchmarkOptions, DataWorkloadOptions,
                                          run_benchmarks)
from albert_tf.benchmarking.workloads import BenchmarkSettings
from albert_tf.config import load_config
from albert_tf.training import host_allocator
from run_scripts import entry
from run_scripts.training_flags import define_compute_flags, recompute_blocks_from_flags

FLAGS = flags.FLAGS
flags.DEFINE_list("workloads", list(WORKLOADS), f"Workloads to run, from {', '.join(WORKLOADS)}; may be empty.")
flags.DEFINE_string("preset", "albert-base", "A named preset (unless --albert_config_file is given).")
flags.DEFINE_string("albert_config_file", None, "An albert_config.json instead of --preset.")
flags.DEFINE_integer("batch_size", 8, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked-LM positions per sequence (pretraining).")
flags.DEFINE_integer("steps", 10, "Timed steps per repeat.")
flags.DEFINE_integer("warmup_steps", 2, "Untimed steps first (tracing, compilation).")
flags.DEFINE_integer("repeats", 3, "Timed repeats; the median, min and max are reported.")
flags.DEFINE_enum("cpu_allocator", None, list(host_allocator.CPU_ALLOCATORS),
                  "TensorFlow's host allocator (TF_CPU_ALLOCATOR_USE_BFC); default: the caching one, as training "
                  "uses, unless the environment sets TF_CPU_ALLOCATOR_USE_BFC.")
flags.DEFINE_bool("isolate_workloads", True, "Run each model workload in a process of its own (clean peak RSS).")
flags.DEFINE_string("output_json", None, "Write the records (and any preset comparison) to this JSON file.")
flags.DEFINE_list("compare_presets", [], "Presets whose parameter memory to compare, e.g. "
                  "bert-large,albert-large,albert-xxlarge.")
flags.DEFINE_list("compare_training_presets", ["bert-large", "albert-large"],
                  "Of --compare_presets, those whose peak pretraining-step RSS to measure (same batch and length).")
flags.DEFINE_list("compare_peers", [], "Peers to time our pretraining step against, from keras-hub, "
                  "transformers (each in float32 and bfloat16, same workload, AdamW); without --workloads, only "
                  "the comparison runs.")
flags.DEFINE_list("peer_precisions", list(PRECISIONS), "The precisions --compare_peers times, from "
                  f"{', '.join(PRECISIONS)} (float32 alone on a CPU without bfloat16 units, where bfloat16 is "
                  "emulated and slow).")
flags.DEFINE_integer("input_batches", 200, "Batches per repeat of input_pipeline.")
flags.DEFINE_integer("corpus_documents", 2000, "Documents of the synthetic corpus behind the data workloads.")
flags.DEFINE_integer("vocab_size", 400, "SentencePiece vocabulary trained on the synthetic corpus.")
flags.DEFINE_integer("dupe_factor", 2, "create_pretraining_data passes over the corpus.")
flags.DEFINE_integer("num_workers", 1, "create_pretraining_data worker processes.")
flags.DEFINE_integer("num_output_shards", 4, "Shards create_pretraining_data writes.")
flags.DEFINE_string("work_dir", None, "Where the data workloads write (default: a temporary directory).")
define_compute_flags()


def _model_settings():
    if FLAGS.albert_config_file:
        config = load_config(FLAGS.albert_config_file)
        model_name = os.path.basename(FLAGS.albert_config_file)
    else:
        config = load_config(preset=FLAGS.preset)
        model_name = FLAGS.preset
    return BenchmarkSettings(
        config=config.to_dict(), model_name=model_name, batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile, steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps, repeats=FLAGS.repeats,
        steps_per_loop=FLAGS.steps_per_loop, recompute_blocks=recompute_blocks_from_flags())


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.workloads) - set(WORKLOADS))
    if unknown:
        raise app.UsageError(f"--workloads names {unknown}; allowed: {', '.join(WORKLOADS)}.")
    unknown_peers = sorted(set(FLAGS.compare_peers) - set(PEERS))
    if unknown_peers:
        raise app.UsageError(f"--compare_peers names {unknown_peers}; allowed: {', '.join(PEERS)}.")
    unknown_precisions = sorted(set(FLAGS.peer_precisions) - set(PRECISIONS))
    if unknown_precisions:
        raise app.UsageError(f"--peer_precisions names {unknown_precisions}; allowed: {', '.join(PRECISIONS)}.")
    if not FLAGS.peer_precisions:
        raise app.UsageError(f"--peer_precisions is empty; name one or both of {', '.join(PRECISIONS)}.")
    peers = parse_peers(FLAGS.compare_peers)
    check_peers_installed(peers)
    workloads = [] if peers and not FLAGS["workloads"].present else FLAGS.workloads
    if FLAGS.cpu_allocator:
        host_allocator.select_cpu_allocator(FLAGS.cpu_allocator)
    else:
        host_allocator.prefer_caching_allocator()
    host_allocator.prefer_lean_xla_compilation()
    uses_work_dir = FLAGS.work_dir and set(workloads) & set(DATA_WORKLOADS)
    if uses_work_dir and os.path.isdir(FLAGS.work_dir) and os.listdir(FLAGS.work_dir):
        raise app.UsageError(f"--work_dir={FLAGS.work_dir} is not empty; the data workloads need a new or "
                             "empty directory (finished shards would be skipped, not measured).")
    data = DataWorkloadOptions(corpus_documents=FLAGS.corpus_documents, vocab_size=FLAGS.vocab_size,
                               dupe_factor=FLAGS.dupe_factor, num_workers=FLAGS.num_workers,
                               num_output_shards=FLAGS.num_output_shards, input_batches=FLAGS.input_batches)
    records, comparison = run_benchmarks(BenchmarkOptions(
        _model_settings(), workloads=workloads, isolate_workloads=FLAGS.isolate_workloads, data=data,
        work_dir=FLAGS.work_dir, compare_presets=FLAGS.compare_presets,
        compare_training_presets=FLAGS.compare_training_presets))
    if records:
        print(markdown_table(records))
    if comparison:
        print(comparison_table(comparison))
    peer_records = compare_peers(peers, _model_settings(), FLAGS.peer_precisions) if peers else []
    if peer_records:
        print(peer_table(peer_records))
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as handle:
            json.dump(records + comparison + peer_records, handle, indent=1)


if __name__ == "__main__":
    entry.run(main)
