import json
import math

import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf.benchmarking import peer_comparison
from albert_tf.benchmarking.peer_protocol import PEERS
from albert_tf.training.compile_choice import cpu_model_name
from albert_tf.benchmarking.tables import markdown_table, peer_table
from albert_tf.benchmarking.workloads import RECORD_FIELDS, BenchmarkSettings, random_batch
from tests.helpers import run_script, tiny_config_values

TINY = tiny_config_values(vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          intermediate_size=64, max_position_embeddings=32, initializer_range=0.02)
BATCH, SEQ, PREDICTIONS = 2, 16, 3


def _settings(**overrides):
    values = dict(config=AlbertConfig(**TINY).to_dict(), model_name="tiny", batch_size=BATCH, seq_length=SEQ,
                  max_predictions_per_seq=PREDICTIONS, steps=1, warmup_steps=1, repeats=1, jit_compile=False)
    return BenchmarkSettings(**dict(values, **overrides))


def _fake_run(rates, calls):
    """A child run that reports the next rate of its configuration, and records the order it was called in."""
    def run(configuration, *_):
        calls.append(configuration.label)
        return {"seq_per_s": rates[configuration.label].pop(0), "peak_rss_mb": 100.0 + len(calls),
                "warmup_seconds": 1.0, "optimizer": f"{configuration.implementation} AdamW",
                "mixed_precision": configuration.precision, "jit_compile": None}

    return run


def test_peers_are_parsed_in_a_fixed_order_and_an_unknown_one_is_refused():
    assert peer_comparison.parse_peers(["transformers", "keras-hub", "transformers"]) == ("keras-hub", "transformers")
    assert peer_comparison.parse_peers([]) == ()
    with pytest.raises(ValueError, match=r"^Unknown peers \['jax'\]; allowed: keras-hub, transformers\.$"):
        peer_comparison.parse_peers(["keras-hub", "jax"])
    with pytest.raises(ValueError, match="Unknown peer precisions"):
        peer_comparison.configurations(["keras-hub"], ["float16"])


def test_configurations_run_ours_then_each_peer_per_precision():
    assert [row.label for row in peer_comparison.configurations(["transformers", "keras-hub"])] == [
        "ours float32", "keras-hub float32", "transformers float32",
        "ours bfloat16", "keras-hub bfloat16", "transformers bfloat16"]


def test_comparison_interleaves_the_repeats_and_takes_ratios_against_keras_hub_float32(monkeypatch):
    monkeypatch.setattr(peer_comparison, "check_peers_installed", lambda names: None)
    rates = {"ours float32": [3.0, 1.0, 2.0], "keras-hub float32": [4.0, 4.0, 5.0],
             "ours bfloat16": [8.0, 6.0, 7.0], "keras-hub bfloat16": [1.0, 2.0, 3.0]}
    calls = []
    run = _fake_run(rates, calls)
    records = peer_comparison.compare_peers(["keras-hub"], _settings(repeats=3), run_ours=run, run_peer=run)
    assert calls == ["ours float32", "keras-hub float32", "ours bfloat16", "keras-hub bfloat16"] * 3
    by_label = {record["configuration"]: record for record in records}
    assert [record["configuration"] for record in records] == calls[:4]
    ours = by_label["ours bfloat16"]
    assert (ours["seq_per_s_median"], ours["seq_per_s_min"], ours["seq_per_s_max"]) == (7.0, 6.0, 8.0)
    assert ours["vs_reference"] == pytest.approx(7.0 / 4.0)
    assert by_label["keras-hub float32"]["vs_reference"] == 1.0
    assert {record["reference"] for record in records} == {"keras-hub float32"}
    assert ours["peak_rss_mb"] == 100.0 + 11  # the largest of its three runs (calls 3, 7, 11)
    assert ours["repeats"] == 3 and ours["optimizer"] == "albert-tf AdamW"
    assert ours["cpu_model"] == cpu_model_name()
    assert set(RECORD_FIELDS) <= set(ours)
    assert ours["gflop_per_step"] > 0 and ours["gflop_per_s"] == pytest.approx(
        7.0 / BATCH * ours["gflop_per_step"])


