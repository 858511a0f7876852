"""The serve workload (albert_tf/benchmarking/serving.py): its settings, the rows interleaved and skipped, the records'
figures and drift, the dev set's accuracy and McNemar's test, the rows' child processes, and end to end through
run_scripts.benchmark on a tiny fine-tuned classifier (as run_classifier leaves it) and its dev file, with a float32
row of every runtime, ours and Hugging Face's."""
import dataclasses
import json
import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.benchmarking import serving
from albert_tf.benchmarking.child_process import ChildRun
from albert_tf.benchmarking.serving import (ROW_NAMES, SERVE_ROWS, DevSet, ServeArtifacts, ServeSettings, dev_fields,
                                            discordant_pairs, mcnemar_p_values, read_fine_tuned, run_row_child,
                                            run_serving, serve_rows, skip_reason)
from albert_tf.benchmarking.tables import serve_table
from albert_tf.tokenization import AlbertTokenizer
from albert_tf.training.compile_choice import cpu_model_name
from data_gen.readers.glue import encode_text_pair
from tests.helpers import run_script
from tests.serving_fixtures import LABELS, TINY, write_dev_file, write_fine_tuned

LENGTHS, BATCH = (16, 32), 4
CASES = ["b1x16", "b1x32", "b4x32"]
FIELDS = ("workload", "row", "configuration", "implementation", "runtime", "precision", "preset", "seq_lengths",
          "batch_size", "artifact", "file_mb", "parameter_mb", "repeats", "latency_ms_b1x16_median",
          "latency_ms_b1x16_p95", "latency_ms_b1x16_min", "latency_ms_b1x16_max", "latency_ms_b1x32_median",
          "latency_ms_b1x32_p95", "latency_ms_b1x32_min", "latency_ms_b1x32_max",
          "throughput_seq_per_s_b4x32_median", "throughput_seq_per_s_b4x32_min", "throughput_seq_per_s_b4x32_max",
          "peak_rss_mb", "first_answer_seconds_median", "max_abs_logit_drift", "prediction_agreement",
          "predictions_compared", "inputs", "threads", "versions", "cpu_model", "bfloat16_units", "load_average",
          "date", "runs")
# A package no environment has: the rows that need it must be skipped.
ABSENT_PACKAGE = "albert_tf_serve_test_absent_package"
DEV_FIELDS = ("dev_examples", "dev_accuracy", "dev_accuracy_float32", "dev_accuracy_drop_points",
              "dev_prediction_agreement", "dev_max_abs_logit_drift", "dev_discordant", "dev_mcnemar_p", "dev_inputs")
# A hand-made dev set of 20 examples and 3 labels: 10 only float32 gets right, 2 only the other row, 4 both, and 4
# neither (3 of them with the same wrong answer).
HAND_LABELS = np.array([0] * 10 + [1] * 2 + [2] * 4 + [0] * 4)
HAND_FLOAT32 = np.array([0] * 10 + [0] * 2 + [2] * 4 + [1, 1, 1, 2])
HAND_OTHER = np.array([1] * 10 + [1] * 2 + [2] * 4 + [1, 1, 1, 1])
# McNemar's exact two-sided p-value of 10 against 2: 2 * P(X <= 2), X ~ Binomial(12, 1/2).
HAND_P_VALUE = 2 * (1 + 12 + 66) / 2 ** 12


def _settings(**overrides):
    values = dict(config=AlbertConfig(**TINY).to_dict(), model_name="tiny", seq_lengths=LENGTHS, batch_size=BATCH,
                  runs=5, batch_runs=2, warmup_runs=1, repeats=2, inputs="random")
    return ServeSettings(**dict(values, **overrides))


