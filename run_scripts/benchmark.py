"""Speed and memory of ALBERT training, inference and data generation: python -m run_scripts.benchmark

    python -m run_scripts.benchmark --preset=albert-base --batch_size=8 --seq_length=128 \
        --workloads=pretrain_step,encode --mixed_precision=mixed_bfloat16 --output_json=bench.json
    python -m run_scripts.benchmark --workloads= --compare_presets=bert-large,albert-large,albert-xxlarge
    python -m run_scripts.benchmark --compare_peers=keras-hub,transformers --output_json=peers.json
    python -m run_scripts.benchmark --workloads=finetune_text --compare_peers=keras-hub,transformers \
        --output_json=finetune.json
    python -m run_scripts.benchmark --workloads=serve --compare_peers=transformers --output_json=serve.json
    python -m run_scripts.benchmark --workloads=serve --serve_checkpoint=runs/sst2 \
        --serve_eval_file=glue/SST-2/dev.tsv --spm_model_file=albert_base/30k-clean.model --output_json=acc.json

Workloads: pretrain_step (the real pretraining step, LAMB included), finetune_step (classifier, AdamW),
encode (forward only), input_pipeline (pretraining reader batches/s over shards written first) and
create_pretraining_data (instances/s per worker). Prints a Markdown table (see albert_tf/benchmarking/flops.py
for the FLOP formula, albert_tf/benchmarking/workloads.py for how the peak is measured) and writes the records
to --output_json. Runs on the GPU when TensorFlow sees one. --compare_peers times our pretraining step (with
AdamW) beside keras-hub's and transformers' ALBERT on the same workload, in float32 and bfloat16 (see
albert_tf/benchmarking/peer_comparison.py; `make peers` installs keras-hub); alone, it runs no other workload.
finetune_text (not run by default: it takes hours at ALBERT-base) fine-tunes a classifier on real text for an epoch
and predicts its dev set, ours with dynamic padding and padded to max_seq_length, beside the peers --compare_peers
names (then the pretraining-step comparison does not run); see albert_tf/benchmarking/finetune_text.py.
serve (not run by default) serves a 2-label classifier on the CPU by every deployment path (our SavedModel, XLA,
TFLite, ONNX in onnxruntime and OpenVINO; with --compare_peers=transformers, Hugging Face's model in PyTorch,
onnxruntime and OpenVINO): latency at batch 1, throughput at --serve_batch_size, size, peak RSS, time to the first
answer and drift; a row whose packages are missing is skipped with its reason; with --serve_checkpoint, of a
fine-tuned classifier, and with --serve_eval_file its dev accuracy per row against float32 (McNemar's test); see
albert_tf/benchmarking/serving.py.
"""

import json
import os

from absl import app, flags

from albert_tf.benchmarking.finetune_text import (BUILT_IN_DATA, FINETUNE_TEXT, FinetuneTextSettings,
                                                  run_finetune_text)
from albert_tf.benchmarking.peer_comparison import check_peers_installed, compare_peers, parse_peers
from albert_tf.benchmarking.peer_protocol import PEERS, PRECISIONS
from albert_tf.benchmarking.serving import (INPUT_KINDS, ROW_NAMES, SERVE, ServeSettings, checkpoint_config,
                                            read_fine_tuned, run_serving, serve_rows)
from albert_tf.benchmarking.tables import (comparison_table, finetune_text_table, markdown_table, peer_table,
                                           serve_table)
from albert_tf.benchmarking.suite import (DATA_WORKLOADS, WORKLOADS, BenchmarkOptions, DataWorkloadOptions,
                                          run_benchmarks)
from albert_tf.benchmarking.workloads import BenchmarkSettings
from albert_tf.config import load_config
from albert_tf.training import host_allocator
from data_gen.readers.labeled_text import FILE_FORMATS
from run_scripts import entry
from run_scripts.training_flags import define_compute_flags, recompute_blocks_from_flags

