"""Markdown reports of benchmark records, and loss curves compared against a reference run."""

import statistics
from typing import Dict, List, Sequence


def _number(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown_table(records: Sequence[dict]) -> str:
    """The records as a Markdown table: throughput, FLOP rate against the peak, memory, checkpoint size, CPU."""
    lines = ["| workload | model | precision | XLA | recompute | batch x seq | seq/s median (min-max) | tokens/s "
             "| GFLOP/step | GFLOP/s | peak GFLOP/s | % of peak | peak RSS MB | steps' peak RSS MB | params MB "
             "| checkpoint MB | CPU |",
             "|---" * 17 + "|"]
    for record in records:
        fraction = record.get("peak_fraction")
        lines.append(
            f"| {record['workload']} | {record['preset']} | {record.get('mixed_precision') or '-'} "
            f"| {'-' if record.get('jit_compile') is None else record['jit_compile']} "
            f"| {'-' if record.get('recompute_blocks') is None else record['recompute_blocks']} "
            f"| {record['batch_size']} x {record['seq_length']} "
            f"| {_number(record['seq_per_s_median'], 2)} ({_number(record['seq_per_s_min'], 2)}-"
            f"{_number(record['seq_per_s_max'], 2)}) | {_number(record.get('tokens_per_s'), 0)} "
            f"| {_number(record.get('gflop_per_step'))} | {_number(record.get('gflop_per_s'))} "
            f"| {_number(record.get('peak_gflop_per_s'))} | {'-' if fraction is None else f'{100 * fraction:.0f}%'} "
            f"| {_number(record.get('peak_rss_mb'), 0)} | {_number(record.get('steady_peak_rss_mb'), 0)} "
            f"| {_number(record.get('parameter_mb'))} "
            f"| {_number(record.get('checkpoint_mb'))} | {record.get('cpu_model') or '-'} |")
    return "\n".join(lines)


def comparison_table(rows: Sequence[dict]) -> str:
    """The preset comparison as a Markdown table."""
    lines = ["| preset | encoder parameters | parameter MB (float32) | pretraining peak RSS MB | pretraining seq/s |",
             "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['preset']} | {row['encoder_parameters']:,} | {_number(row['encoder_parameter_mb'])} "
                     f"| {_number(row['peak_rss_mb'], 0)} | {_number(row['seq_per_s_median'], 2)} |")
    return "\n".join(lines)


def peer_table(records: Sequence[dict]) -> str:
    """The peer comparison as a Markdown table, fastest first, with each row's ratio against the reference.

    Example:
    >>> print(peer_table([{"configuration": "keras-hub float32", "optimizer": "keras AdamW", "seq_per_s_median": 2.0,
    ...                    "seq_per_s_min": 1.9, "seq_per_s_max": 2.1, "vs_reference": 1.0, "peak_rss_mb": 2430.0,
    ...                    "reference": "keras-hub float32", "cpu_model": "Xeon"}]))
    | configuration | optimizer | seq/s median (min-max) | vs keras-hub float32 | peak RSS MB | CPU |
    |---|---|---|---|---|---|
    | keras-hub float32 | keras AdamW | 2.00 (1.90-2.10) | 1.00x | 2,430 | Xeon |
    """
    if not records:
        return ""
    header = ["configuration", "optimizer", "seq/s median (min-max)", f"vs {records[0]['reference']}", "peak RSS MB",
              "CPU"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for record in sorted(records, key=lambda record: -record["seq_per_s_median"]):
        lines.append(
            f"| {record['configuration']} | {record['optimizer']} | {_number(record['seq_per_s_median'], 2)} "
            f"({_number(record['seq_per_s_min'], 2)}-{_number(record['seq_per_s_max'], 2)}) "
            f"| {record['vs_reference']:.2f}x | {_number(record['peak_rss_mb'], 0)} | {record['cpu_model']} |")
    return "\n".join(lines)


def finetune_text_table(records: Sequence[dict]) -> str:
    """The finetune_text workload as a Markdown table, a row per record in their order: the training step's and
    prediction's examples/s (median (min-max)) and real tokens/s (median), the end-to-end seconds of fine-tuning one
    epoch and predicting the dev set (median (min-max)), the peak RSS, the CPU and the date; a row that failed says
    "failed" in its figures, and a line under the table says how (the first line of its message).

    Example:
    >>> print(finetune_text_table([{"data": "built-in sentences", "seq_length": 128, "precision": "float32",
    ...     "configuration": "ours, dynamic padding", "train_examples_per_s_median": 8.0,
    ...     "train_examples_per_s_min": 7.5, "train_examples_per_s_max": 8.25, "train_real_tokens_per_s": 176.0,
    ...     "predict_examples_per_s_median": 40.0, "predict_examples_per_s_min": 39.0,
    ...     "predict_examples_per_s_max": 41.0, "predict_real_tokens_per_s": 880.0, "end_to_end_seconds_median": 61.0,
    ...     "end_to_end_seconds_min": 60.0, "end_to_end_seconds_max": 64.5, "peak_rss_mb": 1234.5,
    ...     "cpu_model": "Xeon", "date": "2026-12-05T10:00:00+00:00"}]))  # doctest: +NORMALIZE_WHITESPACE
    | data | max_seq_length | precision | configuration | train examples/s | train real tokens/s
    | predict examples/s | predict real tokens/s | fine-tune 1 epoch + predict, s | peak RSS MB | CPU | date |
    |---|---|---|---|---|---|---|---|---|---|---|---|
    | built-in sentences | 128 | float32 | ours, dynamic padding | 8.00 (7.50-8.25) | 176 | 40.0 (39.0-41.0) | 880
    | 61.0 (60.0-64.5) | 1,234 | Xeon | 2026-12-05 |
    >>> print(finetune_text_table([{"data": "built-in sentences", "seq_length": 512, "precision": "float32",
    ...     "configuration": "keras-hub, padded to sequence_length", "cpu_model": "Xeon",
    ...     "date": "2026-12-05T10:00:00+00:00", "failed": "The row failed (killed by SIGKILL):\\nKilled"}]))
    ... # doctest: +NORMALIZE_WHITESPACE
    | data | max_seq_length | precision | configuration | train examples/s | train real tokens/s
    | predict examples/s | predict real tokens/s | fine-tune 1 epoch + predict, s | peak RSS MB | CPU | date |
    |---|---|---|---|---|---|---|---|---|---|---|---|
    | built-in sentences | 512 | float32 | keras-hub, padded to sequence_length | failed | failed | failed | failed
    | failed | failed | Xeon | 2026-12-05 |
    <BLANKLINE>
    Failed: keras-hub, padded to sequence_length at 512, float32: The row failed (killed by SIGKILL):
    """
    header = ["data", "max_seq_length", "precision", "configuration", "train examples/s", "train real tokens/s",
              "predict examples/s", "predict real tokens/s", "fine-tune 1 epoch + predict, s", "peak RSS MB", "CPU",
              "date"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]

    def spread(record, name, digits):
        return (f"{_number(record[name + '_median'], digits)} ({_number(record[name + '_min'], digits)}-"
                f"{_number(record[name + '_max'], digits)})")

    for record in records:
        figures = (["failed"] * 6 if "failed" in record else
                   [spread(record, "train_examples_per_s", 2), _number(record["train_real_tokens_per_s"], 0),
                    spread(record, "predict_examples_per_s", 1), _number(record["predict_real_tokens_per_s"], 0),
                    spread(record, "end_to_end_seconds", 1), _number(record["peak_rss_mb"], 0)])
        cells = ([str(record["seq_length"]), record["precision"], record["configuration"]] + figures
                 + [record["cpu_model"], record["date"][:10]])
        lines.append(f"| {record['data']} | " + " | ".join(cells) + " |")
    failures = [f"Failed: {record['configuration']} at {record['seq_length']}, {record['precision']}: "
                f"{record['failed'].splitlines()[0]}" for record in records if "failed" in record]
    return "\n".join(lines + [""] * bool(failures) + failures)


def serve_table(records: Sequence[dict]) -> str:
    """The serve workload as a Markdown table, a row per record that ran: the file, the batch-1 latencies (median
    over the repeats, the medians' spread, the 95th percentile), the batch's sequences/s (median (min-max)), the
    peak RSS, the time to the first answer, the logits' largest drift from our float32 SavedModel and the argmax
    agreement; with a dev set (the serve workload's eval file), also each row's dev accuracy, its drop in points
    against our float32 SavedModel, the agreement of their predictions and McNemar's p-value; then a line per
    skipped row with its reason, the CPU, threads and inputs, and the dev set.

    Example:
    >>> print(serve_table([{"configuration": "ours, ONNX in onnxruntime", "precision": "float32", "file_mb": 47.6,
    ...     "seq_lengths": [32], "batch_size": 4, "latency_ms_b1x32_median": 38.0, "latency_ms_b1x32_min": 37.5,
    ...     "latency_ms_b1x32_max": 39.0, "latency_ms_b1x32_p95": 41.0, "throughput_seq_per_s_b4x32_median": 30.0,
    ...     "throughput_seq_per_s_b4x32_min": 29.0, "throughput_seq_per_s_b4x32_max": 31.0, "peak_rss_mb": 350.0,
    ...     "first_answer_seconds_median": 0.9, "max_abs_logit_drift": 1e-6, "prediction_agreement": 1.0,
    ...     "cpu_model": "EPYC", "threads": {"intra_op": 2, "inter_op": 1}, "inputs": "random ids",
    ...     "date": "2026-12-05T10:00:00+00:00"},
    ...     {"configuration": "ours, ONNX in OpenVINO bfloat16", "precision": "bfloat16",
    ...      "skipped": "this CPU has no bfloat16 units"}]))  # doctest: +NORMALIZE_WHITESPACE
    | path | precision | file MB | b1 x 32 ms: median (min-max), p95 | b4 x 32 seq/s | peak RSS MB | first answer s
    | max logit drift | argmax agreement |
    |---|---|---|---|---|---|---|---|---|
    | ours, ONNX in onnxruntime | float32 | 47.6 | 38.0 (37.5-39.0), 41.0 | 30.0 (29.0-31.0) | 350 | 0.9 | 1.0e-06
    | 100.0% |
    <BLANKLINE>
    Skipped: ours, ONNX in OpenVINO bfloat16 (this CPU has no bfloat16 units).
    CPU: EPYC; 2 operation threads a row, inter-op 1; inputs: random ids; 2026-12-05.
    """
    ran = [record for record in records if "skipped" not in record]
    with_dev = any("dev_accuracy" in record for record in ran)
    lines = []
    if ran:
        first = ran[0]
        lengths, batch = first["seq_lengths"], first["batch_size"]
        header = (["path", "precision", "file MB"] + [f"b1 x {length} ms: median (min-max), p95" for length in lengths]
                  + [f"b{batch} x {lengths[-1]} seq/s", "peak RSS MB", "first answer s", "max logit drift",
                     "argmax agreement"]
                  + ["dev accuracy", "drop (points)", "dev agreement", "McNemar p"] * with_dev)
        lines += ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        for record in ran:
            latencies = [f"{_number(record[f'latency_ms_b1x{length}_median'])} "
                         f"({_number(record[f'latency_ms_b1x{length}_min'])}-"
                         f"{_number(record[f'latency_ms_b1x{length}_max'])}), "
                         f"{_number(record[f'latency_ms_b1x{length}_p95'])}" for length in lengths]
            throughput = f"throughput_seq_per_s_b{batch}x{lengths[-1]}"
            cells = ([record["configuration"], record["precision"], _number(record["file_mb"])] + latencies
                     + [f"{_number(record[throughput + '_median'])} ({_number(record[throughput + '_min'])}-"
                        f"{_number(record[throughput + '_max'])})", _number(record["peak_rss_mb"], 0),
                        _number(record["first_answer_seconds_median"]), f"{record['max_abs_logit_drift']:.1e}",
                        f"{100 * record['prediction_agreement']:.1f}%"])
            if with_dev:
                cells += _dev_cells(record)
            lines.append("| " + " | ".join(cells) + " |")
    skipped = [f"{record['configuration']} ({record['skipped']})" for record in records if "skipped" in record]
    if skipped:
        lines += [""] * bool(lines) + ["Skipped: " + "; ".join(skipped) + "."]
    if ran:
        threads = ran[0]["threads"]
        lines.append(f"CPU: {ran[0]['cpu_model']}; {threads['intra_op']} operation threads a row, inter-op "
                     f"{threads['inter_op']}; inputs: {ran[0]['inputs']}; {ran[0]['date'][:10]}.")
    dev = next((record for record in ran if "dev_accuracy" in record), None)
    if dev:
        lines.append(f"Dev set: {dev['dev_inputs']}; our float32 SavedModel's accuracy "
                     f"{100 * dev['dev_accuracy_float32']:.2f}%; the drop and McNemar's exact p-value (on the "
                     "examples only one of the two gets right) are against it.")
    return "\n".join(lines)


def _dev_cells(record: dict) -> List[str]:
    """A serve record's dev accuracy, its drop in points against our float32 SavedModel, the agreement of their
    predictions and McNemar's p-value (a float32 row has none); blanks for a record without a dev set."""
    if "dev_accuracy" not in record:
        return ["—"] * 4
    p_value = record.get("dev_mcnemar_p")
    return [f"{100 * record['dev_accuracy']:.2f}%", f"{record['dev_accuracy_drop_points']:+.2f}",
            f"{100 * record['dev_prediction_agreement']:.1f}%", "—" if p_value is None else f"{p_value:.2g}"]


def compare_curves(curves: Dict[str, Dict[int, float]], reference: str) -> Dict[str, Dict[str, float]]:
    """How far each curve ({step: value}) lies from `reference`'s, over the steps both logged.

    Returns {name: {"mean_abs", "max_abs", "last_abs", "steps"}} for every curve but the reference: the mean,
    largest and last absolute difference, and the number of common steps. Comparing two seeds of the same
    run this way gives the noise that a change (e.g. another precision) is judged against.

    Example:
    >>> compare_curves({"float32": {10: 2.0, 20: 1.0}, "bf16": {10: 2.1, 20: 1.0, 30: 0.5}}, "float32")["bf16"]
    {'mean_abs': 0.05, 'max_abs': 0.1, 'last_abs': 0.0, 'steps': 2}
    """
    if reference not in curves:
        raise ValueError(f"Reference curve {reference!r} is not among the curves {sorted(curves)}.")
    differences = {}
    for name, curve in curves.items():
        if name == reference:
            continue
        steps = sorted(set(curve) & set(curves[reference]))
        if not steps:
            raise ValueError(f"Curve {name!r} shares no logged step with the reference {reference!r}.")
        gaps = [abs(curve[step] - curves[reference][step]) for step in steps]
        differences[name] = {"mean_abs": round(statistics.mean(gaps), 6), "max_abs": round(max(gaps), 6),
                             "last_abs": round(gaps[-1], 6), "steps": len(steps)}
    return differences


def curves_table(curves: Dict[str, Dict[int, float]], every: int = 1) -> str:
    """The curves side by side as a Markdown table, one row per `every`-th step any of them logged.

    Example:
    >>> print(curves_table({"a": {10: 2.0, 20: 1.0}, "b": {10: 2.5}}))
    | step | a | b |
    |---|---|---|
    | 10 | 2.0000 | 2.5000 |
    | 20 | 1.0000 | - |
    """
    names = list(curves)
    steps = sorted(set().union(*curves.values()))[every - 1::every]
    lines = ["| step | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for step in steps:
        cells = [f"{curves[name][step]:.4f}" if step in curves[name] else "-" for name in names]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
