"""The deployment artifact of a fine-tuned classifier: the one the serve workload finds fastest on this
CPU among those whose dev accuracy stays within the drop the user accepts.

`choose_deployment` runs the serve workload (serving.py: its artifacts, each row in its own process) on our rows
only (`candidates`: names of CANDIDATE_ROWS, all by default) on the checkpoint and its dev file, timing batch 1 at
`seq_length` alone; `select_deployment` then picks, among the rows that ran and whose dev accuracy drop against our
float32 SavedModel is at most `max_accuracy_drop` points (float32 always qualifies), the one of lowest median
latency; its artifact (a file, a SavedModel directory, or for TFLite the model at `seq_length`) is copied into the
output directory, with DEPLOYMENT_FILE beside it: the choice, how to load it, its figures and every candidate's.
A row whose packages are missing (or that needs bfloat16 units the CPU lacks) is skipped as serving.py skips it; a
row that fails in its process is reported as failed and never chosen.

    python -m run_scripts.export_for_serving --checkpoint=runs/sst2 --eval_file=glue/SST-2/dev.tsv \
        --text_field=sentence --label_field=label --output_dir=deploy/sst2 --max_accuracy_drop=1
"""

import datetime
import json
import math
import os
import shutil
import tempfile
from typing import Callable, Dict, Optional, Sequence

from albert_tf.benchmarking.peer_comparison import OURS
from albert_tf.benchmarking.serving import (SERVE_ROWS, ServeSettings, checkpoint_config, run_row_child,
                                            run_serving)
from albert_tf.training.bfloat16_support import cpu_bfloat16_units
from albert_tf.training.compile_choice import cpu_model_name
from data_gen.readers.labeled_text import LabeledTextError

DEPLOYMENT_FILE = "deployment.json"
# Our rows, the only ones a deployment can be (a peer's artifact is not ours to ship).
CANDIDATE_ROWS = tuple(row.name for row in SERVE_ROWS if row.implementation == OURS)
# The batch the serve workload always times beside batch 1 (its smallest); the choice reads batch 1 only.
_BATCH_SIZE = 2
# How each runtime loads the artifact, one line ({path}, {seq_length}).
LOAD_LINES = {
    "tensorflow": ('tf.saved_model.load("{path}").signatures["serving_default"](input_word_ids=ids, '
                   'input_mask=mask, input_type_ids=types)["logits"]  # int32 [batch, length]'),
    "xla": ('tf.function(tf.saved_model.load("{path}").signatures["serving_default"], jit_compile=True)'
            '(input_word_ids=ids, input_mask=mask, input_type_ids=types)["logits"]'),
    "tflite": ('tf.lite.Interpreter(model_path="{path}")  # inputs int32 [1, {seq_length}], zero-padded; '
               'output "logits"'),
    "onnxruntime": ('onnxruntime.InferenceSession("{path}", providers=["CPUExecutionProvider"]).run(["logits"], '
                    '{{"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}})  # int32'),
    "openvino": ('openvino.Core().compile_model("{path}", "CPU", {{"INFERENCE_PRECISION_HINT": "{hint}"}})'
                 '({{"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}})["logits"]'),
}
_OPENVINO_HINTS = {"float32": "f32", "bfloat16": "bf16", "int8": "f32"}
# A candidate's figures in DEPLOYMENT_FILE (those it has).
_FIGURES = ("dev_accuracy", "dev_accuracy_float32", "dev_accuracy_drop_points", "dev_prediction_agreement",
            "dev_max_abs_logit_drift", "dev_mcnemar_p", "file_mb", "peak_rss_mb", "first_answer_seconds_median")


def check_candidates(candidates: Optional[Sequence[str]]) -> tuple:
    """The candidate rows, CANDIDATE_ROWS' order (all of them for None); an unknown or empty list is refused in
    one sentence naming it."""
    if candidates is None:
        return CANDIDATE_ROWS
    unknown = [name for name in candidates if name not in CANDIDATE_ROWS]
    if unknown or not candidates:
        raise ValueError(f"candidates {list(candidates)} must name one or more of {', '.join(CANDIDATE_ROWS)}"
                         f"{f'; {unknown} are not among them' if unknown else ''}.")
    return tuple(name for name in CANDIDATE_ROWS if name in candidates)


def check_choice_values(seq_length: int, max_accuracy_drop: float) -> None:
    """Refuses, in one sentence naming the value, a `seq_length` that is not a positive integer or a
    `max_accuracy_drop` that is not a finite number (a negative one is allowed: float32 still qualifies)."""
    if isinstance(seq_length, bool) or not isinstance(seq_length, int) or seq_length < 3:
        raise ValueError(f"seq_length must be an integer of at least 3 (a token between [CLS] and [SEP]), got "
                         f"{seq_length!r}.")
    if isinstance(max_accuracy_drop, bool) or not isinstance(max_accuracy_drop, (int, float)) or not math.isfinite(
            max_accuracy_drop):
        raise ValueError(f"max_accuracy_drop must be a finite number of accuracy points, got {max_accuracy_drop!r}.")