FLAGS = flags.FLAGS
ALL_WORKLOADS = WORKLOADS + (FINETUNE_TEXT, SERVE)
flags.DEFINE_list("workloads", list(WORKLOADS), f"Workloads to run, from {', '.join(ALL_WORKLOADS)}; may be empty "
                  f"(default: all but {FINETUNE_TEXT} and {SERVE}).")
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
                  f"the comparison runs. With --workloads={FINETUNE_TEXT}, that workload's peers instead.")
flags.DEFINE_list("peer_precisions", list(PRECISIONS), f"The precisions --compare_peers and {FINETUNE_TEXT} time, "
                  f"from {', '.join(PRECISIONS)} (float32 alone on a CPU without bfloat16 units, where bfloat16 is "
                  "emulated and slow; bfloat16 is our mixed_bfloat16).")
flags.DEFINE_list("finetune_seq_lengths", ["128", "512"], f"The max_seq_lengths {FINETUNE_TEXT} fine-tunes at.")
flags.DEFINE_integer("finetune_batch_size", 32, f"{FINETUNE_TEXT}'s batch, in training and prediction.")
flags.DEFINE_integer("finetune_timed_epochs", 1, f"Epochs {FINETUNE_TEXT} times for the training rate, after the "
                     "first.")
flags.DEFINE_integer("finetune_max_examples", None, f"At most this many examples of each split of {FINETUNE_TEXT}'s "
                     "data (default: all), for a short run.")
flags.DEFINE_string("spm_model_file", None, f"The SentencePiece model {FINETUNE_TEXT} and {SERVE} tokenize with; "
                    "default: one of the demo's size trained on the built-in corpus.")
flags.DEFINE_list("finetune_data", list(BUILT_IN_DATA), f"{FINETUNE_TEXT}'s built-in data: the sentences and "
                  "the sentence pairs of the built-in small task; may be empty with --glue_data_dir.")
flags.DEFINE_string("glue_data_dir", None, f"A GLUE data directory: {FINETUNE_TEXT} also fine-tunes on the dev files "
                    "of --glue_tasks.")
flags.DEFINE_list("glue_tasks", ["SST-2", "MRPC"], "The GLUE classification tasks of --glue_data_dir.")
flags.DEFINE_list("serve_rows", [], f"The {SERVE} rows to run, from {', '.join(ROW_NAMES)} (default: all; the hf_ "
                  "ones with --compare_peers=transformers).")
flags.DEFINE_list("serve_seq_lengths", ["32", "128"], f"The lengths {SERVE} times at batch 1; the batch runs at the "
                  "longest.")
flags.DEFINE_integer("serve_batch_size", 32, f"The batch {SERVE} times throughput at.")
flags.DEFINE_integer("serve_runs", 20, f"Timed calls per batch-1 length and repeat of {SERVE}.")
flags.DEFINE_integer("serve_batch_runs", 3, f"Timed calls at the batch per repeat of {SERVE}.")
flags.DEFINE_integer("serve_warmup_runs", 2, f"Untimed calls before each of {SERVE}'s timed cases.")
flags.DEFINE_enum("serve_inputs", "text", list(INPUT_KINDS), f"{SERVE}'s inputs: built-in corpus text tokenized by "
                  "--spm_model_file, or random ids.")
flags.DEFINE_string("serve_checkpoint", None, f"A fine-tuned classifier (run_classifier's or run_glue's output "
                    f"directory, its best/, or a checkpoint prefix) that {SERVE} builds every artifact from instead of "
                    "random weights; its config is the albert_config.json beside it (unless --albert_config_file), its "
                    "SentencePiece model --spm_model_file or the one beside it.")
flags.DEFINE_string("serve_eval_file", None, f"With --serve_checkpoint, a dev set (.tsv, .csv or .jsonl, as "
                    f"run_classifier reads it) every {SERVE} row also predicts once: its dev accuracy, the drop "
                    "against our float32 SavedModel, the agreement and McNemar's p-value.")
flags.DEFINE_string("serve_text_field", "sentence", "The column (or JSON key) of --serve_eval_file's text.")
flags.DEFINE_string("serve_text_b_field", None, "The column (or JSON key) of --serve_eval_file's second text, for "
                    "sentence pairs.")
