"""The finetune_text workload (albert_tf/benchmarking/finetune_text.py): the built-in data tokenized once, the rows
interleaved, their records and table, and end to end through run_scripts.benchmark with ours and transformers."""
import json
import os
import pathlib

import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf.benchmarking import finetune_text
from albert_tf.benchmarking.child_process import ChildRun
from albert_tf.benchmarking.finetune_text import (FinetuneRow, FinetuneTextSettings, length_histogram,
                                                  prepare_text_data, run_finetune_text)
from albert_tf.benchmarking.finetune_text_child import text_classification_options
from albert_tf.benchmarking.tables import finetune_text_table
from albert_tf.tasks.model_source import resolve_tokenizer
from albert_tf.tasks.text_classification import build_task
from albert_tf.tokenization import AlbertTokenizer
from albert_tf.training.compile_choice import cpu_model_name
from data_gen.readers.glue import encode_text_pair
from tests.helpers import run_script, tiny_config_values

# The vocabulary of the SentencePiece model the workload trains on the built-in corpus (the demo's) fits.
TINY = tiny_config_values(vocab_size=5000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                          initializer_range=0.02)
BATCH, SEQ, EXAMPLES = 16, 64, 40
ROW_FIELDS = ("data", "configuration", "implementation", "padding", "precision", "seq_length", "batch_size",
              "train_examples", "train_real_tokens", "dev_examples", "dev_real_tokens", "train_examples_per_s_median",
              "train_real_tokens_per_s", "predict_examples_per_s_median", "predict_real_tokens_per_s",
              "end_to_end_seconds_median", "peak_rss_mb", "cpu_model", "date", "runs")


def _settings(spm_model_file, **overrides):
    values = dict(config=AlbertConfig(**TINY).to_dict(), model_name="tiny", seq_lengths=(SEQ,), batch_size=BATCH,
                  repeats=2, spm_model_file=spm_model_file, built_in_data=("pairs",), max_examples=EXAMPLES)
    return FinetuneTextSettings(**dict(values, **overrides))


def test_settings_refuse_what_no_run_can_do_in_one_sentence():
    config = AlbertConfig(**TINY).to_dict()
    with pytest.raises(ValueError, match=r"^finetune_text max_seq_lengths \[128\] must be between 16 and the model's "
                                         r"max_position_embeddings=64\.$"):
        FinetuneTextSettings(config, "tiny", seq_lengths=(128,))
    with pytest.raises(ValueError, match=r"^Unknown finetune_text built-in data \['reviews'\]; allowed: sentences, "
                                         r"pairs\.$"):
        FinetuneTextSettings(config, "tiny", seq_lengths=(SEQ,), built_in_data=("reviews",))
    with pytest.raises(ValueError, match="precisions"):
        FinetuneTextSettings(config, "tiny", seq_lengths=(SEQ,), precisions=("float16",))