def candidate_status(record: dict, max_accuracy_drop: float) -> str:
    """"skipped", "failed", "no dev accuracy", "over the drop" or "qualifies" (float32 always qualifies)."""
    if "skipped" in record:
        return "skipped"
    if "failed" in record:
        return "failed"
    if record.get("precision") == "float32":
        return "qualifies"
    if record.get("dev_accuracy_drop_points") is None:
        return "no dev accuracy"
    return "qualifies" if record["dev_accuracy_drop_points"] <= max_accuracy_drop + 1e-9 else "over the drop"


def select_deployment(records: Sequence[dict], max_accuracy_drop: float, seq_length: int) -> dict:
    """The record of lowest median batch-1 latency at `seq_length` among `records` that qualify
    (`candidate_status`); a tie goes to the earlier record. None qualifying is refused with each row's status.

    Example:
    >>> records = [{"row": "a", "precision": "float32", "latency_ms_b1x8_median": 5.0},
    ...            {"row": "b", "precision": "int8", "latency_ms_b1x8_median": 2.0, "dev_accuracy_drop_points": 3.0},
    ...            {"row": "c", "precision": "int8", "latency_ms_b1x8_median": 4.0, "dev_accuracy_drop_points": 0.5},
    ...            {"row": "d", "precision": "float32", "failed": "exit 1"}]
    >>> select_deployment(records, 1.0, 8)["row"]
    'c'
    """
    key = f"latency_ms_b1x{seq_length}_median"
    qualifying = [record for record in records if candidate_status(record, max_accuracy_drop) == "qualifies"
                  and record.get(key) is not None]
    if not qualifying:
        statuses = ", ".join(f"{record.get('row')}: {candidate_status(record, max_accuracy_drop)}"
                             for record in records)
        raise RuntimeError(f"No serving row qualifies for deployment ({statuses or 'no rows'}).")
    return min(qualifying, key=lambda record: record[key])


def load_line(record: dict, path: str, seq_length: int) -> str:
    """How to load the artifact at `path` of the row `record`, one line of Python."""
    return LOAD_LINES[record["runtime"]].format(path=path, seq_length=seq_length,
                                                hint=_OPENVINO_HINTS.get(record.get("precision"), "f32"))


def _candidate_summary(record: dict, max_accuracy_drop: float, seq_length: int) -> dict:
    summary = {"row": record.get("row"), "configuration": record.get("configuration"),
               "runtime": record.get("runtime"), "precision": record.get("precision"),
               "status": candidate_status(record, max_accuracy_drop)}
    for name in ("skipped", "failed"):
        if name in record:
            summary[name] = record[name]
    if "skipped" not in record and "failed" not in record:
        summary["latency_ms_median"] = record.get(f"latency_ms_b1x{seq_length}_median")
        summary["latency_ms_p95"] = record.get(f"latency_ms_b1x{seq_length}_p95")
        summary.update({name: record[name] for name in _FIGURES if name in record})
    return summary


def _copy_artifact(source, output_dir: str, seq_length: int) -> str:
    """Copies the artifact at `source` (a file, a directory, or TFLite's {length: path}) into `output_dir`."""
    if isinstance(source, dict):
        source = source[str(seq_length)]
    target = os.path.join(output_dir, os.path.basename(os.path.normpath(source)))
    if os.path.isdir(source):
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)
    return target


def check_output_dir(output_dir: str, overwrite: bool) -> None:
    """Refuses, in one sentence, an `output_dir` that is a file, or an existing non-empty one unless `overwrite`."""
    if not output_dir:
        raise ValueError("output_dir is required: the directory the deployment artifact goes to (--output_dir).")
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise FileExistsError(f"output_dir {output_dir} is a file, not a directory.")
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise FileExistsError(f"output_dir {output_dir} exists and is not empty; give an empty or new directory, "
                              "or --overwrite to replace its contents.")


def _empty_output_dir(output_dir: str) -> None:
    if os.path.isdir(output_dir):
        shutil.rmtree(output_dir)
    os.makedirs(output_dir)