def test_our_row_runs_the_pretraining_step_in_its_precision_with_adamw_once(monkeypatch):
    runs = []
    monkeypatch.setattr(peer_comparison, "run_in_subprocess",
                        lambda workload, settings, timeout_seconds=None: runs.append(
                            (workload, settings)) or {"seq_per_s_median": 2.0})
    for precision in ("float32", "bfloat16"):
        record = peer_comparison.run_ours(peer_comparison.Configuration("ours", precision), _settings(repeats=3))
        assert record["seq_per_s"] == 2.0 and record["optimizer"] == "albert-tf AdamW (original's)"
    assert [(workload, settings.mixed_precision, settings.optimizer, settings.repeats)
            for workload, settings in runs] == [("pretrain_step", "float32", "adamw", 1),
                                                ("pretrain_step", "mixed_bfloat16", "adamw", 1)]


def test_without_keras_hub_the_ratios_are_against_our_float32_step(monkeypatch):
    monkeypatch.setattr(peer_comparison, "check_peers_installed", lambda names: None)
    rates = {"ours float32": [2.0], "transformers float32": [1.0]}
    run = _fake_run(rates, [])
    records = peer_comparison.compare_peers(["transformers"], _settings(), precisions=["float32"], run_ours=run,
                                            run_peer=run)
    assert [(record["reference"], record["vs_reference"]) for record in records] == [
        ("ours float32", 1.0), ("ours float32", 0.5)]


def test_comparison_refuses_a_sharing_the_peers_cannot_build():
    with pytest.raises(ValueError, match="share_type='attention'"):
        peer_comparison.compare_peers(["keras-hub"],
                                      _settings(config=AlbertConfig(**TINY, share_type="attention").to_dict()))
    uneven_groups = AlbertConfig(**dict(TINY, num_hidden_layers=3, num_hidden_groups=2))
    with pytest.raises(ValueError, match="num_hidden_layers=3, num_hidden_groups=2"):
        peer_comparison.compare_peers(["transformers"], _settings(config=uneven_groups.to_dict()))


def test_missing_peer_packages_are_named_with_the_make_target(monkeypatch, tmp_path):
    monkeypatch.setattr(peer_comparison, "PEER_PACKAGES", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"needs keras_hub: run `make peers`"):
        peer_comparison.check_peers_installed(["keras-hub"])
    peer_comparison.check_peers_installed(["transformers"])  # requirements-dev.txt's


def test_outside_a_checkout_the_peer_steps_are_missing_and_said_to_be(monkeypatch, tmp_path):
    # As installed by pip: albert_tf's parent directory holds no peers/.
    monkeypatch.setattr(peer_comparison, "REPOSITORY_ROOT", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"from a checkout of albert-tf: .* has no peers/"):
        peer_comparison.check_peers_installed(["transformers"])
    peer_comparison.check_peers_installed([])  # no peer, nothing to run


def test_peer_table_sorts_by_speed_and_shows_the_ratio_and_the_cpu():
    records = [{"configuration": name, "optimizer": "AdamW", "seq_per_s_median": rate, "seq_per_s_min": rate - 0.5,
                "seq_per_s_max": rate + 0.5, "vs_reference": rate / 2.0, "peak_rss_mb": 1234.4,
                "reference": "keras-hub float32", "cpu_model": "Test CPU"}
               for name, rate in (("keras-hub float32", 2.0), ("ours bfloat16", 3.0))]
    lines = peer_table(records).splitlines()
    assert lines[0] == ("| configuration | optimizer | seq/s median (min-max) | vs keras-hub float32 | peak RSS MB "
                        "| CPU |")
    assert lines[2] == "| ours bfloat16 | AdamW | 3.00 (2.50-3.50) | 1.50x | 1,234 | Test CPU |"
    assert lines[3].startswith("| keras-hub float32 | AdamW | 2.00 (1.50-2.50) | 1.00x |")


