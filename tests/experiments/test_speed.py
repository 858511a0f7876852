"""The speed experiment: Table 2's models at each budget's shapes, the verdicts from the repeats' range on made-up
records and a rerun that keeps them (the smoke test measures every model for real)."""
import dataclasses
import json
import os

import pytest

from albert_tf.config import AlbertConfig
from albert_tf.experiments import speed
from albert_tf.experiments.budgets import SpeedBudget, budget_for
from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.report import write_report
from albert_tf.experiments.reproduce import ReproduceOptions, run_reproduction
from albert_tf.experiments.speed_report import speed_report_section

FULL_SIZE = SpeedBudget(repeats=3)


def test_the_full_size_models_are_the_presets_and_the_smoke_ones_shrink_every_width():
    configs = speed.speed_configs(FULL_SIZE)
    assert list(configs) == ["bert-large", "albert-base", "albert-large", "albert-xlarge", "albert-xxlarge"]
    for name, config in configs.items():
        assert config == AlbertConfig.from_preset(name)
    assert (configs["bert-large"].share_type, configs["bert-large"].embedding_size) == ("none", 1024)
    tiny = speed.speed_configs(budget_for("smoke").speed)
    assert [(config.hidden_size, config.embedding_size, config.intermediate_size, config.num_hidden_layers,
             config.vocab_size) for config in tiny.values()] == [
        (32, 32, 128, 2, 937), (24, 4, 96, 1, 937), (32, 4, 128, 2, 937), (64, 4, 256, 2, 937),
        (128, 4, 512, 1, 937)]
    assert all(config.hidden_size % config.num_attention_heads == 0 for config in tiny.values())


def _write_records(speed_dir, rates):
    """{model: (min, median, max) sequences/s} written as measure_speed keeps them."""
    os.makedirs(speed_dir, exist_ok=True)
    for index, (name, (low, middle, high)) in enumerate(rates.items()):
        record = {"parameters": 1000 + index, "seq_per_s_min": low, "seq_per_s_median": middle,
                  "seq_per_s_max": high, "gflop_per_step": 10.0 / middle, "parameter_mb": 4.0 * (index + 1),
                  "peak_rss_mb": 900.0, "steady_peak_rss_mb": 800.0 + index, "peak_device_memory_mb": None,
                  "jit_compile": True, "device": "cpu", "cpu_model": "made up", "batch_size": 8, "seq_length": 128}
        with open(os.path.join(speed_dir, f"{name}.json"), "w", encoding="utf-8") as handle:
            json.dump(record, handle)


RATES = {"bert-large": (0.95, 1.0, 1.05), "albert-base": (5.0, 5.2, 5.4), "albert-large": (1.5, 1.6, 1.7),
         "albert-xlarge": (0.5, 0.55, 0.6), "albert-xxlarge": (0.28, 0.3, 0.32)}


def _no_measurement(*args):
    raise AssertionError("a kept record was measured again")


def test_speed_verdicts_come_from_the_repeats_range_and_a_rerun_measures_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(speed, "_measure", _no_measurement)
    speed_dir = str(tmp_path / "speed")
    _write_records(speed_dir, RATES)
    section = speed_report_section(speed.measure_speed(FULL_SIZE, speed_dir), FULL_SIZE)
    assert section["claims"]["albert_large_is_faster"]["verdict"] == "holds"
    assert section["claims"]["albert_large_is_faster"]["speedup_range"] == pytest.approx([1.5 / 1.05, 1.7 / 0.95])
    assert section["claims"]["albert_xxlarge_is_slower"]["verdict"] == "holds"
    assert "| albert-large | 18M | 1.7x | 1,002 | 1.6 | 1.60x (1.43-1.79) | 1.60x | 12.0 | 802 | - |" in (
        section["table"])
    assert section["measurements"]["speed/albert-base"]["speedup"] == pytest.approx(5.2)
    assert "(LAMB, MLM + SOP, float32, jit_compile=auto: XLA for every model) at batch 2 x 128 tokens" in (
        section["table"])
    assert "on cpu (host CPU made up);" in section["table"]
    albert_base = os.path.join(speed_dir, "albert-base.json")
    write_json(albert_base, {**read_json(albert_base), "jit_compile": False})
    assert ("jit_compile=auto: XLA for bert-large, TensorFlow's own kernels for albert-base, XLA for albert-large"
            in speed_report_section(speed.measure_speed(FULL_SIZE, speed_dir), FULL_SIZE)["table"])

    _write_records(speed_dir, {**RATES, "albert-large": (0.9, 1.0, 1.1), "albert-xxlarge": (1.1, 1.2, 1.3)})
    mixed = speed_report_section(speed.measure_speed(FULL_SIZE, speed_dir), FULL_SIZE)
    assert mixed["claims"]["albert_large_is_faster"]["verdict"] == "inside the noise"
    assert mixed["claims"]["albert_xxlarge_is_slower"]["verdict"] == "does not hold"
    one_repeat = dataclasses.replace(FULL_SIZE, repeats=1)
    assert speed_report_section(speed.measure_speed(one_repeat, speed_dir), one_repeat)["claims"][
        "albert_large_is_faster"]["verdict"] == "cannot be judged (1 repeat(s), 3 needed)"
    smoke = budget_for("smoke").speed
    tiny = speed_report_section(speed.measure_speed(smoke, speed_dir), smoke)
    assert tiny["claims"]["albert_large_is_faster"]["verdict"] == (
        "not judged: tiny shapes (widths / 32, depths / 12); measured 1.00x")

    paths = write_report(str(tmp_path), [section], {}, "made up", {"masked_lm": 0.1, "sentence_order": 0.5})
    assert os.path.getsize(tmp_path / "speed.png") > 1000
    document = json.load(open(paths["results"], encoding="utf-8"))
    assert document["measurements"]["speed/bert-large"]["speedup"] == 1.0
    assert set(document["claims"]) == {"speed/albert_large_is_faster", "speed/albert_xxlarge_is_slower"}


def test_speed_alone_prepares_no_data_and_reports_without_baselines(tmp_path, monkeypatch):
    monkeypatch.setattr(speed, "_measure", _no_measurement)
    output_dir = tmp_path / "out"
    _write_records(str(output_dir / "speed"), RATES)
    paths = run_reproduction(ReproduceOptions(output_dir=str(output_dir), experiments=["speed"], budget="smoke"))
    assert not (output_dir / "data").exists() and not (output_dir / "arms").exists()
    report = open(paths["report"], encoding="utf-8").read()
    assert "## Speed and memory (paper Table 2)" in report and "Majority baselines" not in report
    assert json.load(open(paths["results"], encoding="utf-8"))["arms"] == {}
