"""run_scripts.export_for_serving and albert_tf/benchmarking/deployment_choice.py: the selection rule on hand-made
records (fastest qualifying wins, a faster row over the drop loses, a failed or skipped row is never chosen, float32
always qualifies), bad input refused in one sentence, and end to end on a tiny fine-tuned classifier: the chosen
artifact is in the output directory beside deployment.json and predicts the dev set with the recorded accuracy."""
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.benchmarking import serving
from albert_tf.benchmarking.deployment_choice import (CANDIDATE_ROWS, candidate_status, check_candidates,
                                                      choose_deployment, select_deployment)
from albert_tf.tokenization import AlbertTokenizer
from data_gen.readers.glue import encode_text_pair
from tests.helpers import run_script
from tests.serving_fixtures import LABELS, TINY, write_dev_file, write_fine_tuned

SEQ_LENGTH = 32
ONNX_CANDIDATES = ("ours_onnx_optimized", "ours_onnx_int8")
DEPLOYMENT_FIELDS = ("chosen", "configuration", "path", "artifact", "runtime", "precision", "load", "seq_length",
                     "max_accuracy_drop_points", "latency_ms_median", "latency_ms_p95", "dev_accuracy",
                     "dev_accuracy_float32", "dev_accuracy_drop_points", "dev_prediction_agreement",
                     "dev_mcnemar_p", "dev_examples", "candidates", "cpu_model", "bfloat16_units", "date")


def _record(row, precision, latency, drop=None, **extra):
    record = {"row": row, "configuration": row, "runtime": "onnxruntime", "precision": precision,
              f"latency_ms_b1x{SEQ_LENGTH}_median": latency, f"latency_ms_b1x{SEQ_LENGTH}_p95": latency * 1.2}
    if drop is not None:
        record["dev_accuracy_drop_points"] = drop
    return record | extra


def test_the_fastest_qualifying_row_is_chosen():
    records = [_record("float32", "float32", 10.0, 0.0), _record("int8_fast_bad", "int8", 2.0, 1.5),
               _record("bf16_ok", "bfloat16", 6.0, 0.9), _record("int8_ok", "int8", 5.0, 1.0),
               _record("failed_fastest", "float32", 1.0, 0.0, failed="exit 1"),
               {"row": "skipped", "precision": "int8", "skipped": "onnx not installed"}]
    assert select_deployment(records, 1.0, SEQ_LENGTH)["row"] == "int8_ok"  # a drop equal to the limit qualifies
    assert select_deployment(records, 2.0, SEQ_LENGTH)["row"] == "int8_fast_bad"
    assert select_deployment(records, 0.5, SEQ_LENGTH)["row"] == "float32"
    # A negative limit: only float32 qualifies, whatever its drop, even where another row gains accuracy.
    records.append(_record("gains", "int8", 3.0, -2.0))
    assert select_deployment(records, -5.0, SEQ_LENGTH)["row"] == "float32"
    assert [candidate_status(record, 1.0) for record in records] == [
        "qualifies", "over the drop", "qualifies", "qualifies", "failed", "skipped", "qualifies"]
    assert candidate_status(_record("no_dev", "int8", 1.0), 1.0) == "no dev accuracy"


def test_a_tie_goes_to_the_earlier_row_and_no_qualifying_row_is_refused():
    records = [_record("first", "float32", 4.0, 0.0), _record("second", "float32", 4.0, 0.0)]
    assert select_deployment(records, 1.0, SEQ_LENGTH)["row"] == "first"
    with pytest.raises(RuntimeError, match=r"^No serving row qualifies for deployment \(a: failed, b: over the "
                                           r"drop\)\.$"):
        select_deployment([_record("a", "float32", 1.0, failed="exit 1"), _record("b", "int8", 1.0, 3.0)], 1.0,
                          SEQ_LENGTH)