def test_cpu_model_is_named_and_the_workload_table_shows_it():
    assert cpu_model_name() and "\n" not in cpu_model_name()
    record = {"workload": "encode", "preset": "tiny", "batch_size": 2, "seq_length": 16, "seq_per_s_median": 1.0,
              "seq_per_s_min": 1.0, "seq_per_s_max": 1.0, "cpu_model": "Test CPU"}
    header, _, row = markdown_table([record]).splitlines()
    assert header.endswith("| checkpoint MB | CPU |") and row.endswith("| - | Test CPU |")


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_each_peer_trains_the_same_batch_and_loss_in_its_own_process(precision, tmp_path):
    peer_comparison.check_peers_installed(PEERS)
    config = AlbertConfig(**TINY)
    batch_file = tmp_path / "batch.npz"
    np.savez(batch_file, **random_batch("pretrain_step", config, BATCH, SEQ, PREDICTIONS))
    spec = peer_comparison.peer_spec(_settings(steps=2), str(batch_file))
    records = [peer_comparison.run_peer(peer_comparison.Configuration(peer, precision), spec, timeout_seconds=300)
               for peer in PEERS]
    for peer, record in zip(PEERS, records):
        assert record["implementation"] == peer and record["precision"] == precision
        assert record["mlm_logits_shape"] == [BATCH, PREDICTIONS, config.vocab_size]
        assert record["sop_logits_shape"] == [BATCH, 2]
        # Random weights (initializer 0.02) start near uniform predictions: ln(V) for MLM plus ln(2) for SOP;
        # AdamW then fits the repeated batch.
        assert record["first_loss"] == pytest.approx(math.log(config.vocab_size) + math.log(2), abs=0.1)
        assert record["loss"] < record["first_loss"] - 0.05
        assert record["seq_per_s"] > 0 and record["peak_rss_mb"] > 100
    keras_hub, transformers = records
    assert keras_hub["optimizer"] == "keras AdamW" and keras_hub["jit_compile"] is False
    assert keras_hub["mixed_precision"] == ("mixed_bfloat16" if precision == "bfloat16" else "float32")
    assert keras_hub["keras_hub"] == "0.32.0"
    assert transformers["optimizer"] == "torch AdamW" and transformers["transformers"] == "5.23.0"
    assert "tensorflow" not in transformers  # its process never imported TensorFlow


@pytest.mark.slow
def test_benchmark_refuses_an_unknown_peer_or_precision_in_one_sentence():
    result = run_script("benchmark", "--compare_peers=keras-hub,unknown", timeout=120)
    assert result.returncode != 0
    assert "--compare_peers names ['unknown']; allowed: keras-hub, transformers." in result.stderr
    result = run_script("benchmark", "--compare_peers=keras-hub", "--peer_precisions=float32,float16", timeout=120)
    assert result.returncode != 0
    assert "--peer_precisions names ['float16']; allowed: float32, bfloat16." in result.stderr
    result = run_script("benchmark", "--compare_peers=keras-hub", "--peer_precisions=", timeout=120)
    assert result.returncode != 0
    assert "--peer_precisions is empty; name one or both of float32, bfloat16." in result.stderr


@pytest.mark.slow
def test_benchmark_compares_the_peers_end_to_end_on_a_tiny_config(tmp_path):
    # float32 only: each row is a process of its own (about 20 s to import its framework on a slow CPU), the
    # bfloat16 steps of the peers are the test above's and the order of the rows by precision is unit-tested.
    config_file = tmp_path / "tiny_config.json"
    AlbertConfig(**TINY).to_json_file(str(config_file))
    output_json = tmp_path / "peers.json"
    result = run_script(
        "benchmark", f"--albert_config_file={config_file}", "--compare_peers=keras-hub,transformers",
        "--peer_precisions=float32", f"--batch_size={BATCH}", f"--seq_length={SEQ}",
        f"--max_predictions_per_seq={PREDICTIONS}", "--steps=1", "--warmup_steps=1", "--repeats=1",
        "--jit_compile=false", f"--output_json={output_json}", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(output_json.read_text())
    assert [record["configuration"] for record in records] == [
        "ours float32", "keras-hub float32", "transformers float32"]  # no other workload ran
    by_label = {record["configuration"]: record for record in records}
    assert by_label["keras-hub float32"]["vs_reference"] == 1.0
    assert by_label["ours float32"]["mixed_precision"] == "float32"
    assert by_label["ours float32"]["optimizer"] == "albert-tf AdamW (original's)"
    assert all(record["cpu_model"] == cpu_model_name() and record["peak_rss_mb"] > 100 for record in records)
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| configuration | optimizer | seq/s median (min-max) | vs keras-hub float32 |")
    assert len(table) == 2 + 3