def choose_deployment(checkpoint: str, eval_file: str, output_dir: str, *, spm_model_file: Optional[str] = None,
                      text_field: str = "sentence", label_field: str = "label", text_b_field: Optional[str] = None,
                      file_format: Optional[str] = None, max_accuracy_drop: float = 1.0, seq_length: int = 128,
                      candidates: Optional[Sequence[str]] = None, runs: int = 20, warmup_runs: int = 2,
                      repeats: int = 1, overwrite: bool = False, work_dir: Optional[str] = None,
                      run_row: Optional[Callable[..., dict]] = None) -> dict:
    """Runs the `candidates` (our serve rows) on the fine-tuned classifier at `checkpoint` (as run_classifier
    leaves it) and `eval_file` (read through the run_classifier fields), copies the chosen row's artifact
    (`select_deployment`) into `output_dir` and writes DEPLOYMENT_FILE there; returns what it holds. `runs` calls
    are timed after `warmup_runs` per repeat, `repeats` times; `run_row` is serving.run_row_child by default."""
    rows = check_candidates(candidates)
    check_choice_values(seq_length, max_accuracy_drop)
    check_output_dir(output_dir, overwrite)
    if not checkpoint or not (os.path.exists(checkpoint) or os.path.exists(checkpoint + ".index")):
        raise ValueError(f"checkpoint {checkpoint} does not exist: give a fine-tuned classifier's output directory "
                         "or checkpoint prefix (--checkpoint).")
    if not eval_file or not os.path.isfile(eval_file):
        raise ValueError(f"eval_file {eval_file} does not exist: give the dev set to measure accuracy on "
                         "(--eval_file).")
    config, model_name = checkpoint_config(checkpoint)
    positions = config.max_position_embeddings
    if seq_length > positions:
        raise ValueError(f"seq_length {seq_length} is longer than the model's max_position_embeddings={positions}.")
    try:
        settings = ServeSettings(config.to_dict(), model_name, rows=list(rows), seq_lengths=(seq_length,),
                                 batch_size=_BATCH_SIZE, runs=runs, batch_runs=1, warmup_runs=warmup_runs,
                                 repeats=repeats, inputs="text", spm_model_file=spm_model_file,
                                 checkpoint=checkpoint, eval_file=eval_file, text_field=text_field,
                                 label_field=label_field, text_b_field=text_b_field, file_format=file_format)
    except ValueError as error:
        raise ValueError(str(error).replace("serve setting ", "")) from None
    paths: Dict[str, object] = {}
    run_one = run_row or run_row_child

    def run_noting_paths(row, artifacts, row_settings, predict_dev=False):
        paths.update(artifacts.paths)
        return run_one(row, artifacts, row_settings, predict_dev=predict_dev)

    with tempfile.TemporaryDirectory(dir=work_dir) as scratch:
        try:
            records = run_serving(settings, work_dir=scratch, run_row=run_noting_paths, report_failed_rows=True)
        except LabeledTextError as error:  # name the reader's flags as this command does
            raise LabeledTextError(str(error).replace("--serve_", "--")) from None
        chosen = select_deployment(records, max_accuracy_drop, seq_length)
        _empty_output_dir(output_dir)
        artifact_path = _copy_artifact(paths[chosen["artifact"]], output_dir, seq_length)
    summary = _candidate_summary(chosen, max_accuracy_drop, seq_length)
    deployment = {
        "chosen": chosen["row"], "configuration": chosen["configuration"], "path": artifact_path,
        "artifact": os.path.basename(artifact_path), "runtime": chosen["runtime"], "precision": chosen["precision"],
        "load": load_line(chosen, artifact_path, seq_length), "seq_length": seq_length,
        "max_accuracy_drop_points": max_accuracy_drop,
        "latency_ms_median": summary["latency_ms_median"], "latency_ms_p95": summary["latency_ms_p95"],
        "dev_accuracy": chosen.get("dev_accuracy"), "dev_accuracy_float32": chosen.get("dev_accuracy_float32"),
        "dev_accuracy_drop_points": chosen.get("dev_accuracy_drop_points"),
        "dev_prediction_agreement": chosen.get("dev_prediction_agreement"),
        "dev_mcnemar_p": chosen.get("dev_mcnemar_p"), "dev_examples": chosen.get("dev_examples"),
        "file_mb": chosen.get("file_mb"), "checkpoint": os.path.abspath(checkpoint),
        "eval_file": os.path.abspath(eval_file), "timing": {"runs": runs, "warmup_runs": warmup_runs,
                                                            "repeats": repeats, "batch_size": 1},
        "candidates": [_candidate_summary(record, max_accuracy_drop, seq_length) for record in records],
        "cpu_model": cpu_model_name(), "bfloat16_units": cpu_bfloat16_units(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": chosen.get("versions")}
    with open(os.path.join(output_dir, DEPLOYMENT_FILE), "w", encoding="utf-8") as handle:
        json.dump(deployment, handle, indent=2, default=str)
        handle.write("\n")
    return deployment