def test_candidates_are_ours_only_and_an_unknown_one_is_named():
    assert check_candidates(None) == CANDIDATE_ROWS and not any(name.startswith("hf_") for name in CANDIDATE_ROWS)
    assert check_candidates(["ours_onnx_int8", "ours_saved_model"]) == ("ours_saved_model", "ours_onnx_int8")
    with pytest.raises(ValueError, match=r"^candidates \['ours_onnx', 'hf_torch'\] must name one or more of "
                                         r"ours_saved_model, .*; \['hf_torch'\] are not among them\.$"):
        check_candidates(["ours_onnx", "hf_torch"])


def test_bad_input_is_one_sentence_naming_the_value(tmp_path):
    dev_file, _, _ = write_dev_file(tmp_path / "dev.tsv")
    with pytest.raises(ValueError, match=rf"^checkpoint {tmp_path / 'none'} does not exist"):
        choose_deployment(str(tmp_path / "none"), str(dev_file), str(tmp_path / "out"))
    with pytest.raises(ValueError, match=r"^seq_length must be an integer of at least 3 .*, got -8\.$"):
        choose_deployment(str(tmp_path), str(dev_file), str(tmp_path / "out"), seq_length=-8)
    with pytest.raises(ValueError, match=r"^candidates \['ours_gpu'\] must name"):
        choose_deployment(str(tmp_path), str(dev_file), str(tmp_path / "out"), candidates=["ours_gpu"])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(FileExistsError, match=r"^output_dir .*full exists and is not empty; .*--overwrite"):
        choose_deployment(str(tmp_path), str(dev_file), str(tmp_path / "full"))


def test_the_script_refuses_bad_input_in_one_line(tmp_path):
    dev_file, _, _ = write_dev_file(tmp_path / "dev.tsv")
    result = run_script("export_for_serving", f"--checkpoint={tmp_path / 'none'}", f"--eval_file={dev_file}",
                        f"--output_dir={tmp_path / 'out'}", "--candidates=ours_saved_model,ours_gpu")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: candidates ['ours_saved_model', 'ours_gpu'] must name one or more of ours_saved_model")


def _predict(deployment, inputs):
    """The logits of the deployed artifact, loaded as deployment.json's runtime loads it, each example at batch 1
    at its own length (as the benchmark predicts the dev set)."""
    if deployment["runtime"] == "tensorflow":
        signature = tf.saved_model.load(deployment["path"]).signatures["serving_default"]

        def predict(feeds):
            return signature(**{name: tf.constant(value) for name, value in feeds.items()})["logits"].numpy()
    else:
        assert deployment["runtime"] == "onnxruntime", deployment["runtime"]
        sys.path.append(serving.ONNX_PACKAGES)
        import onnxruntime
        session = onnxruntime.InferenceSession(deployment["path"], providers=["CPUExecutionProvider"])

        def predict(feeds):
            return session.run(["logits"], feeds)[0]
    lengths = inputs["input_mask"].sum(axis=1)
    return np.concatenate([predict({name: value[i:i + 1, :lengths[i]] for name, value in inputs.items()})
                           for i in range(len(lengths))])