flags.DEFINE_string("serve_label_field", "label", "The column (or JSON key) of --serve_eval_file's label.")
flags.DEFINE_enum("serve_file_format", None, list(FILE_FORMATS), "--serve_eval_file's format (default: from its "
                  "extension).")
flags.DEFINE_integer("input_batches", 200, "Batches per repeat of input_pipeline.")
flags.DEFINE_integer("corpus_documents", 2000, "Documents of the synthetic corpus behind the data workloads.")
flags.DEFINE_integer("vocab_size", 400, "SentencePiece vocabulary trained on the synthetic corpus.")
flags.DEFINE_integer("dupe_factor", 2, "create_pretraining_data passes over the corpus.")
flags.DEFINE_integer("num_workers", 1, "create_pretraining_data worker processes.")
flags.DEFINE_integer("num_output_shards", 4, "Shards create_pretraining_data writes.")
flags.DEFINE_string("work_dir", None, f"Where the data workloads write, and {SERVE} under {SERVE}/ (default: a "
                    "temporary directory).")
define_compute_flags()


def _model():
    """(config, its name in the records) of --albert_config_file, else --preset."""
    if FLAGS.albert_config_file:
        return load_config(FLAGS.albert_config_file), os.path.basename(FLAGS.albert_config_file)
    return load_config(preset=FLAGS.preset), FLAGS.preset


def _lengths(flag_name):
    """The integers of the list flag `flag_name`; a usage error naming it otherwise."""
    try:
        return tuple(int(length) for length in FLAGS[flag_name].value)
    except ValueError:
        raise app.UsageError(f"--{flag_name}={','.join(FLAGS[flag_name].value)} must be integers.") from None


def _finetune_text_settings():
    config, model_name = _model()
    seq_lengths = _lengths("finetune_seq_lengths")
    return FinetuneTextSettings(
        config=config.to_dict(), model_name=model_name, seq_lengths=seq_lengths, precisions=FLAGS.peer_precisions,
        batch_size=FLAGS.finetune_batch_size, repeats=FLAGS.repeats, timed_epochs=FLAGS.finetune_timed_epochs,
        jit_compile=FLAGS.jit_compile, spm_model_file=FLAGS.spm_model_file, built_in_data=FLAGS.finetune_data,
        glue_data_dir=FLAGS.glue_data_dir, glue_tasks=FLAGS.glue_tasks, max_examples=FLAGS.finetune_max_examples)


def _serve_settings():
    if FLAGS.serve_checkpoint and not FLAGS.albert_config_file:
        config, model_name = checkpoint_config(FLAGS.serve_checkpoint)
    else:
        config, model_name = _model()
    seq_lengths = _lengths("serve_seq_lengths")
    return ServeSettings(
        config=config.to_dict(), model_name=model_name, rows=FLAGS.serve_rows or None, seq_lengths=seq_lengths,
        batch_size=FLAGS.serve_batch_size, runs=FLAGS.serve_runs, batch_runs=FLAGS.serve_batch_runs,
        warmup_runs=FLAGS.serve_warmup_runs, repeats=FLAGS.repeats, inputs=FLAGS.serve_inputs,
        spm_model_file=FLAGS.spm_model_file, checkpoint=FLAGS.serve_checkpoint, eval_file=FLAGS.serve_eval_file,
        text_field=FLAGS.serve_text_field, label_field=FLAGS.serve_label_field,
        text_b_field=FLAGS.serve_text_b_field, file_format=FLAGS.serve_file_format)


