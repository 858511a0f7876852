"""Bounded memory check of create_pretraining_data: python -m run_scripts.benchmark_pretraining_data --output_dir=DIR

Writes a synthetic corpus of --base_documents documents and one --scale times larger, runs the generator on
each in a child process, and reports instances/s (overall and per worker) and peak memory. Peak memory
should stay nearly flat as the corpus grows: only a few blocks are held at a time. It follows the block size,
which is --block_bytes unless the corpus holds less than --num_output_shards blocks of it (then its blocks are
smaller, so the default small corpus runs with blocks of about 1.4 MB and the large one with 4 MiB).
"""

import json
import os

from absl import flags, logging

from albert_tf.benchmarking.pretraining_data_throughput import measure_throughput, write_synthetic_corpus
from data_gen.pretraining import build_vocab
from data_gen.pretraining import create_pretraining_data as cpd
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Directory for the corpora, the model, the shards and benchmark.json.")
flags.DEFINE_integer("base_documents", 2000, "Documents in the small corpus.")
flags.DEFINE_integer("scale", 10, "The large corpus holds scale times as many documents.")
flags.DEFINE_integer("num_workers", 1, "Worker processes of each run.")
flags.DEFINE_string("beam_pipeline_options", None, "Measure the Apache Beam pipeline with these options instead "
                    "(create_pretraining_data's flag; .venv/beam first on PYTHONPATH), e.g. runner=FnApiRunner,"
                    "direct_running_mode=multi_processing,direct_num_workers=2. Excludes --num_workers.")
flags.DEFINE_integer("num_output_shards", 4, "Output shards of each run.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model; by default one is trained on the small corpus.")
flags.DEFINE_integer("vocab_size", 400, "Vocabulary of the model trained when --spm_model_file is not given.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the instances.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked-LM predictions per instance.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the data.")
flags.DEFINE_integer("block_bytes", cpd.DEFAULT_BLOCK_BYTES, "Text per block.")
flags.mark_flag_as_required("output_dir")


def main(argv):
    del argv
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    sizes = {"small": FLAGS.base_documents, "large": FLAGS.base_documents * FLAGS.scale}
    corpora = {name: write_synthetic_corpus(os.path.join(FLAGS.output_dir, f"corpus_{name}.txt"), documents,
                                            seed=index)
               for index, (name, documents) in enumerate(sizes.items())}
    spm_model_file = FLAGS.spm_model_file or build_vocab.train_sentencepiece(
        [corpora["small"]], os.path.join(FLAGS.output_dir, "benchmark_spm"), vocab_size=FLAGS.vocab_size)
    results = {}
    beam_arguments = {"beam_pipeline_options": FLAGS.beam_pipeline_options} if FLAGS.beam_pipeline_options else {}
    for name, corpus in corpora.items():
        results[name] = measure_throughput(
            corpus, os.path.join(FLAGS.output_dir, f"shards_{name}"), spm_model_file,
            num_workers=FLAGS.num_workers if FLAGS["num_workers"].present else None,
            num_output_shards=FLAGS.num_output_shards, max_seq_length=FLAGS.max_seq_length,
            max_predictions_per_seq=FLAGS.max_predictions_per_seq, dupe_factor=FLAGS.dupe_factor,
            block_bytes=FLAGS.block_bytes, **beam_arguments)
        results[name]["corpus_bytes"] = os.path.getsize(corpus)
        result = results[name]
        per_worker = result["instances_per_second_per_worker"]
        worker_rss = result["peak_worker_rss_bytes"]
        logging.info("%s corpus: %.1f MB, %d documents in %d blocks of %.2f MB -> %d instances in %.1f s: %.0f "
                     "instances/s (%s); peak PSS %.0f MB and anonymous PSS %.0f MB (all processes), peak RSS "
                     "%.0f MB (main process), %s (largest worker)", name, result["corpus_bytes"] / 1e6,
                     result["documents"],
                     result["blocks"], result["corpus_bytes"] / result["blocks"] / 1e6, result["instances"],
                     result["seconds"], result["instances_per_second"],
                     "Beam" if per_worker is None else f"{per_worker:.0f} per worker", result["peak_pss_bytes"] / 1e6,
                     (result["peak_anonymous_bytes"] or 0) / 1e6, result["peak_main_rss_bytes"] / 1e6,
                     "none sampled" if worker_rss is None else f"{worker_rss / 1e6:.0f} MB")
    growth = {key: results["large"][key] / results["small"][key] if results["small"][key] and results["large"][key]
              else None
              for key in ("peak_pss_bytes", "peak_anonymous_bytes", "peak_main_rss_bytes", "peak_worker_rss_bytes")}
    logging.info("Corpus x%d -> peak PSS x%.2f (it moves with what else the machine runs), peak anonymous PSS x%s",
                 FLAGS.scale, growth["peak_pss_bytes"], "?" if growth["peak_anonymous_bytes"] is None else
                 f"{growth['peak_anonymous_bytes']:.2f}")
    with open(os.path.join(FLAGS.output_dir, "benchmark.json"), "w", encoding="utf-8") as handle:
        json.dump({"results": results, "peak_memory_growth": growth, "scale": FLAGS.scale}, handle, indent=1)


if __name__ == "__main__":
    entry.run(main)
