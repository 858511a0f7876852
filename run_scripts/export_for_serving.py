"""Turns a fine-tuned classifier into the deployment artifact this CPU serves fastest within the accuracy you
accept: the serve benchmark's rows of ours (SavedModel float32 / bfloat16, TFLite, ONNX in onnxruntime, OpenVINO)
are built from the checkpoint, timed at batch 1 at --seq_length and scored on --eval_file; the fastest whose dev
accuracy drops at most --max_accuracy_drop points below float32 (float32 always qualifies) is copied into
--output_dir with deployment.json beside it (how to load it, its latency, accuracy and every candidate's figures).

    python -m run_scripts.export_for_serving --checkpoint=runs/sst2 --eval_file=glue/SST-2/dev.tsv \\
        --text_field=sentence --label_field=label --output_dir=deploy/sst2

Rows whose packages are missing (`make onnx` for ONNX and OpenVINO) are skipped; a row that fails is reported in
deployment.json and never chosen.
"""

from absl import app, flags

from albert_tf.benchmarking.deployment_choice import CANDIDATE_ROWS, DEPLOYMENT_FILE, choose_deployment
from data_gen.readers.labeled_text import FILE_FORMATS
from run_scripts import entry

FLAGS = flags.FLAGS

flags.DEFINE_string("checkpoint", None, "The fine-tuned classifier: run_classifier's (or run_glue's) output "
                    "directory, its best/ or a checkpoint prefix, with albert_config.json and labels.txt beside it.")
flags.DEFINE_string("eval_file", None, "The dev set (.tsv, .csv or .jsonl, as run_classifier reads it) the accuracy "
                    "of every candidate is measured on.")
flags.DEFINE_enum("file_format", None, list(FILE_FORMATS), "--eval_file's format (default: from its extension).")
flags.DEFINE_string("text_field", "sentence", "The column (or JSON key) of --eval_file's text.")
flags.DEFINE_string("text_b_field", None, "The column (or JSON key) of a second text, for sentence pairs.")
flags.DEFINE_string("label_field", "label", "The column (or JSON key) of --eval_file's label.")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model the classifier was fine-tuned with (default: "
                    "the one beside the checkpoint).")
flags.DEFINE_string("output_dir", None, f"Where the chosen artifact and {DEPLOYMENT_FILE} go (new or empty).")
flags.DEFINE_float("max_accuracy_drop", 1.0, "The dev accuracy, in points, a faster artifact may lose against "
                   "our float32 SavedModel.")
flags.DEFINE_integer("seq_length", 128, "The sequence length the latency is timed at (batch 1), and the dev set "
                     "cut to; TFLite's model is fixed to it.")
flags.DEFINE_list("candidates", None, f"The rows to consider (default all): {', '.join(CANDIDATE_ROWS)}.")
flags.DEFINE_integer("timing_runs", 20, "Calls timed per candidate per repeat, after --warmup_runs.")
flags.DEFINE_integer("warmup_runs", 2, "Untimed calls before the timed ones.")
flags.DEFINE_integer("repeats", 1, "Times every candidate is run, interleaved (the median of their medians).")
flags.DEFINE_bool("overwrite", False, "Replace the contents of a non-empty --output_dir.")
flags.mark_flags_as_required(["checkpoint", "eval_file", "output_dir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}.")
    deployment = choose_deployment(
        FLAGS.checkpoint, FLAGS.eval_file, FLAGS.output_dir, spm_model_file=FLAGS.spm_model_file,
        text_field=FLAGS.text_field, label_field=FLAGS.label_field, text_b_field=FLAGS.text_b_field,
        file_format=FLAGS.file_format, max_accuracy_drop=FLAGS.max_accuracy_drop, seq_length=FLAGS.seq_length,
        candidates=FLAGS.candidates, runs=FLAGS.timing_runs, warmup_runs=FLAGS.warmup_runs, repeats=FLAGS.repeats,
        overwrite=FLAGS.overwrite)
    drop = deployment["dev_accuracy_drop_points"]
    print(f"{deployment['path']} ({deployment['configuration']}): {deployment['latency_ms_median']:.2f} ms median "
          f"at batch 1 x {deployment['seq_length']}, dev accuracy {100 * deployment['dev_accuracy']:.2f}% "
          f"(drop {drop:+.2f} points against float32, at most {deployment['max_accuracy_drop_points']:g}); "
          f"figures in {DEPLOYMENT_FILE}")


if __name__ == "__main__":
    entry.run(main)