def _model_settings():
    config, model_name = _model()
    return BenchmarkSettings(
        config=config.to_dict(), model_name=model_name, batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile, steps=FLAGS.steps, warmup_steps=FLAGS.warmup_steps, repeats=FLAGS.repeats,
        steps_per_loop=FLAGS.steps_per_loop, recompute_blocks=recompute_blocks_from_flags())


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.workloads) - set(ALL_WORKLOADS))
    if unknown:
        raise app.UsageError(f"--workloads names {unknown}; allowed: {', '.join(ALL_WORKLOADS)}.")
    unknown_peers = sorted(set(FLAGS.compare_peers) - set(PEERS))
    if unknown_peers:
        raise app.UsageError(f"--compare_peers names {unknown_peers}; allowed: {', '.join(PEERS)}.")
    unknown_precisions = sorted(set(FLAGS.peer_precisions) - set(PRECISIONS))
    if unknown_precisions:
        raise app.UsageError(f"--peer_precisions names {unknown_precisions}; allowed: {', '.join(PRECISIONS)}.")
    if not FLAGS.peer_precisions:
        raise app.UsageError(f"--peer_precisions is empty; name one or both of {', '.join(PRECISIONS)}.")
    peers = parse_peers(FLAGS.compare_peers)
    workloads = [] if peers and not FLAGS["workloads"].present else FLAGS.workloads
    finetune_text, serve = FINETUNE_TEXT in workloads, SERVE in workloads
    # The serve workload skips a row whose packages are missing instead.
    if finetune_text or not serve:
        check_peers_installed(peers)
    finetune_settings = _finetune_text_settings() if finetune_text else None
    serve_settings = _serve_settings() if serve else None
    if serve:
        # Refuses rows without their peer, and a checkpoint or eval file that cannot be used, before any workload runs.
        serve_rows(serve_settings, peers)
        read_fine_tuned(serve_settings)
    workloads = [name for name in workloads if name not in (FINETUNE_TEXT, SERVE)]
    # A serving process chooses neither: the serve workload alone keeps TensorFlow's defaults.
    serve_only = serve and not (workloads or FLAGS.compare_presets or finetune_text)
    if FLAGS.cpu_allocator:
        host_allocator.select_cpu_allocator(FLAGS.cpu_allocator)
    elif not serve_only:
        host_allocator.prefer_caching_allocator()
    if not serve_only:
        host_allocator.prefer_lean_xla_compilation()
    uses_work_dir = FLAGS.work_dir and set(workloads) & set(DATA_WORKLOADS)
    if uses_work_dir and os.path.isdir(FLAGS.work_dir) and os.listdir(FLAGS.work_dir):
        raise app.UsageError(f"--work_dir={FLAGS.work_dir} is not empty; the data workloads need a new or "
                             "empty directory (finished shards would be skipped, not measured).")
    data = DataWorkloadOptions(corpus_documents=FLAGS.corpus_documents, vocab_size=FLAGS.vocab_size,
                               dupe_factor=FLAGS.dupe_factor, num_workers=FLAGS.num_workers,
                               num_output_shards=FLAGS.num_output_shards, input_batches=FLAGS.input_batches)
    records, comparison = [], []
    if workloads or FLAGS.compare_presets:  # --seq_length and --batch_size are theirs, not finetune_text's
        records, comparison = run_benchmarks(BenchmarkOptions(
            _model_settings(), workloads=workloads, isolate_workloads=FLAGS.isolate_workloads, data=data,
            work_dir=FLAGS.work_dir, compare_presets=FLAGS.compare_presets,
            compare_training_presets=FLAGS.compare_training_presets))
    if records:
        print(markdown_table(records))
    if comparison:
        print(comparison_table(comparison))
    # With finetune_text or serve, the peers are their rows'.
    compare_pretraining = peers and not finetune_text and not serve
    peer_records = compare_peers(peers, _model_settings(), FLAGS.peer_precisions) if compare_pretraining else []
    if peer_records:
        print(peer_table(peer_records))
    finetune_records = run_finetune_text(finetune_settings, peers) if finetune_text else []
    if finetune_records:
        print(finetune_text_table(finetune_records))
    serve_dir = FLAGS.work_dir and os.path.join(FLAGS.work_dir, SERVE)
    serve_records = run_serving(serve_settings, peers, work_dir=serve_dir) if serve else []
    if serve_records:
        print(serve_table(serve_records))
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as handle:
            json.dump(records + comparison + peer_records + finetune_records + serve_records, handle, indent=1)


if __name__ == "__main__":
    entry.run(main)