def test_settings_refuse_bad_values_in_one_sentence():
    with pytest.raises(ValueError, match=r"^serve rows \['ours_onnx', 'ours_gpu'\] must name one or more of "
                                         r"ours_saved_model, .*, hf_openvino_bfloat16\.$"):
        _settings(rows=["ours_onnx", "ours_gpu"])
    with pytest.raises(ValueError, match=r"^serve seq_lengths \[32, 128\] must be between 3 \(a token between "
                                         r"\[CLS\] and \[SEP\]\) and the model's max_position_embeddings=64\.$"):
        _settings(seq_lengths=(32, 128))
    with pytest.raises(ValueError, match=r"^serve setting runs must be an integer of at least 1, got 0\.$"):
        _settings(runs=0)
    with pytest.raises(ValueError, match=r"^serve setting batch_size must be an integer of at least 2, got 1\.$"):
        _settings(batch_size=1)
    with pytest.raises(ValueError, match=r"^serve inputs 'images' must be one of text, random\.$"):
        _settings(inputs="images")
    with pytest.raises(ValueError, match=r"^serve rows \['hf_torch'\] are transformers' rows; compare with it "
                                         r"\(--compare_peers=transformers\) to run them\.$"):
        serve_rows(_settings(rows=["ours_onnx", "hf_torch"]))
    with pytest.raises(ValueError, match=r"^The serve workload compares with transformers only; --compare_peers "
                                         r"names keras-hub\.$"):
        serve_rows(_settings(), ["keras-hub", "transformers"])


def test_rows_are_ours_and_the_named_peers_in_order():
    assert [row.name for row in serve_rows(_settings())] == [name for name in ROW_NAMES if name.startswith("ours")]
    assert [row.name for row in serve_rows(_settings(), ["transformers"])] == list(ROW_NAMES)
    assert _settings().cases() == CASES
    assert len(set(ROW_NAMES)) == len(ROW_NAMES) == len({row.label for row in SERVE_ROWS})


def test_a_row_whose_package_is_absent_names_it():
    row = dataclasses.replace(serving.SERVE_ROWS[0], packages=("numpy", ABSENT_PACKAGE))
    assert skip_reason(row).startswith(f"{ABSENT_PACKAGE} not installed (`make onnx` installs the onnx extra")
    assert skip_reason(serving.SERVE_ROWS[0]) is None


def _fake_artifacts(settings):
    rng = np.random.default_rng(0)
    reference = {case: rng.normal(size=(int(case[1:].split("x")[0]), 2)) for case in settings.cases()}
    paths = {row.artifact: f"/artifacts/{row.artifact}" for row in SERVE_ROWS}
    return ServeArtifacts(paths, "/artifacts/inputs.npz", "random ids", reference, {"onnx_optimized": {"Attention": 1}},
                          parameter_bytes=4_000_000)


