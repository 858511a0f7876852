"""The speed experiment (paper Table 2): the training throughput of BERT-large and ALBERT base, large, xlarge and
xxlarge on this machine, relative to BERT-large, with parameter and peak memory, measured by the benchmark harness.

BERT-large is ALBERT code with E=H and no sharing (the `bert-large` preset). Each model runs the harness's
`pretrain_step` workload (the Trainer's own training function, LAMB, MLM + SOP) at the budget's SpeedBudget
shapes; at the smoke budget the models are shrunk (widths and depths divided) so that the run takes seconds, and
those ratios say nothing about the paper's. Each model's record is kept in `speed_dir`, so a rerun measures only
what is missing. The claims: ALBERT-large is faster than BERT-large (the paper: 1.7x) and ALBERT-xxlarge is
slower (0.3x), because sharing saves parameters, not compute. A ratio is judged from the repeats' range: it holds
when the slowest repeat of one and the fastest of the other still agree.

Example:
>>> from albert_tf.experiments.budgets import budget_for
>>> configs = speed_configs(budget_for("smoke").speed)
>>> configs["albert-xxlarge"].hidden_size, configs["albert-xxlarge"].num_hidden_layers
(128, 1)
"""

import dataclasses
import math
import os
from typing import Dict, Mapping

from absl import logging

from albert_tf.benchmarking.workloads import BenchmarkSettings, run_in_subprocess, run_model_workload
from albert_tf.config import PRESETS, AlbertConfig
from albert_tf.experiments.budgets import SpeedBudget
from albert_tf.experiments.json_files import read_json, write_json
from albert_tf.models.param_count import encoder_parameters
from albert_tf.training.compile_choice import PATH_NAMES

NAME = "speed"
REFERENCE = "bert-large"
# Table 2: parameters and the training speedup over BERT-large.
PAPER = {"bert-large": ("334M", 1.0), "albert-base": ("12M", 5.6), "albert-large": ("18M", 1.7),
         "albert-xlarge": ("60M", 0.6), "albert-xxlarge": ("235M", 0.3)}
MODELS = tuple(PAPER)
MIN_REPEATS = 3
WORKLOAD = "pretrain_step"
# What a model's record keeps for results.json.
RECORD_FIELDS = ("seq_per_s_median", "seq_per_s_min", "seq_per_s_max", "gflop_per_step", "peak_fraction",
                 "parameter_mb", "peak_rss_mb", "steady_peak_rss_mb", "peak_device_memory_mb", "batch_size",
                 "seq_length", "jit_compile", "device", "cpu_model")


