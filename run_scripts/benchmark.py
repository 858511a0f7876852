"""Speed and memory of ALBERT training, inference and data generation: python -m run_scripts.benchmark

    python -m run_scripts.benchmark --preset=albert-base --batch_size=8 --seq_length=128 \
        --workloads=pretrain_step,encode --mixed_precision=mixed_bfloat16 --output_json=bench.json
    python -m run_scripts.benchmark --workloads= --compare_presets=bert-large,albert-large,albert-xxlarge

Workloads: pretrain_step (the real pretraining step, LAMB included), finetune_step (classifier, AdamW),
encode (forward only), input_pipeline (pretraining reader batches/s over shards written first) and
create_pretraining_data (instances/s per worker). Prints a Markdown table (see albert_tf/benchmarking/flops.py
for the FLOP formula, albert_tf/benchmarking/workloads.py for how the peak is measured) and writes the records
to --output_json. Runs on the GPU when TensorFlow sees one.
"""

import json
import os
import tempfile

from absl import app, flags, logging

from albert_tf.benchmarking.flops import MODEL_WORKLOADS
from albert_tf.benchmarking.pretraining_data import measure_throughput, write_synthetic_corpus
from albert_tf.benchmarking.reports import comparison_table, markdown_table
from albert_tf.benchmarking.workloads import (BenchmarkSettings, compare_presets, data_record, measure_dataset,
                                              run_in_subprocess, run_model_workload, summarize)
from albert_tf.config import load_config
from albert_tf.training import host_allocator
from run_scripts.training_flags import define_compute_flags, recompute_blocks_from_flags

DATA_WORKLOADS = ("input_pipeline", "create_pretraining_data")
WORKLOADS = MODEL_WORKLOADS + DATA_WORKLOADS

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


def _data_records(settings, work_dir):
    """create_pretraining_data on a synthetic corpus, then the pretraining reader over its shards."""
    from data_gen import build_vocab
    from data_gen import create_pretraining_data as cpd
    from data_gen.pretraining_input import make_pretraining_dataset

    corpus = write_synthetic_corpus(os.path.join(work_dir, "corpus.txt"), FLAGS.corpus_documents)
    spm_model_file = build_vocab.train_sentencepiece([corpus], os.path.join(work_dir, "spm"),
                                                     vocab_size=FLAGS.vocab_size)
    lengths = dict(max_seq_length=settings.seq_length, max_predictions_per_seq=settings.max_predictions_per_seq)
    records, runs = [], []
    repeats = settings.repeats if "create_pretraining_data" in FLAGS.workloads else 1
    for repeat in range(repeats):
        logging.info("create_pretraining_data run %d of %d", repeat + 1, repeats)
        runs.append(measure_throughput(
            corpus, os.path.join(work_dir, f"shards_{repeat}"), spm_model_file, num_workers=FLAGS.num_workers,
            num_output_shards=FLAGS.num_output_shards, dupe_factor=FLAGS.dupe_factor, **lengths))
    if "create_pretraining_data" in FLAGS.workloads:
        rates = summarize([run["instances_per_second"] for run in runs])
        records.append(data_record(
            "create_pretraining_data", "synthetic corpus", 1, settings.seq_length,
            {f"seq_per_s_{key}": value for key, value in rates.items()},
            num_workers=FLAGS.num_workers, instances_per_s_per_worker=rates["median"] / FLAGS.num_workers,
            instances=runs[0]["instances"], peak_rss_mb=max(run["peak_main_rss_bytes"] for run in runs) / 1e6,
            peak_pss_mb=max(run["peak_pss_bytes"] for run in runs) / 1e6))
    if "input_pipeline" in FLAGS.workloads:
        shards = cpd.output_shard_paths(os.path.join(work_dir, "shards_0", "measure.tfrecord"),
                                        FLAGS.num_output_shards)
        dataset = make_pretraining_dataset(shards, batch_size=settings.batch_size, is_training=True, **lengths)
        rates = measure_dataset(dataset, settings.batch_size, FLAGS.input_batches, repeats=settings.repeats)
        records.append(data_record("input_pipeline", "pretraining records", settings.batch_size,
                                   settings.seq_length, rates))
    return records


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.workloads) - set(WORKLOADS))
    if unknown:
        raise app.UsageError(f"--workloads names {unknown}; allowed: {', '.join(WORKLOADS)}.")
    if FLAGS.cpu_allocator:
        host_allocator.select_cpu_allocator(FLAGS.cpu_allocator)
    else:
        host_allocator.prefer_caching_allocator()
    host_allocator.prefer_lean_xla_compilation()
    settings = _model_settings()
    run_workload = run_in_subprocess if FLAGS.isolate_workloads else run_model_workload
    records = []
    for workload in [name for name in FLAGS.workloads if name in MODEL_WORKLOADS]:
        logging.info("Running %s on %s (batch %d x %d, %s, XLA %s)", workload, settings.model_name,
                     settings.batch_size, settings.seq_length, settings.mixed_precision, settings.jit_compile)
        records.append(run_workload(workload, settings))
    if set(FLAGS.workloads) & set(DATA_WORKLOADS):
        if FLAGS.work_dir:
            if os.path.isdir(FLAGS.work_dir) and os.listdir(FLAGS.work_dir):
                raise app.UsageError(f"--work_dir={FLAGS.work_dir} is not empty; the data workloads need a new or "
                                     "empty directory (finished shards would be skipped, not measured).")
            os.makedirs(FLAGS.work_dir, exist_ok=True)
            records += _data_records(settings, FLAGS.work_dir)
        else:
            with tempfile.TemporaryDirectory() as work_dir:
                records += _data_records(settings, work_dir)
    comparison = []
    if FLAGS.compare_presets:
        training_presets = [name for name in FLAGS.compare_training_presets if name in FLAGS.compare_presets]
        comparison = compare_presets(FLAGS.compare_presets, training_presets, settings, run_workload)
    if records:
        print(markdown_table(records))
    if comparison:
        print(comparison_table(comparison))
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as handle:
            json.dump(records + comparison, handle, indent=1)


if __name__ == "__main__":
    app.run(main)
