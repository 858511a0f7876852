"""The speed experiment (paper Table 2): the training throughput of BERT-large and ALBERT base, large, xlarge and
xxlarge on this machine, relative to BERT-large, with parameter and peak memory, measured by the benchmark harness.

BERT-large is ALBERT code with E=H and no sharing (the `bert-large` preset). Each model runs the harness's
`pretrain_step` workload (the Trainer's own training function, LAMB, MLM + SOP) at the budget's SpeedBudget
shapes; at the smoke budget the models are shrunk (widths and depths divided) so that the run takes seconds, and
those ratios say nothing about the paper's. Each model's record is kept in `speed_dir`, so a rerun measures only
what is missing. The claims: ALBERT-large is faster than BERT-large (the paper: 1.7x) and ALBERT-xxlarge is
slower (0.3x), because sharing saves parameters, not compute; the section and its verdicts are built from the
records by albert_tf.experiments.speed_report, which needs no TensorFlow.

Example:
>>> from albert_tf.experiments.budgets import budget_for
>>> configs = speed_configs(budget_for("smoke").speed)
>>> configs["albert-xxlarge"].hidden_size, configs["albert-xxlarge"].num_hidden_layers
(128, 1)
"""

import dataclasses
import math
import os
from typing import Dict

from absl import logging

from albert_tf.benchmarking.workloads import BenchmarkSettings, run_in_subprocess, run_model_workload
from albert_tf.config import PRESETS, AlbertConfig
from albert_tf.experiments.budgets import SpeedBudget
from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.speed_report import MODELS, NAME, WORKLOAD, record_path
from albert_tf.models.param_count import encoder_parameters


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
        path = record_path(speed_dir, name)
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