def test_rows_run_interleaved_skip_what_cannot_run_and_record_every_figure(monkeypatch, caplog):
    settings = _settings(repeats=3)
    artifacts = _fake_artifacts(settings)
    monkeypatch.setattr(serving, "prepare_serving", lambda settings, rows, directory, **_: artifacts)
    monkeypatch.setattr(serving, "_bytes", lambda path: 2_500_000)
    monkeypatch.setattr(serving, "cpu_bfloat16_units", lambda: False)
    monkeypatch.setattr(serving, "SERVE_ROWS", tuple(
        dataclasses.replace(row, packages=row.packages + (ABSENT_PACKAGE,)) if row.runtime == "openvino" else row
        for row in SERVE_ROWS))
    calls = []

    def fake_run(row, artifacts, settings, predict_dev):
        """A child's record: every call's seconds from the run's number; the batch's last logit off by 0.125 in
        the TFLite rows, and the first sequence's two logits swapped in the int8 ones."""
        assert not predict_dev  # no dev set
        calls.append(row.name)
        scale = 1 + len(calls) % 3
        logits = {case: values.copy() for case, values in artifacts.reference_logits.items()}
        if row.runtime == "tflite":
            logits["b4x32"][-1, -1] += 0.125
        if row.precision == "int8":
            logits["b1x16"] = logits["b1x16"][:, ::-1]
        return {"row": row.name, "first_answer_seconds": 2.0 * scale, "peak_rss_mb": 100.0 * scale, "threads": 2,
                "seconds": {"b1x16": [0.001 * scale * (1 + index) for index in range(5)],
                            "b1x32": [0.002 * scale] * 5, "b4x32": [0.010 * scale, 0.030 * scale]},
                "logits": {case: values.tolist() for case, values in logits.items()}, "onnxruntime": "1.0"}

    with caplog.at_level(logging.WARNING):
        records = run_serving(settings, ["transformers"], run_row=fake_run)
    skipped = {row.name for row in SERVE_ROWS if row.runtime == "openvino" or row.precision in ("bfloat16",
                                                                                                 "mixed_bfloat16")}
    runnable = [name for name in ROW_NAMES if name not in skipped]
    assert calls == runnable * 3  # every row once, then again
    assert [record["row"] for record in records] == list(ROW_NAMES)
    for record in records:
        if record["row"] in skipped:
            assert set(record) >= {"configuration", "skipped", "cpu_model"} and "latency_ms_b1x16_median" not in record
            continue
        assert set(FIELDS) <= set(record), sorted(set(FIELDS) - set(record))
        assert not set(DEV_FIELDS) & set(record)
        assert record["repeats"] == 3 and record["cpu_model"] == cpu_model_name()
        assert record["file_mb"] == 2.5 and record["parameter_mb"] == 4.0 and record["inputs"] == "random ids"
    by_row = {record["row"]: record for record in records}
    assert all(ABSENT_PACKAGE in by_row[name]["skipped"] for name in ("ours_openvino", "hf_openvino_bfloat16"))
    assert by_row["ours_saved_model_bfloat16"]["skipped"].startswith("this CPU has no bfloat16 units")
    assert f"serve skips ours_openvino (ours, ONNX in OpenVINO): {ABSENT_PACKAGE} not installed" in caplog.text
    # The first row's runs were calls 1, 12 and 23 (11 rows ran): scales 2, 1 and 3.
    first = by_row["ours_saved_model"]
    assert [run["first_answer_seconds"] for run in first["runs"]] == [4.0, 2.0, 6.0]
    assert first["latency_ms_b1x16_median"] == pytest.approx(6.0)
    assert (first["latency_ms_b1x16_min"], first["latency_ms_b1x16_max"]) == pytest.approx((3.0, 9.0))
    assert first["latency_ms_b1x16_p95"] == pytest.approx(2 * 4.8)  # 95th percentile of 1..5 ms, scale 2
    assert first["throughput_seq_per_s_b4x32_median"] == pytest.approx(4 / 0.040)
    assert first["peak_rss_mb"] == 300.0 and first["first_answer_seconds_median"] == 4.0
    assert first["max_abs_logit_drift"] == 0.0 and first["prediction_agreement"] == 1.0
    assert first["predictions_compared"] == 1 + 1 + BATCH and "logits" not in first["runs"][0]
    assert by_row["ours_tflite_float32"]["max_abs_logit_drift"] == pytest.approx(0.125)
    assert by_row["ours_tflite_int8"]["prediction_agreement"] == pytest.approx(5 / 6)
    assert by_row["ours_onnx_optimized"]["fused_ops"] == {"Attention": 1}
    assert by_row["ours_onnx"]["versions"] == {"onnxruntime": "1.0"}
    table = serve_table(records).splitlines()
    assert table[0].startswith("| path | precision | file MB | b1 x 16 ms: median (min-max), p95 |")
    assert len(table) == 2 + len(runnable) + 3 and table[-2].startswith("Skipped: ours, SavedModel mixed_bfloat16")


def _hand_dev_set(directory="/artifacts"):
    return DevSet(f"{directory}/dev_inputs.npz", 32, HAND_LABELS, np.eye(3)[HAND_FLOAT32], "20 hand-made examples")


def test_mcnemar_counts_the_discordant_examples_and_tests_them_exactly():
    assert discordant_pairs(HAND_LABELS, HAND_FLOAT32, HAND_OTHER) == (10, 2)
    assert discordant_pairs(HAND_LABELS, HAND_OTHER, HAND_FLOAT32) == (2, 10)
    fields = dev_fields(2 * np.eye(3)[HAND_OTHER], _hand_dev_set())
    assert fields == {"dev_examples": 20, "dev_accuracy": pytest.approx(0.30),
                      "dev_accuracy_float32": pytest.approx(0.70), "dev_accuracy_drop_points": pytest.approx(40.0),
                      "dev_prediction_agreement": pytest.approx(0.35), "dev_max_abs_logit_drift": 2.0,
                      "dev_inputs": "20 hand-made examples",
                      "dev_discordant": {"float32_right_only": 10, "row_right_only": 2}}
    # Symmetric in b and c; no discordant pair, or as many each way, is no evidence of a difference.
    assert mcnemar_p_values([(10, 2), (2, 10), (3, 3), (0, 0), (0, 5)]) == pytest.approx(
        [HAND_P_VALUE, HAND_P_VALUE, 1.0, 1.0, 2 / 2 ** 5])
    assert mcnemar_p_values([]) == []


