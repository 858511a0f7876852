"""The whole benchmark run: the model workloads, the data workloads and the preset comparison, as records.

The data workloads measure data_gen itself (create_pretraining_data's rate in a child process, then the
pretraining reader over the shards it wrote), so this module is where benchmarking reads data_gen.
"""

import dataclasses
import os
import tempfile
from typing import Callable, List, Optional, Sequence, Tuple

from absl import logging

from albert_tf.benchmarking.flops import MODEL_WORKLOADS
from albert_tf.benchmarking.pretraining_data_throughput import measure_throughput, write_synthetic_corpus
from albert_tf.benchmarking.workloads import (BenchmarkSettings, compare_presets, data_record, measure_dataset,
                                              run_in_subprocess, run_model_workload, summarize)

DATA_WORKLOADS = ("input_pipeline", "create_pretraining_data")
WORKLOADS = MODEL_WORKLOADS + DATA_WORKLOADS


@dataclasses.dataclass
class DataWorkloadOptions:
    """The synthetic corpus behind the data workloads, and how create_pretraining_data runs on it."""

    corpus_documents: int = 2000
    vocab_size: int = 400
    dupe_factor: int = 2
    num_workers: int = 1
    num_output_shards: int = 4
    input_batches: int = 200


@dataclasses.dataclass
class BenchmarkOptions:
    """What one benchmark run measures. `work_dir` (new or empty) keeps the data workloads' files; without it
    they go to a temporary directory. Each model workload runs in a process of its own unless
    `isolate_workloads` is False."""

    settings: BenchmarkSettings
    workloads: Sequence[str] = WORKLOADS
    isolate_workloads: bool = True
    data: DataWorkloadOptions = dataclasses.field(default_factory=DataWorkloadOptions)
    work_dir: Optional[str] = None
    compare_presets: Sequence[str] = ()
    compare_training_presets: Sequence[str] = ("bert-large", "albert-large")


def run_benchmarks(options: BenchmarkOptions) -> Tuple[List[dict], List[dict]]:
    """Runs the workloads; returns (records, preset comparison rows).

    Example:
    >>> from albert_tf.config import AlbertConfig
    >>> settings = BenchmarkSettings(config=AlbertConfig.from_preset("albert-base").to_dict(),
    ...                              model_name="albert-base", batch_size=8, seq_length=128)
    >>> records, _ = run_benchmarks(BenchmarkOptions(settings, workloads=["encode"]))  # doctest: +SKIP
    >>> records[0]["seq_per_s_median"]  # doctest: +SKIP
    """
    unknown = sorted(set(options.workloads) - set(WORKLOADS))
    if unknown:
        raise ValueError(f"Unknown workloads {unknown}; allowed: {', '.join(WORKLOADS)}.")
    settings = options.settings
    run_workload = run_in_subprocess if options.isolate_workloads else run_model_workload
    records = []
    for workload in [name for name in options.workloads if name in MODEL_WORKLOADS]:
        logging.info("Running %s on %s (batch %d x %d, %s, XLA %s)", workload, settings.model_name,
                     settings.batch_size, settings.seq_length, settings.mixed_precision, settings.jit_compile)
        records.append(run_workload(workload, settings))
    data_workloads = [name for name in options.workloads if name in DATA_WORKLOADS]
    if data_workloads:
        if options.work_dir:
            os.makedirs(options.work_dir, exist_ok=True)
            records += data_workload_records(settings, data_workloads, options.data, options.work_dir)
        else:
            with tempfile.TemporaryDirectory() as work_dir:
                records += data_workload_records(settings, data_workloads, options.data, work_dir)
    comparison = []
    if options.compare_presets:
        training_presets = [name for name in options.compare_training_presets if name in options.compare_presets]
        comparison = compare_presets(options.compare_presets, training_presets, settings, run_workload)
    return records, comparison


def data_workload_records(settings: BenchmarkSettings, workloads: Sequence[str], data: DataWorkloadOptions,
                          work_dir: str, measure: Callable[..., dict] = measure_throughput) -> List[dict]:
    """create_pretraining_data on a synthetic corpus, then the pretraining reader over its shards."""
    from data_gen.pretraining import build_vocab
    from data_gen.pretraining import create_pretraining_data as cpd
    from data_gen.pretraining.input_pipeline import make_pretraining_dataset

    corpus = write_synthetic_corpus(os.path.join(work_dir, "corpus.txt"), data.corpus_documents)
    spm_model_file = build_vocab.train_sentencepiece([corpus], os.path.join(work_dir, "spm"),
                                                     vocab_size=data.vocab_size)
    lengths = dict(max_seq_length=settings.seq_length, max_predictions_per_seq=settings.max_predictions_per_seq)
    records, runs = [], []
    repeats = settings.repeats if "create_pretraining_data" in workloads else 1
    for repeat in range(repeats):
        logging.info("create_pretraining_data run %d of %d", repeat + 1, repeats)
        runs.append(measure(
            corpus, os.path.join(work_dir, f"shards_{repeat}"), spm_model_file, num_workers=data.num_workers,
            num_output_shards=data.num_output_shards, dupe_factor=data.dupe_factor, **lengths))
    if "create_pretraining_data" in workloads:
        rates = summarize([run["instances_per_second"] for run in runs])
        records.append(data_record(
            "create_pretraining_data", "synthetic corpus", 1, settings.seq_length,
            {f"seq_per_s_{key}": value for key, value in rates.items()},
            num_workers=data.num_workers, instances_per_s_per_worker=rates["median"] / data.num_workers,
            instances=runs[0]["instances"], peak_rss_mb=max(run["peak_main_rss_bytes"] for run in runs) / 1e6,
            peak_pss_mb=max(run["peak_pss_bytes"] for run in runs) / 1e6))
    if "input_pipeline" in workloads:
        shards = cpd.output_shard_paths(os.path.join(work_dir, "shards_0", "measure.tfrecord"),
                                        data.num_output_shards)
        dataset = make_pretraining_dataset(shards, batch_size=settings.batch_size, is_training=True, **lengths)
        rates = measure_dataset(dataset, settings.batch_size, data.input_batches, repeats=settings.repeats)
        records.append(data_record("input_pipeline", "pretraining records", settings.batch_size,
                                   settings.seq_length, rates))
    return records
