"""The speed experiment's section (paper Table 2) from its kept records, without TensorFlow: the table, the claims'
verdicts and the figure. Measuring is albert_tf.experiments.speed's; each model's record is OUTPUT_DIR/speed/
<model>.json (`record_path`).

A speedup is a ratio of rates, so the claims compare the logarithms of the two models' timed repeats by Welch's
t-test at the 5% level (the repeats of two models are not paired): "holds" when it rejects in the paper's
direction, "does not hold" in the other, "inside the noise" otherwise. A record keeps the slowest, median and
fastest repeat, which are every repeat at MIN_REPEATS repeats; with more, the record does not hold the sample the
test needs. The repeats run one after another in one process, so a verdict speaks for this machine at those
shapes, not for the paper's TPUs.

Example:
>>> records = {name: {"seq_per_s_min": 0.9 * rate, "seq_per_s_median": rate, "seq_per_s_max": 1.1 * rate}
...            for name, rate in zip(MODELS, (1.0, 5.0, 1.6, 0.5, 0.2))}
>>> [round(bound, 2) for bound in speedup_range(records["albert-large"], records[REFERENCE])]
[1.31, 1.6, 1.96]
"""

import math
import os
from typing import Dict, List, Mapping, Optional

from albert_tf.experiments.budgets import SpeedBudget
from albert_tf.experiments.atomic_json import read_json

NAME = "speed"
REFERENCE = "bert-large"
# Table 2: parameters and the training speedup over BERT-large.
PAPER = {"bert-large": ("334M", 1.0), "albert-base": ("12M", 5.6), "albert-large": ("18M", 1.7),
         "albert-xlarge": ("60M", 0.6), "albert-xxlarge": ("235M", 0.3)}
MODELS = tuple(PAPER)
MIN_REPEATS = 3
WORKLOAD = "pretrain_step"
WELCH_TEST = "Welch t-test on log rates"
# What a model's record keeps for results.json.
RECORD_FIELDS = ("seq_per_s_median", "seq_per_s_min", "seq_per_s_max", "gflop_per_step", "peak_fraction",
                 "parameter_mb", "peak_rss_mb", "steady_peak_rss_mb", "peak_device_memory_mb", "batch_size",
                 "seq_length", "jit_compile", "device", "cpu_model")
# A record's compile path by its `jit_compile` (albert_tf.training.compile_choice.PATH_NAMES, which imports
# TensorFlow: tests/experiments/test_statistics.py checks that the two agree).
PATH_NAMES = {True: "XLA", False: "TensorFlow's own kernels"}


def record_path(speed_dir: str, model: str) -> str:
    return os.path.join(speed_dir, f"{model}.json")


def read_speed_records(speed_dir: str) -> Dict[str, dict]:
    """{model: its kept record} for every model of MODELS; a missing record is an error naming it."""
    missing = [record_path(speed_dir, name) for name in MODELS if not os.path.exists(record_path(speed_dir, name))]
    if missing:
        raise FileNotFoundError(f"The speed experiment's records {', '.join(missing)} are missing; rerun "
                                "reproduce_paper with --experiment=speed to measure them.")
    return {name: read_json(record_path(speed_dir, name)) for name in MODELS}


def speedup_range(record: Mapping[str, float], reference: Mapping[str, float]):
    """(slowest, median, fastest) ratio of `record`'s rate to `reference`'s: its slowest repeat against the
    reference's fastest, the medians, its fastest against the reference's slowest."""
    return (record["seq_per_s_min"] / reference["seq_per_s_max"],
            record["seq_per_s_median"] / reference["seq_per_s_median"],
            record["seq_per_s_max"] / reference["seq_per_s_min"])


def _repeat_rates(record: Mapping[str, float]) -> List[float]:
    return [record["seq_per_s_min"], record["seq_per_s_median"], record["seq_per_s_max"]]


def _not_testable(record: Mapping[str, float], reference: Mapping[str, float], speed: SpeedBudget) -> Optional[str]:
    """Why the ratio of these records cannot be tested at `speed`'s shapes and repeats (a verdict), or None."""
    if not speed.full_size:
        return (f"not judged: tiny shapes (widths / {speed.width_divisor}, depths / {speed.depth_divisor}); "
                f"measured {record['seq_per_s_median'] / reference['seq_per_s_median']:.2f}x")
    if speed.repeats < MIN_REPEATS:
        return f"cannot be judged ({speed.repeats} repeat(s), {MIN_REPEATS} needed)"
    if speed.repeats > MIN_REPEATS:
        return (f"cannot be judged (the records keep the slowest, median and fastest of {speed.repeats} repeats, "
                "not every repeat's rate)")
    return None


def _ratio_test(record: Mapping[str, float], reference: Mapping[str, float]) -> Dict[str, object]:
    """Welch's t-test of the logarithms of the two models' repeats' rates, as a ratio: the geometric mean ratio,
    its 95% confidence interval, the p-value and the ratio (either way) it detects at 80% power."""
    # scipy is on the report process's path only (albert_tf.experiments.verdicts).
    from albert_tf.experiments.significance import welch_test
    test = welch_test([math.log(rate) for rate in _repeat_rates(record)],
                      [math.log(rate) for rate in _repeat_rates(reference)])
    return {"test": WELCH_TEST, "p_value": test["p_value"], "ratio": math.exp(test["difference"]),
            "ratio_interval": [math.exp(bound) for bound in test["confidence_interval"]],
            "detectable_ratio": math.exp(test["detectable_difference"])}