def test_rows_run_interleaved_on_the_same_ids_and_their_records_count_the_same_real_tokens(spm_model_file,
                                                                                       tmp_path, monkeypatch):
    monkeypatch.setattr(finetune_text, "check_peers_installed", lambda peers: None)
    calls, data_sets = [], []

    def fake_run(row, precision, data, settings):
        """A child's record, its seconds from a per-row speed."""
        calls.append((row.label, precision))
        data_sets.append(data)
        speed = 1.0 + len(calls) % 5
        return {"implementation": row.implementation, "padding": row.padding, "mixed_precision": precision,
                "jit_compile": None, "import_seconds": 1.0, "end_to_end_seconds": 10.0 / speed,
                "peak_rss_mb": 100.0 + len(calls), "timed_epochs": settings.timed_epochs,
                "train_seconds": 2.0 / speed, "predict_seconds": 1.0 / speed}

    settings = _settings(spm_model_file, precisions=("float32", "bfloat16"))
    records = run_finetune_text(settings, ["transformers"], work_dir=str(tmp_path), run_ours=fake_run,
                                run_peer=fake_run)
    labels = ["ours, dynamic padding", "ours, group_by_length", "ours, padded to max_seq_length",
              "transformers, DataCollatorWithPadding", "transformers, group_by_length"]
    one_pass = [(label, precision) for precision in ("float32", "bfloat16") for label in labels]
    assert calls == one_pass * 2  # the whole set of rows, then again
    # The ids every row gets are those our tokenizer gives the training file's texts.
    data = data_sets[0]
    assert all(other is data for other in data_sets)
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    rows = [line.split("\t") for line in pathlib.Path(data.train_file).read_text(encoding="utf-8").splitlines()[1:]]
    with np.load(data.ids_file) as ids:
        for index, (text_a, text_b, _) in enumerate(rows):
            expected = encode_text_pair(tokenizer, text_a, text_b, SEQ)
            assert ids["train_input_word_ids"][index].tolist() == expected["input_word_ids"]
            assert ids["train_input_type_ids"][index].tolist() == expected["input_type_ids"]
        assert (ids["train_input_mask"].sum(axis=1) == data.train_lengths).all()
    assert [(record["configuration"], record["precision"]) for record in records] == one_pass
    # Every split of the built-in pair data, cut to whole batches of the training examples.
    train_examples = EXAMPLES // BATCH * BATCH
    assert all(record["train_examples"] == train_examples and record["dev_examples"] == EXAMPLES
               for record in records)
    assert len({(record["train_real_tokens"], record["dev_real_tokens"]) for record in records}) == 1
    lines = (tmp_path / "data" / "built-in_pairs" / "train.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "sentence_a\tsentence_b\tlabel" and len(lines) == 1 + train_examples
    for record in records:
        assert set(ROW_FIELDS) <= set(record) and record["repeats"] == 2
        tokens_per_example = record["train_real_tokens"] / record["train_examples"]
        assert record["train_real_tokens_per_s"] == pytest.approx(record["train_examples_per_s_median"]
                                                                  * tokens_per_example)
        rates = [train_examples * run["timed_epochs"] / run["train_seconds"] for run in record["runs"]]
        assert (record["train_examples_per_s_min"], record["train_examples_per_s_max"]) == (min(rates), max(rates))
        assert record["peak_rss_mb"] == max(run["peak_rss_mb"] for run in record["runs"])
        assert all(run["cpu_model"] == cpu_model_name() and run["date"] for run in record["runs"])
        assert sum(record["train_length_histogram"].values()) == train_examples
    table = finetune_text_table(records).splitlines()
    assert table[0].startswith("| data | max_seq_length | precision | configuration | train examples/s |")
    assert len(table) == 2 + len(records)


def test_a_row_that_fails_is_recorded_with_its_reason_not_run_again_and_the_other_rows_carry_on(spm_model_file,
                                                                                              tmp_path, monkeypatch):
    monkeypatch.setattr(finetune_text, "check_peers_installed", lambda peers: None)
    monkeypatch.setattr(finetune_text, "check_peers_can_build", lambda config, name: None)
    calls = []

    def fake_run(row, precision, data, settings):
        calls.append(row.label)
        if row.implementation == "keras-hub":
            raise RuntimeError("The finetune_text row keras-hub failed in its child process (killed by SIGKILL):\n"
                               "Killed")
        return {"implementation": row.implementation, "padding": row.padding, "mixed_precision": precision,
                "jit_compile": None, "import_seconds": 1.0, "end_to_end_seconds": 10.0, "peak_rss_mb": 100.0,
                "timed_epochs": settings.timed_epochs, "train_seconds": 2.0, "predict_seconds": 1.0}

    settings = _settings(spm_model_file, precisions=("float32",), repeats=3)
    records = run_finetune_text(settings, ["keras-hub"], work_dir=str(tmp_path), run_ours=fake_run,
                                run_peer=fake_run)
    keras_hub = "keras-hub, padded to sequence_length"
    assert calls.count(keras_hub) == 1 and calls.count("ours, dynamic padding") == 3
    failed, = [record for record in records if "failed" in record]
    assert failed["configuration"] == keras_hub and failed["seq_length"] == SEQ and failed["runs"] == []
    assert failed["failed"].endswith("(killed by SIGKILL):\nKilled") and failed["cpu_model"] == cpu_model_name()
    assert failed["train_examples"] == EXAMPLES // BATCH * BATCH
    assert all(record["repeats"] == 3 for record in records if record is not failed)
    table = finetune_text_table(records).splitlines()
    assert len(table) == 2 + len(records) + 2
    assert table[-1] == (f"Failed: {keras_hub} at {SEQ}, float32: The finetune_text row keras-hub failed in its "
                         "child process (killed by SIGKILL):")


def test_our_rows_read_the_features_the_parent_tokenized_and_the_peers_get_their_ids(spm_model_file, tmp_path,
                                                                                      monkeypatch):
    specs = []
    monkeypatch.setattr(finetune_text, "run_python_child",
                        lambda arguments, *_, **__: specs.append(arguments) or ChildRun({}))
    settings = _settings(spm_model_file, repeats=1, precisions=("float32",))
    data, = prepare_text_data(settings, str(tmp_path))
    finetune_text.run_ours_child(FinetuneRow("albert-tf", "dynamic"), "float32", data, settings)
    finetune_text.run_peer_child(FinetuneRow("transformers", "group_by_length"), "float32", data, settings)
    ours, peer = (json.loads(arguments[-1]) for arguments in specs)
    assert specs[0][:2] == ["-m", "albert_tf.benchmarking.finetune_text_child"]
    assert specs[1][:4] == ["-m", "peers.finetune_text", "transformers", "float32"]
    assert peer["ids_file"] == data.ids_file and peer["group_by_length"] and peer["batch_size"] == BATCH
    assert ours["options"]["pad_to_max_seq_length"] is False and ours["options"]["cached_dir"] == data.cached_dir
    cache = {name: os.stat(os.path.join(data.cached_dir, name)).st_mtime_ns for name in os.listdir(data.cached_dir)}
    # The steady run's options read every split; their features come from the cache, unchanged.
    options = text_classification_options(ours, str(tmp_path / "run"), 2, do_train=True, do_eval=True,
                                          do_predict=True)
    task = build_task(options, resolve_tokenizer(options.finetuning))
    assert {name: os.stat(os.path.join(data.cached_dir, name)).st_mtime_ns
            for name in os.listdir(data.cached_dir)} == cache
    assert task.train_data.num_examples == len(data.train_lengths) == EXAMPLES // BATCH * BATCH
    assert task.predict_splits[0].num_examples == len(data.dev_lengths)


def test_the_histogram_covers_dynamic_paddings_buckets_up_to_max_seq_length():
    assert length_histogram([3, 17, 33, 100], 100) == {"1-16": 1, "17-32": 1, "33-64": 1, "65-100": 1}
    assert length_histogram([16], 16) == {"1-16": 1}


@pytest.mark.slow
def test_benchmark_runs_finetune_text_end_to_end_with_ours_and_transformers(tmp_path):
    config_file = tmp_path / "tiny_config.json"
    AlbertConfig(**TINY).to_json_file(str(config_file))
    output_json = tmp_path / "finetune.json"
    result = run_script(
        "benchmark", "--workloads=finetune_text", f"--albert_config_file={config_file}", "--compare_peers=transformers",
        "--peer_precisions=float32", "--finetune_data=pairs", f"--finetune_seq_lengths={SEQ}",
        f"--finetune_batch_size={BATCH}", f"--finetune_max_examples={EXAMPLES}", "--repeats=1", "--jit_compile=false",
        f"--output_json={output_json}", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(output_json.read_text())
    assert [record["configuration"] for record in records] == [
        "ours, dynamic padding", "ours, group_by_length", "ours, padded to max_seq_length",
        "transformers, DataCollatorWithPadding", "transformers, group_by_length"]  # no pretraining-step comparison
    rows = {(record["implementation"], record["padding"]): record for record in records}
    for record in records:
        assert set(ROW_FIELDS) <= set(record), sorted(set(ROW_FIELDS) - set(record))
        assert record["data"] == "built-in pairs" and record["seq_length"] == SEQ and record["precision"] == "float32"
        assert record["train_examples"] == EXAMPLES // BATCH * BATCH and record["dev_examples"] == EXAMPLES
        assert record["train_examples_per_s_median"] > 0 and record["predict_examples_per_s_median"] > 0
        assert record["end_to_end_seconds_median"] > 0 and record["cpu_model"] == cpu_model_name()
        # The child's own peak, not the parent's that ru_maxrss would carry over from the fork.
        assert 100 < record["peak_rss_mb"] < 4000
    dynamic, grouped, padded = (rows["albert-tf", padding] for padding in ("dynamic", "group_by_length",
                                                                            "max_seq_length"))
    assert dynamic["train_real_tokens"] == padded["train_real_tokens"] == rows["transformers", "longest"][
        "train_real_tokens"]
    for record in (dynamic, grouped, padded):
        assert record["train_real_tokens_per_s"] == pytest.approx(
            record["train_examples_per_s_median"] * padded["train_real_tokens"] / padded["train_examples"])
        assert record["predict_real_tokens_per_s"] == pytest.approx(
            record["predict_examples_per_s_median"] * padded["dev_real_tokens"] / padded["dev_examples"])
        assert record["jit_compile"] is False and record["versions"]["tensorflow"]
    assert "tensorflow" not in rows["transformers", "group_by_length"]["versions"]
    assert rows["transformers", "group_by_length"]["versions"]["transformers"]
    histogram = [line for line in result.stderr.splitlines() if "train lengths in tokens" in line]
    assert len(histogram) == 1 and f"{EXAMPLES // BATCH * BATCH} examples, mean" in histogram[0]
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| data | max_seq_length | precision | configuration | train examples/s |")
    assert len(table) == 2 + 5 and table[2].startswith(f"| built-in pairs | {SEQ} | float32 | ours, dynamic padding |")


@pytest.mark.slow
@pytest.mark.parametrize("workload, flag", [("finetune_text", "finetune_seq_lengths"), ("serve", "serve_seq_lengths")])
def test_a_length_that_is_not_an_integer_is_one_usage_error_naming_its_flag(workload, flag):
    result = run_script("benchmark", f"--workloads={workload}", f"--{flag}=128,long", timeout=120)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1] == (
        f"error: --{flag}=128,long must be integers."), result.stderr[-2000:]
