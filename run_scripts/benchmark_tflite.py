"""Size, single-thread latency and drift of the encoder's TFLite variants: python -m run_scripts.benchmark_tflite

    python -m run_scripts.benchmark_tflite --preset=albert-base --output_dir=/tmp/tflite_bench \\
        --output_json=tflite.json

Exports a randomly initialised encoder of the config (sizes and latencies do not depend on the weights),
converts it as export_to_tfhub --tflite does, times each variant in tf.lite.Interpreter (median of --num_runs
at --num_threads threads, batch --batch_size, sequence --seq_length) and prints a Markdown table; --onnx adds
the ONNX model in onnxruntime.
"""

import json

from absl import app, flags

from albert_tf.benchmarking.tflite_variants import benchmark_tflite, tflite_table
from albert_tf.config import load_config
from albert_tf.export.tflite import DEFAULT_TFLITE_SEQ_LENGTH, TFLITE_VARIANTS
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "An empty directory for the encoder SavedModel and its TFLite models.")
flags.DEFINE_string("preset", "albert-base", "A named config (or --albert_config_file).")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model to measure.")
flags.DEFINE_list("variants", list(TFLITE_VARIANTS), "The TFLite variants to measure.")
flags.DEFINE_integer("seq_length", DEFAULT_TFLITE_SEQ_LENGTH, "Sequence length of the TFLite models.", lower_bound=1)
flags.DEFINE_integer("batch_size", 1, "Batch of the timed invocations.", lower_bound=1)
flags.DEFINE_integer("num_threads", 1, "Interpreter threads.", lower_bound=1)
flags.DEFINE_integer("num_runs", 20, "Timed invocations per variant.", lower_bound=1)
flags.DEFINE_bool("onnx", False, "Also time the ONNX model in onnxruntime (the onnx extra: `make onnx`, then "
                  ".venv/onnx on PYTHONPATH).")
flags.DEFINE_string("output_json", None, "Also write the records here.")
flags.mark_flag_as_required("output_dir")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}.")
    config = load_config(FLAGS.albert_config_file, None if FLAGS.albert_config_file else FLAGS.preset)
    records = benchmark_tflite(FLAGS.output_dir, config, FLAGS.seq_length, FLAGS.batch_size, FLAGS.variants,
                               FLAGS.num_threads, FLAGS.num_runs, onnx=FLAGS.onnx)
    print(tflite_table(records))
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as handle:
            json.dump(records, handle, indent=2)


if __name__ == "__main__":
    entry.run(main)