def test_each_rows_first_run_predicts_the_dev_set_and_a_row_not_float32_gets_mcnemars_test(monkeypatch):
    settings = _settings(repeats=2, rows=["ours_saved_model", "ours_tflite_float32", "ours_onnx_int8"])
    artifacts = dataclasses.replace(_fake_artifacts(settings), dev=_hand_dev_set())
    monkeypatch.setattr(serving, "prepare_serving", lambda settings, rows, directory, **_: artifacts)
    monkeypatch.setattr(serving, "_bytes", lambda path: 1_000_000)
    monkeypatch.setattr(serving, "skip_reason", lambda row: None)
    calls = []

    def fake_run(row, artifacts, settings, predict_dev):
        calls.append((row.name, predict_dev))
        record = {"row": row.name, "first_answer_seconds": 1.0, "peak_rss_mb": 100.0, "threads": 2,
                  "seconds": {case: [0.001] * 2 for case in CASES},
                  "logits": {case: values.tolist() for case, values in artifacts.reference_logits.items()}}
        if predict_dev:
            classes = HAND_OTHER if row.precision == "int8" else HAND_FLOAT32
            record.update(dev_logits=np.eye(3)[classes].tolist(), dev_seconds=0.5)
        return record

    records = {record["row"]: record for record in run_serving(settings, run_row=fake_run)}
    assert calls == [(name, True) for name in settings.rows] + [(name, False) for name in settings.rows]
    for name in ("ours_saved_model", "ours_tflite_float32"):
        record = records[name]
        assert set(DEV_FIELDS) <= set(record) and record["dev_mcnemar_p"] is None
        assert record["dev_accuracy"] == record["dev_accuracy_float32"] == pytest.approx(0.70)
        assert record["dev_prediction_agreement"] == 1.0 and record["dev_accuracy_drop_points"] == 0.0
        assert "dev_logits" not in record["runs"][0] and record["runs"][0]["dev_seconds"] == 0.5
    int8 = records["ours_onnx_int8"]
    assert int8["dev_accuracy"] == pytest.approx(0.30) and int8["dev_accuracy_drop_points"] == pytest.approx(40.0)
    assert int8["dev_discordant"] == {"float32_right_only": 10, "row_right_only": 2}
    assert int8["dev_mcnemar_p"] == pytest.approx(HAND_P_VALUE)
    table = serve_table(list(records.values())).splitlines()
    assert table[0].endswith("| dev accuracy | drop (points) | dev agreement | McNemar p |")
    assert table[2].endswith("| 70.00% | +0.00 | 100.0% | — |")
    assert table[4].endswith("| 30.00% | +40.00 | 35.0% | 0.039 |")
    assert table[-1].startswith("Dev set: 20 hand-made examples; our float32 SavedModel's accuracy 70.00%;")


def test_a_checkpoint_or_eval_file_that_cannot_be_used_is_refused_in_one_sentence(tmp_path):
    missing = str(tmp_path / "no_run")
    with pytest.raises(ValueError, match=rf"^serve checkpoint {re.escape(missing)} does not exist: give a "
                                         r"fine-tuned classifier's output directory or checkpoint prefix "
                                         r"\(--serve_checkpoint\)\.$"):
        _settings(checkpoint=missing)
    with pytest.raises(ValueError, match=rf"^serve eval_file {re.escape(missing)}\.tsv scores a fine-tuned "
                                         r"classifier: give its checkpoint too \(--serve_checkpoint\)\.$"):
        _settings(eval_file=missing + ".tsv")
    run = tmp_path / "run"
    write_fine_tuned(run)
    with pytest.raises(ValueError, match=rf"^serve eval_file {re.escape(missing)}\.tsv does not exist "
                                         r"\(--serve_eval_file\)\.$"):
        _settings(checkpoint=str(run), eval_file=missing + ".tsv")
    unlabelled, _, _ = write_dev_file(tmp_path / "unlabelled.tsv", with_labels=False)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(unlabelled))}:1: the header has no column 'label' "
                                         r"\(--serve_label_field\); its columns are \['sentence'\]\.$"):
        read_fine_tuned(_settings(checkpoint=str(run), eval_file=str(unlabelled)))
    dev_file, _, _ = write_dev_file(tmp_path / "dev.tsv")
    fine_tuned = read_fine_tuned(_settings(checkpoint=str(run / "ckpt-5"), eval_file=str(dev_file)))
    assert fine_tuned.num_labels == 3 and fine_tuned.labels == LABELS and len(fine_tuned.dev_examples) == 40
    (run / "labels.txt").write_text("bird\ncat\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(run / 'labels.txt'))} names 2 labels, but the "
                                         r"classifier head of .*ckpt-5 has 3\.$"):
        read_fine_tuned(_settings(checkpoint=str(run), eval_file=str(dev_file)))
    (run / "labels.txt").unlink()
    with pytest.raises(ValueError, match=r"^serve checkpoint .*ckpt-5 has no labels\.txt beside it \(run_classifier "
                                         r"writes the model's labels in its output directory\), so the eval file's "
                                         r"labels cannot be matched to its outputs\.$"):
        read_fine_tuned(_settings(checkpoint=str(run), eval_file=str(dev_file)))