def _judge(test: Mapping[str, object], faster: bool) -> str:
    """The verdict on "faster" (or, not `faster`, "slower") from the ratio's test at the 5% level."""
    if test["p_value"] >= 0.05:
        return "inside the noise"
    return "holds" if (test["ratio"] > 1) == faster else "does not hold"


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


def _peak_memory(record: Mapping[str, object]) -> float:
    return record["steady_peak_rss_mb"] if record.get("steady_peak_rss_mb") is not None else record["peak_rss_mb"]


def _figure(records: Mapping[str, Mapping[str, object]], tests: Mapping[str, Optional[Mapping[str, object]]],
            speed: SpeedBudget) -> Dict[str, object]:
    """The speedups over BERT-large, ours (the geometric mean ratio of the repeats with its 95% confidence
    interval where they can be tested, else the median ratio) beside the paper's, and the memory."""
    reference = records[REFERENCE]
    ratios = {name: tests[name]["ratio"] if tests[name] else
              records[name]["seq_per_s_median"] / reference["seq_per_s_median"] for name in MODELS}
    bounds = {name: tests[name]["ratio_interval"] if tests[name] else (ratios[name],) * 2 for name in MODELS}
    return {"file": f"{NAME}.png", "title": "Training throughput relative to BERT-large (paper Table 2)",
            "note": f"Ours: {_device_text(reference)}, batch {speed.batch_size} x {speed.seq_length} tokens, "
                    f"float32, {speed.repeats} repeat(s) of {speed.steps} steps.", "panels": [
        {"kind": "bars", "title": "speedup over BERT-large", "xlabel": "model", "categories": list(MODELS),
         "ylabel": "speedup (x, log scale)", "yscale": "log", "reference_line": 1.0, "series": [
             {"label": "ours (ratio, 95% CI)", "values": [ratios[name] for name in MODELS],
              "errors": [[ratios[name] - bounds[name][0] for name in MODELS],
                         [bounds[name][1] - ratios[name] for name in MODELS]], "source": "ours"},
             {"label": "paper (TPU, batch 4096 x 512)", "values": [PAPER[name][1] for name in MODELS],
              "errors": None, "source": "paper"}]},
        {"kind": "bars", "title": "memory", "xlabel": "model", "categories": list(MODELS),
         "ylabel": "MB (log scale)", "yscale": "log", "series": [
             {"label": "ours: parameters", "values": [records[name]["parameter_mb"] for name in MODELS],
              "errors": None, "source": "ours"},
             {"label": "ours: peak RSS", "values": [_peak_memory(records[name]) for name in MODELS],
              "errors": None, "source": "ours"}]}]}


def speed_report_section(records: Mapping[str, Mapping[str, object]], speed: SpeedBudget) -> Dict[str, object]:
    """The table (the paper's speedup beside ours), the figure and the verdicts from the models' records, measured
    at `speed`'s shapes."""
    reference = records[REFERENCE]
    rows, ranges = [], {}
    for name in MODELS:
        record = records[name]
        ranges[name] = speedup_range(record, reference)
        low, middle, high = ranges[name]
        flops_ratio = reference["gflop_per_step"] / record["gflop_per_step"]
        rows.append(f"| {name} | {PAPER[name][0]} | {PAPER[name][1]}x | {record['parameters']:,} | "
                    f"{record['seq_per_s_median']:.3g} | {middle:.2f}x ({low:.2f}-{high:.2f}) | {flops_ratio:.2f}x | "
                    f"{record['parameter_mb']:,.1f} | {_memory_text(_peak_memory(record))} | "
                    f"{_memory_text(record.get('peak_device_memory_mb'))} |")
    not_testable = _not_testable(reference, reference, speed)
    tests = {name: None if not_testable else _ratio_test(records[name], reference) for name in MODELS}
    claims = {}
    for claim, name, faster, text in (
            ("albert_large_is_faster", "albert-large", True, "ALBERT-large trains faster than BERT-large"),
            ("albert_xxlarge_is_slower", "albert-xxlarge", False, "ALBERT-xxlarge trains slower than BERT-large")):
        low, middle, high = ranges[name]
        claims[claim] = {"claim": f"{text} (the paper: {PAPER[name][1]}x; ours {middle:.2f}x, repeats' range "
                                  f"{low:.2f}-{high:.2f})", "compared": [name, REFERENCE],
                         "speedup": middle, "speedup_range": [low, high],
                         **({"verdict": _not_testable(records[name], reference, speed)} if not_testable else
                            {**tests[name], "verdict": _judge(tests[name], faster)})}
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
        "efficiency would give. The claims compare the logarithms of the repeats' rates by Welch's t-test at the "
        "5% level; the repeats ran one after another in one process, so a verdict speaks for this machine at these "
        "shapes."])
    measurements = {f"{NAME}/{name}": {"parameters": records[name]["parameters"],
                                       "speedup": ranges[name][1], "speedup_range": [ranges[name][0],
                                                                                      ranges[name][2]],
                                       **{field: records[name].get(field) for field in RECORD_FIELDS}}
                    for name in MODELS}
    return {"name": NAME, "title": "Speed and memory (paper Table 2)", "table": table, "arms": {},
            "claims": claims, "measurements": measurements,
            "figures": [_figure(records, tests, speed)]}