def speed_configs(speed: SpeedBudget) -> Dict[str, AlbertConfig]:
    """Table 2's models, their widths divided by speed.width_divisor and depths by speed.depth_divisor."""
    configs = {}
    for name in MODELS:
        values = dict(PRESETS[name])
        for key in ("vocab_size", "embedding_size", "hidden_size", "intermediate_size"):
            values[key] = max(1, values[key] // speed.width_divisor)
        values["num_hidden_layers"] = max(1, values["num_hidden_layers"] // speed.depth_divisor)
        values["num_attention_heads"] = math.gcd(values["num_attention_heads"], values["hidden_size"])
        configs[name] = AlbertConfig.from_dict(values, source=f"the speed experiment's {name}")
    return configs


def _measure(name: str, config: AlbertConfig, speed: SpeedBudget, jit_compile) -> dict:
    settings = BenchmarkSettings(
        config=config.to_dict(), model_name=name, batch_size=speed.batch_size, seq_length=speed.seq_length,
        max_predictions_per_seq=speed.max_predictions_per_seq, jit_compile=jit_compile, steps=speed.steps,
        warmup_steps=speed.warmup_steps, repeats=speed.repeats, measure_peak=speed.measure_peak)
    run_workload = run_in_subprocess if speed.isolate else run_model_workload
    return run_workload(WORKLOAD, settings)


def measure_speed(speed: SpeedBudget, speed_dir: str, jit_compile="auto") -> Dict[str, dict]:
    """{model: its harness record}, measuring the models whose record `speed_dir` does not hold yet."""
    os.makedirs(speed_dir, exist_ok=True)
    records = {}
    for name, config in speed_configs(speed).items():
        path = os.path.join(speed_dir, f"{name}.json")
        if os.path.exists(path):
            records[name] = read_json(path)
            continue
        logging.info("Speed: %s, %d x %d, %d repeats of %d steps", name, speed.batch_size, speed.seq_length,
                     speed.repeats, speed.steps)
        record = {"speed_budget": dataclasses.asdict(speed), "parameters": encoder_parameters(config),
                  **_measure(name, config, speed, jit_compile)}
        write_json(path, record, default=str)
        records[name] = record
    return records


def _ratio_range(record: Mapping[str, float], reference: Mapping[str, float]):
    return (record["seq_per_s_min"] / reference["seq_per_s_max"],
            record["seq_per_s_median"] / reference["seq_per_s_median"],
            record["seq_per_s_max"] / reference["seq_per_s_min"])


def _judge(speedup_range, faster: bool, speed: SpeedBudget) -> str:
    low, middle, high = speedup_range
    if not speed.full_size:
        return (f"not judged: tiny shapes (widths / {speed.width_divisor}, depths / {speed.depth_divisor}); "
                f"measured {middle:.2f}x")
    if speed.repeats < MIN_REPEATS:
        return f"cannot be judged ({speed.repeats} repeat(s), {MIN_REPEATS} needed)"
    if low > 1 or high < 1:
        return "holds" if (low > 1) == faster else "does not hold"
    return "inside the noise"


def _paths_text(records: Mapping[str, Mapping[str, object]]) -> str:
    """Which compile path timed the models, e.g. "jit_compile=auto: XLA for every model"."""
    paths = {name: PATH_NAMES[bool(record["jit_compile"])] for name, record in records.items()}
    setting = next(iter(records.values())).get("jit_compile_setting", "auto")
    if len(set(paths.values())) == 1:
        return f"jit_compile={setting}: {next(iter(paths.values()))} for every model"
    return f"jit_compile={setting}: " + ", ".join(f"{path} for {name}" for name, path in paths.items())


def _device_text(record: Mapping[str, object]) -> str:
    """The device, and the host CPU beside it where the device's name does not already hold it (a GPU)."""
    device, cpu = str(record["device"]), str(record["cpu_model"])
    return device if cpu in device else f"{device} (host CPU {cpu})"


def _memory_text(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def speed_section(speed: SpeedBudget, speed_dir: str, jit_compile="auto") -> Dict[str, object]:
    """Measures what is missing, then the table (the paper's speedup beside ours), the bars and the verdicts."""
    records = measure_speed(speed, speed_dir, jit_compile)
    reference = records[REFERENCE]
    rows, ranges = [], {}
    for name in MODELS:
        record = records[name]
        ranges[name] = _ratio_range(record, reference)
        low, middle, high = ranges[name]
        flops_ratio = reference["gflop_per_step"] / record["gflop_per_step"]
        memory = record["steady_peak_rss_mb"] if record.get("steady_peak_rss_mb") is not None else record[
            "peak_rss_mb"]
        rows.append(f"| {name} | {PAPER[name][0]} | {PAPER[name][1]}x | {record['parameters']:,} | "
                    f"{record['seq_per_s_median']:.3g} | {middle:.2f}x ({low:.2f}-{high:.2f}) | {flops_ratio:.2f}x | "
                    f"{record['parameter_mb']:,.1f} | {_memory_text(memory)} | "
                    f"{_memory_text(record.get('peak_device_memory_mb'))} |")
    claims = {}
    for claim, name, faster, text in (
            ("albert_large_is_faster", "albert-large", True, "ALBERT-large trains faster than BERT-large"),
            ("albert_xxlarge_is_slower", "albert-xxlarge", False, "ALBERT-xxlarge trains slower than BERT-large")):
        low, middle, high = ranges[name]
        claims[claim] = {"claim": f"{text} (the paper: {PAPER[name][1]}x; ours {middle:.2f}x, repeats' range "
                                  f"{low:.2f}-{high:.2f})", "compared": [name, REFERENCE],
                         "speedup": middle, "speedup_range": [low, high], "verdict": _judge(ranges[name], faster,
                                                                                              speed)}
    shapes = ("the models themselves" if speed.full_size else
              f"tiny shapes: the models' widths / {speed.width_divisor} and depths / {speed.depth_divisor}, so "
              "fixed costs dominate and the ratios say nothing about the paper's")
    shapes += ("; each model in a process of its own" if speed.isolate else
               "; all models in one process, so each peak RSS includes what the earlier ones left")
    table = "\n".join([
        "| model | paper params | paper speedup | our params | our seq/s | our speedup (repeats' range) | "
        "FLOPs ratio | parameter MB | peak RSS MB (steps) | peak device MB |",
        "|---|---|---|---|---|---|---|---|---|---|", *rows, "",
        f"Measured with the benchmark harness's {WORKLOAD} (LAMB, MLM + SOP, float32, {_paths_text(records)}) "
        f"at batch {speed.batch_size} x {speed.seq_length} tokens, {speed.repeats} repeat(s) of {speed.steps} "
        f"steps after {speed.warmup_steps} warm-up, on {_device_text(reference)}; {shapes}. The paper timed batch "
        "4096 x 512 on TPUs. The FLOPs ratio is BERT-large's matmul FLOPs over the model's: the speedup equal "
        "efficiency would give."])
    measurements = {f"{NAME}/{name}": {"parameters": records[name]["parameters"],
                                       "speedup": ranges[name][1], "speedup_range": [ranges[name][0],
                                                                                      ranges[name][2]],
                                       **{field: records[name].get(field) for field in RECORD_FIELDS}}
                    for name in MODELS}
    bars = {"file": f"{NAME}.png", "title": "Training throughput relative to BERT-large (paper Table 2)",
            "panels": [
                {"ylabel": "speedup over BERT-large (x, log scale)", "yscale": "log", "series": {
                    "ours (repeats' range)": ([ranges[name][1] for name in MODELS],
                                              [[ranges[name][1] - ranges[name][0] for name in MODELS],
                                               [ranges[name][2] - ranges[name][1] for name in MODELS]]),
                    "paper": ([PAPER[name][1] for name in MODELS], None)}},
                {"ylabel": "memory (MB, log scale)", "yscale": "log", "series": {
                    "parameters": ([records[name]["parameter_mb"] for name in MODELS], None),
                    "peak RSS": ([records[name].get("steady_peak_rss_mb") or records[name]["peak_rss_mb"]
                                  for name in MODELS], None)}}],
            "categories": list(MODELS), "xlabel": "model"}
    return {"name": NAME, "title": "Speed and memory (paper Table 2)", "table": table, "arms": {},
            "claims": claims, "measurements": measurements, "bar_plots": [bars]}