@pytest.mark.slow
def test_the_command_deploys_the_fastest_artifact_within_the_drop(tmp_path, spm_model_file):
    missing = serving.skip_reason(next(row for row in serving.SERVE_ROWS if row.name == "ours_onnx_int8"))
    if missing:
        pytest.skip(f"the ONNX candidates need the onnx extra: {missing}")
    write_fine_tuned(tmp_path / "run")
    dev_file, sentences, labels = write_dev_file(tmp_path / "dev.tsv")
    output_dir = tmp_path / "deploy"
    candidates = ("ours_saved_model",) + ONNX_CANDIDATES
    result = run_script("export_for_serving", f"--checkpoint={tmp_path / 'run'}", f"--eval_file={dev_file}",
                        f"--spm_model_file={spm_model_file}", f"--output_dir={output_dir}",
                        f"--seq_length={SEQ_LENGTH}", f"--candidates={','.join(candidates)}", "--timing_runs=3",
                        "--warmup_runs=1", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    deployment = json.loads((output_dir / "deployment.json").read_text())
    assert set(DEPLOYMENT_FIELDS) <= set(deployment), sorted(set(DEPLOYMENT_FIELDS) - set(deployment))
    assert deployment["chosen"] in candidates and os.path.exists(deployment["path"])
    assert os.path.dirname(deployment["path"]) == str(output_dir)
    assert [candidate["row"] for candidate in deployment["candidates"]] == list(candidates)
    figures = {candidate["row"]: candidate for candidate in deployment["candidates"]}
    qualifying = [candidate for candidate in figures.values() if candidate["status"] == "qualifies"]
    assert deployment["latency_ms_median"] == min(candidate["latency_ms_median"] for candidate in qualifying) > 0
    assert deployment["dev_accuracy_drop_points"] <= 1.0 and deployment["dev_examples"] == len(labels)
    assert figures["ours_saved_model"]["dev_accuracy_drop_points"] == 0
    assert result.stdout.strip().splitlines()[-1].startswith(f"{deployment['path']} (")
    assert deployment["load"].split("(", 1)[0] in ("tf.saved_model.load", "onnxruntime.InferenceSession")
    # The deployed artifact, loaded here, predicts the dev set (encoded as run_classifier encodes it, cut to
    # --seq_length) with the recorded accuracy.
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    encoded = [encode_text_pair(tokenizer, sentence, None, SEQ_LENGTH) for sentence in sentences]
    inputs = {name: np.array([example[name] for example in encoded], np.int32)
              for name in ("input_word_ids", "input_mask", "input_type_ids")}
    predictions = _predict(deployment, inputs).argmax(-1)
    accuracy = float(np.mean(predictions == np.array([LABELS.index(label) for label in labels])))
    assert accuracy == pytest.approx(deployment["dev_accuracy"])
    # A second run into the same directory is refused without --overwrite.
    again = run_script("export_for_serving", f"--checkpoint={tmp_path / 'run'}", f"--eval_file={dev_file}",
                       f"--output_dir={output_dir}")
    assert again.returncode == 1 and "exists and is not empty" in again.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_row_that_fails_is_reported_and_not_chosen(tmp_path, spm_model_file):
    write_fine_tuned(tmp_path / "run")
    dev_file, _, labels = write_dev_file(tmp_path / "dev.tsv")
    calls = []

    def run_row(row, artifacts, settings, predict_dev=False):
        calls.append(row.name)
        if row.name == "ours_tflite_float32":
            raise RuntimeError("The serve row ours_tflite_float32 failed in its child process (exit 1):\nboom")
        return serving.run_row_child(row, artifacts, settings, predict_dev=predict_dev)

    deployment = choose_deployment(str(tmp_path / "run"), str(dev_file), str(tmp_path / "deploy"),
                                   spm_model_file=spm_model_file, seq_length=SEQ_LENGTH,
                                   candidates=["ours_saved_model", "ours_tflite_float32"], runs=2, warmup_runs=1,
                                   repeats=2, run_row=run_row)
    assert calls == ["ours_saved_model", "ours_tflite_float32", "ours_saved_model"]  # a failed row runs once
    assert deployment["chosen"] == "ours_saved_model" and deployment["runtime"] == "tensorflow"
    failed = deployment["candidates"][1]
    assert failed["status"] == "failed" and failed["failed"].endswith("boom") and "latency_ms_median" not in failed
    assert sorted(os.listdir(tmp_path / "deploy")) == ["deployment.json", "saved_model"]
    assert json.loads((tmp_path / "deploy" / "deployment.json").read_text())["dev_examples"] == len(labels)
    assert deployment["load"].startswith(f'tf.saved_model.load("{tmp_path / "deploy" / "saved_model"}")')
