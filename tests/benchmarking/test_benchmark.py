import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.benchmarking.flops import encoder_forward_flops, workload_flops
from albert_tf.benchmarking.probes import (checkpoint_bytes, parameter_bytes, peak_rss_bytes,
                                           reset_rss_high_water_mark, rss_high_water_mark_bytes)
from albert_tf.benchmarking.suite import BenchmarkOptions, DataWorkloadOptions, run_benchmarks
from albert_tf.benchmarking.workloads import MEASURED_FIELDS, RECORD_FIELDS, BenchmarkSettings, compare_presets
from albert_tf.models.param_count import model_parameters
from albert_tf.training.compile_choice import cpu_model_name
from albert_tf.training.summaries import write_scalars
from tests.helpers import run_script, tiny_config_values

TINY = tiny_config_values(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          intermediate_size=64, max_position_embeddings=64, initializer_range=0.02)


@pytest.mark.slow
def test_harness_runs_a_model_and_a_data_workload_and_writes_records(tmp_path):
    config_file = tmp_path / "tiny_config.json"
    AlbertConfig(**TINY).to_json_file(str(config_file))
    output_json = tmp_path / "records.json"
    result = run_script(
        "benchmark", f"--albert_config_file={config_file}", "--workloads=pretrain_step,input_pipeline",
        "--batch_size=4", "--seq_length=32", "--max_predictions_per_seq=4", "--steps=2", "--warmup_steps=1",
        "--repeats=1", "--jit_compile=false", "--isolate_workloads=false", "--corpus_documents=60",
        "--vocab_size=120", "--input_batches=5", "--num_output_shards=1", "--cpu_allocator=bfc",
        f"--output_json={output_json}", timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(output_json.read_text())
    assert [record["workload"] for record in records] == ["pretrain_step", "input_pipeline"]
    for record in records:
        assert set(RECORD_FIELDS) <= set(record)
        assert record["batch_size"] == 4 and record["seq_length"] == 32
        assert 0 < record["seq_per_s_min"] <= record["seq_per_s_median"] <= record["seq_per_s_max"]
        assert record["peak_rss_mb"] > 100
        assert record["cpu_allocator"] == "bfc"
        assert record["cpu_model"] == cpu_model_name()
    step = records[0]
    assert step["preset"] == "tiny_config.json" and step["mixed_precision"] == "float32"
    assert step["jit_compile"] is False
    assert step["optimizer"] == "lamb"  # run_pretraining's default
    expected_flops = workload_flops("pretrain_step", AlbertConfig(**TINY), 4, 32, 4)
    assert step["gflop_per_step"] == pytest.approx(expected_flops / 1e9)
    assert step["gflop_per_s"] == pytest.approx(step["seq_per_s_median"] / 4 * expected_flops / 1e9)
    assert step["peak_fraction"] == pytest.approx(step["gflop_per_s"] / step["peak_gflop_per_s"])
    assert step["peak_gflop_per_s"] == max(step["peak_gflop_per_s_xla"], step["peak_gflop_per_s_plain"])
    assert step["cpu_bfloat16_units"] in (True, False) and step["xla_bfloat16_dot_dtype"] is None  # float32 run
    assert step["parameter_mb"] == pytest.approx(step["checkpoint_mb"], rel=0.2)
    assert 100 < step["steady_peak_rss_mb"] <= step["peak_rss_mb"]
    assert records[1]["batches_per_s_median"] == pytest.approx(records[1]["seq_per_s_median"] / 4)
    table_rows = [line for line in result.stdout.splitlines() if line.startswith("| pretrain_step")
                  or line.startswith("| input_pipeline")]
    assert len(table_rows) == 2


def test_peak_rss_keeps_the_peak_from_before_a_high_water_mark_reset():
    transient = np.ones(300 * 2**20 // 8)  # 300 MiB, touched
    peak_with_transient = rss_high_water_mark_bytes()
    del transient
    if not reset_rss_high_water_mark():
        pytest.skip("/proc/self/clear_refs is not writable here")
    assert rss_high_water_mark_bytes() < peak_with_transient - 200 * 2**20
    # The kernel's page counts lag by a few pages per thread, so the two readings of one peak can differ slightly.
    assert peak_rss_bytes() > peak_with_transient - 4 * 2**20


def test_albert_base_checkpoint_stores_each_shared_weight_once():
    model = AlbertPretrainer(AlbertConfig.from_preset("albert-base"))
    size = checkpoint_bytes(model)
    # 11.7M encoder parameters + the heads, float32: about 47 MB. Twelve copies of the shared block
    # (7.1M parameters each) would add 340 MB.
    assert 46e6 < size < 48.5e6
    assert size == pytest.approx(4 * model_parameters(model), rel=0.01)
    assert parameter_bytes(model) == 4 * model_parameters(model)


def test_flop_formula_counts_every_matmul_once_per_depth():
    config = AlbertConfig(**TINY)
    # S=8: projection 2*8*16*32; per block 4*2*8*32*32 + 2*2*8*8*32 + 2*2*8*32*64, twice; pooler 2*32*32.
    assert encoder_forward_flops(config, 8) == 8192 + 2 * (65536 + 8192 + 65536) + 2048
    shared_twice = AlbertConfig(**dict(TINY, num_hidden_layers=4, share_type="all"))
    unshared = AlbertConfig(**dict(TINY, num_hidden_layers=4, share_type="none"))
    assert encoder_forward_flops(shared_twice, 8) == encoder_forward_flops(unshared, 8)
    forward_heads = 2 * 3 * (32 * 16 + 16 * 300) + 2 * 32 * 2
    # The pretrainer's last block on 3 masked positions and position 0: key and value 2*2*8*32*32, query and output
    # 2*2*4*32*32, attention 2*2*4*8*32, feed-forward 2*2*4*32*64.
    last_block_on_four_rows = 32768 + 16384 + 4096 + 32768
    assert workload_flops("pretrain_step", config, 5, 8, 3) == 3 * 5 * (
        8192 + 139264 + last_block_on_four_rows + 2048 + forward_heads)
    assert workload_flops("pretrain_step", config, 5, 8, 3, last_block_on_every_position=True) == 3 * 5 * (
        288768 + forward_heads)
    assert workload_flops("encode", config, 5, 8) == 5 * 288768
    # The classifier's last block on position 0: key and value 2*2*8*32*32, query and output 2*2*1*32*32, attention
    # 2*2*1*8*32, feed-forward 2*2*1*32*64.
    last_block_on_one_row = 32768 + 4096 + 1024 + 8192
    assert workload_flops("finetune_step", config, 5, 8) == 3 * 5 * (
        8192 + 139264 + last_block_on_one_row + 2048 + 2 * 32 * 2)
    # The figure for ALBERT-base: about 22 GFLOP per sequence of 128.
    assert encoder_forward_flops(AlbertConfig.from_preset("albert-base"), 128) == pytest.approx(22.4e9, rel=0.01)


def test_preset_comparison_runs_training_presets_at_the_same_batch():
    settings = BenchmarkSettings(config=AlbertConfig(**TINY).to_dict(), model_name="tiny", batch_size=4,
                                 seq_length=32, steps=5, repeats=3)
    runs = []

    def fake_run(workload, run_settings):
        runs.append((workload, run_settings))
        return {field: 1.0 for field in MEASURED_FIELDS} | {"parameter_mb": 70.0, "checkpoint_mb": 71.0}

    rows = compare_presets(["bert-large", "albert-large"], ["albert-large"], settings, fake_run)
    assert [row["preset"] for row in rows] == ["bert-large", "albert-large"]
    assert [row["encoder_parameters"] for row in rows] == [334_607_360, 17_683_968]
    assert rows[0]["peak_rss_mb"] is None and rows[1]["peak_rss_mb"] == 1.0
    (workload, run_settings), = runs
    assert workload == "pretrain_step" and run_settings.model_name == "albert-large"
    assert (run_settings.batch_size, run_settings.seq_length, run_settings.steps) == (4, 32, 1)
    assert run_settings.albert_config() == AlbertConfig.from_preset("albert-large")
    with pytest.raises(ValueError, match="xxlarge"):
        compare_presets(["albert-large"], ["albert-xxlarge"], settings, fake_run)


def _write_curve(summary_dir, losses):
    with tf.summary.create_file_writer(str(summary_dir)).as_default():
        for step, loss in losses.items():
            write_scalars({"loss": loss, "learning_rate": 0.1}, step=step)


def _compare_loss_curves(*flags):
    return run_script("compare_loss_curves", *flags, timeout=120)


@pytest.mark.slow
def test_loss_curves_are_compared_against_the_first_run(tmp_path):
    _write_curve(tmp_path / "float32", {20: 8.0, 40: 6.0, 60: 5.0})
    _write_curve(tmp_path / "seed2", {20: 8.2, 40: 6.1, 60: 5.0})
    _write_curve(tmp_path / "bf16", {20: 8.0, 40: 6.5, 80: 4.0})
    output_json = tmp_path / "curves.json"
    result = _compare_loss_curves(f"--run=float32={tmp_path / 'float32'}", f"--run=seed2={tmp_path / 'seed2'}",
                                  f"--run=bf16={tmp_path / 'bf16'}", f"--output_json={output_json}")
    assert result.returncode == 0, result.stderr[-3000:]

    report = json.loads(output_json.read_text())
    assert report["differences"]["seed2"] == pytest.approx(
        {"mean_abs": 0.1, "max_abs": 0.2, "last_abs": 0.0, "steps": 3}, abs=1e-6)
    assert report["differences"]["bf16"] == pytest.approx(
        {"mean_abs": 0.25, "max_abs": 0.5, "last_abs": 0.5, "steps": 2}, abs=1e-6)
    assert "| 80 | - | - | 4.0000 |" in result.stdout


@pytest.mark.slow
def test_loss_curves_name_a_bad_run_flag_and_a_missing_scalar(tmp_path):
    _write_curve(tmp_path / "a", {10: 1.0})
    for flags, message in (([f"--run=a={tmp_path / 'a'}", "--run=b"], "--run='b' must be NAME=SUMMARY_DIR"),
                           ([f"--run=a={tmp_path / 'a'}", f"--run=b={tmp_path / 'a'}", "--scalar=accuracy"],
                            "hold no scalar named 'accuracy'")):
        result = _compare_loss_curves(*flags)
        assert result.returncode != 0
        assert message in result.stderr


def test_run_benchmarks_refuses_unknown_workloads():
    settings = BenchmarkSettings(config=TINY, model_name="tiny", batch_size=2, seq_length=16, max_predictions_per_seq=4)
    with pytest.raises(ValueError, match=r"Unknown workloads \['encoder'\]; allowed: pretrain_step, finetune_step, "
                                         r"encode, input_pipeline, create_pretraining_data."):
        run_benchmarks(BenchmarkOptions(settings, workloads=["encode", "encoder"]))


@pytest.mark.slow
def test_run_benchmarks_measures_create_pretraining_data_from_python(tmp_path):
    settings = BenchmarkSettings(config=TINY, model_name="tiny", batch_size=2, seq_length=32, max_predictions_per_seq=4,
                                 repeats=1)
    data = DataWorkloadOptions(corpus_documents=40, vocab_size=120, dupe_factor=1, num_output_shards=1)
    records, comparison = run_benchmarks(BenchmarkOptions(settings, workloads=["create_pretraining_data"], data=data,
                                                          work_dir=str(tmp_path / "work")))
    assert comparison == []
    [record] = records
    assert record["workload"] == "create_pretraining_data" and record["num_workers"] == 1
    assert record["instances"] > 0 and record["seq_per_s_median"] > 0 and record["peak_pss_mb"] > 0
    assert (tmp_path / "work" / "shards_0").is_dir()


def test_the_benchmark_defaults_to_auto_and_records_the_path_it_took(monkeypatch):
    from albert_tf.benchmarking.workloads import run_model_workload
    from albert_tf.training import compile_choice

    settings = BenchmarkSettings(config=TINY, model_name="tiny", batch_size=2, seq_length=16,
                                 max_predictions_per_seq=3, steps=1, warmup_steps=1, repeats=1)
    assert settings.jit_compile == "auto"
    assert dataclasses.replace(settings, jit_compile="no").jit_compile is False
    with pytest.raises(ValueError, match="Benchmark setting jit_compile must be auto, true or false"):
        dataclasses.replace(settings, jit_compile="sometimes")
    # encode has no training step to time: auto takes the rule's path, else XLA.
    monkeypatch.setattr(compile_choice, "describe_device",
                        lambda strategy: compile_choice.DeviceDescription("CPU", "CPU", "a CPU", False))
    record = run_model_workload("encode", settings)
    assert record["jit_compile"] is True and record["jit_compile_setting"] == "auto"
    assert record["jit_compile_choice"].startswith("XLA (rule:")