def test_each_row_runs_its_runtime_in_a_child_with_the_cases_and_the_onnx_extra(monkeypatch):
    settings = _settings()
    artifacts = _fake_artifacts(settings)
    commands = []
    monkeypatch.setattr(serving, "run_python_child", lambda arguments, *_, **__: commands.append(arguments)
                        or ChildRun({}))
    rows = {row.name: row for row in SERVE_ROWS}
    run_row_child(rows["ours_tflite_int8"], artifacts, settings)
    run_row_child(rows["hf_torch_bfloat16"], artifacts, settings)
    ours, peer = commands
    assert ours[:2] == ["-m", "albert_tf.benchmarking.serving_child"]
    assert peer[:3] == ["-m", "peers.serving", "run"]
    spec = json.loads(ours[-1])
    assert spec["runtime"] == "tflite" and spec["precision"] == "int8" and spec["artifact"] == "/artifacts/tflite_int8"
    assert spec["cases"] == CASES and spec["runs"] == {"b1x16": 5, "b1x32": 5, "b4x32": 2}
    assert spec["warmup_runs"] == 1 and spec["extra_paths"] == [serving.ONNX_PACKAGES] and spec["threads"] >= 1
    assert json.loads(peer[-1])["precision"] == "bfloat16"


FLOAT32_ROWS = ("ours_saved_model", "ours_xla", "ours_tflite_float32", "ours_onnx_optimized", "ours_openvino",
                "hf_torch", "hf_onnx_optimized")
OTHER_ROWS = ("ours_saved_model_bfloat16", "ours_onnx_int8")


@pytest.mark.slow
def test_benchmark_serves_a_fine_tuned_classifier_by_every_runtime_on_the_same_answers(tmp_path, spm_model_file):
    """A float32 row of every runtime, and beside them a bfloat16 and an int8 row, whose answers move by about their
    precision; each predicts the dev file: the float32 rows exactly as our SavedModel, the others with McNemar's
    test. The model is a checkpoint as run_classifier leaves it, its config read from beside it."""
    model = write_fine_tuned(tmp_path / "run")
    dev_file, _, dev_labels = write_dev_file(tmp_path / "dev.tsv")
    output_json = tmp_path / "serve.json"
    result = run_script(
        "benchmark", "--workloads=serve", f"--serve_checkpoint={tmp_path / 'run'}", f"--serve_eval_file={dev_file}",
        "--compare_peers=transformers", f"--serve_rows={','.join(FLOAT32_ROWS + OTHER_ROWS)}",
        "--serve_seq_lengths=16,32", f"--serve_batch_size={BATCH}", "--serve_runs=2", "--serve_batch_runs=1",
        "--serve_warmup_runs=1", "--repeats=1", f"--spm_model_file={spm_model_file}",
        f"--work_dir={tmp_path / 'work'}", f"--output_json={output_json}", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = {record["row"]: record for record in json.loads(output_json.read_text())}
    assert list(records) == [name for name in ROW_NAMES if name in FLOAT32_ROWS + OTHER_ROWS]
    # Our float32 accuracy, here: the dev file encoded as run_classifier encodes it, cut to the longest length.
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    sentences = [line.split("\t")[0] for line in dev_file.read_text().splitlines()[1:]]
    encoded = [encode_text_pair(tokenizer, sentence, None, 32) for sentence in sentences]
    logits = model({name: np.array([example[name] for example in encoded], np.int32)
                    for name in ("input_word_ids", "input_mask", "input_type_ids")}, training=False).numpy()
    accuracy = np.mean(logits.argmax(-1) == np.array([LABELS.index(label) for label in dev_labels]))
    assert 0 < accuracy < 1 and len(set(logits.argmax(-1))) > 1
    for name, record in records.items():
        if "skipped" in record:  # only where a package or the CPU's bfloat16 units are missing
            print(f"skipped {name}: {record['skipped']}")
            continue
        assert set(FIELDS + DEV_FIELDS) <= set(record), sorted(set(FIELDS + DEV_FIELDS) - set(record))
        assert record["preset"] == f"fine-tuned {tmp_path / 'run'}"
        assert record["latency_ms_b1x16_median"] > 0 and record["throughput_seq_per_s_b4x32_median"] > 0
        assert 0 < record["first_answer_seconds_median"] < 120 and 20 < record["peak_rss_mb"] < 4000
        assert record["file_mb"] > 0.3 * record["parameter_mb"] and record["inputs"].startswith("built-in corpus text")
        assert record["dev_examples"] == 40 and record["dev_accuracy_float32"] == pytest.approx(accuracy)
        if record["precision"] == "float32":
            assert record["max_abs_logit_drift"] < 1e-4 and record["prediction_agreement"] == 1.0, record
            assert record["dev_max_abs_logit_drift"] < 1e-4 and record["dev_prediction_agreement"] == 1.0, record
            assert record["dev_accuracy"] == record["dev_accuracy_float32"] and record["dev_mcnemar_p"] is None
        else:  # the logits move, by about the precision of bfloat16 or int8 at unit logits
            assert 1e-4 < record["max_abs_logit_drift"] < 0.2, (name, record["max_abs_logit_drift"])
            assert 1e-4 < record["dev_max_abs_logit_drift"] < 0.2, (name, record["dev_max_abs_logit_drift"])
            float32_only, row_only = record["dev_discordant"].values()
            assert record["dev_accuracy"] == pytest.approx(accuracy + (row_only - float32_only) / 40)
            assert 0 < record["dev_mcnemar_p"] <= 1 and (record["dev_mcnemar_p"] == 1) == (float32_only == row_only)
    assert records["ours_saved_model"]["max_abs_logit_drift"] < 1e-6  # the reference's own path
    assert records["hf_torch"]["versions"].keys() == {"torch", "transformers"}
    assert "tensorflow" in records["ours_xla"]["versions"]
    for name in ("ours_onnx_optimized", "ours_onnx_int8", "hf_onnx_optimized"):  # each fuses one of its two layers
        assert "skipped" in records[name] or records[name]["fused_ops"]["Attention"] == 1, records[name]
    # The ONNX rows' processes import no TensorFlow: their peak RSS is far below the SavedModel's.
    for name in ("ours_onnx_optimized", "hf_onnx_optimized"):
        if "skipped" not in records[name]:
            assert records[name]["peak_rss_mb"] < records["ours_saved_model"]["peak_rss_mb"] / 2, name
    # Every sequence is real text filling its length: [CLS] first, [SEP] last, no padding.
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    with np.load(tmp_path / "work" / "serve" / "inputs.npz") as inputs:
        for case in CASES:
            ids, mask = inputs[f"{case}/input_word_ids"], inputs[f"{case}/input_mask"]
            assert ids.shape == (int(case[1:].split("x")[0]), int(case.split("x")[1])) and mask.all()
            assert (ids[:, 0] == cls).all() and (ids[:, -1] == sep).all()
        assert len(np.unique(inputs["b4x32/input_word_ids"])) > 20
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| path | precision | file MB |") and len(table) == 2 + sum(
        "skipped" not in record for record in records.values())
    assert table[0].endswith("| dev accuracy | drop (points) | dev agreement | McNemar p |")


@pytest.mark.slow
def test_benchmark_refuses_a_bad_serve_flag_in_one_line(tmp_path):
    result = run_script("benchmark", "--workloads=serve", "--serve_rows=ours_onnx,ours_gpu", "--serve_runs=0")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: serve setting runs must be an integer")
    write_fine_tuned(tmp_path / "run")
    dev_file, _, _ = write_dev_file(tmp_path / "dev.tsv")
    result = run_script("benchmark", "--workloads=serve", f"--serve_checkpoint={tmp_path / 'run'}",
                        f"--serve_eval_file={dev_file}", "--serve_label_field=topic", "--serve_seq_lengths=16,32")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {dev_file}:1: the header has no column 'topic' (--serve_label_field); its columns are "
        "['sentence', 'label'].")
    result = run_script("benchmark", "--workloads=serve", "--serve_rows=ours_onnx,hf_torch")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: serve rows ['hf_torch'] are transformers' rows; compare with it (--compare_peers=transformers) to "
        "run them.")
