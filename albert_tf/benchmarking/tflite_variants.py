"""Size, single-thread latency and drift of an encoder's TFLite variants and, optionally, its ONNX model
(python -m run_scripts.benchmark_tflite).

A randomly initialised encoder of the config is exported as the TF-Hub-style encoder SavedModel and converted
as `export_to_tfhub --tflite` converts it; random weights give the real sizes and latencies. Each variant is timed
in `tf.lite.Interpreter` (XNNPACK, TensorFlow's default delegate) with `num_threads` threads on one batch:
`num_runs` invocations after `warmup_runs`, reported as median, min and max. Drift is the largest absolute
difference of pooled_output and sequence_output from the SavedModel's on the same inputs. With `onnx`, the
ONNX model (tf2onnx, the `onnx` extra) is timed the same way in onnxruntime's CPU provider with `num_threads`
intra-op threads.
"""

import logging
import os
import statistics
import time
from typing import Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from albert_tf.benchmarking.probes import load_average
from albert_tf.config import AlbertConfig
from albert_tf.export.onnx_export import convert_to_onnx, require_tf2onnx
from albert_tf.export.tflite import (ENCODER_TFLITE_OUTPUTS, SERVING_SIGNATURE, TFLITE_VARIANTS,
                                     check_tflite_variants, convert_to_tflite, output_drift, serving_signature)
from albert_tf.export.tfhub_encoder import AlbertHubEncoder
from albert_tf.models.encoder import INPUT_NAMES, AlbertEncoder
from albert_tf.training.compile_choice import cpu_model_name

logger = logging.getLogger(__name__)


def benchmark_inputs(config: AlbertConfig, batch_size: int, seq_length: int, seed: int = 0) -> Dict[str, np.ndarray]:
    """Random word ids, a full mask and two segments: the encoder inputs every variant is timed on."""
    rng = np.random.default_rng(seed)
    return {"input_word_ids": rng.integers(5, config.vocab_size, (batch_size, seq_length)).astype(np.int32),
            "input_mask": np.ones((batch_size, seq_length), np.int32),
            "input_type_ids": (np.arange(seq_length) >= seq_length // 2).astype(np.int32)[None].repeat(batch_size, 0)}


def time_tflite(model_path: str, inputs: Dict[str, np.ndarray], num_threads: int, num_runs: int,
                warmup_runs: int = 2) -> Tuple[List[float], Dict[str, np.ndarray]]:
    """Seconds of each of `num_runs` invocations of the model's serving signature on `inputs`, and its outputs."""
    interpreter = tf.lite.Interpreter(model_path=model_path, num_threads=num_threads)
    runner = interpreter.get_signature_runner(SERVING_SIGNATURE)
    for _ in range(warmup_runs):
        runner(**inputs)
    seconds = []
    for _ in range(num_runs):
        start = time.perf_counter()
        outputs = runner(**inputs)
        seconds.append(time.perf_counter() - start)
    return seconds, outputs


def time_onnx(model_path: str, inputs: Dict[str, np.ndarray], num_threads: int, num_runs: int,
              warmup_runs: int = 2) -> Tuple[List[float], Dict[str, np.ndarray]]:
    """`time_tflite` for an ONNX model in onnxruntime (CPU provider, `num_threads` intra-op threads)."""
    try:
        import onnxruntime
    except ImportError as error:
        raise ValueError("Timing the ONNX model needs onnxruntime, the `onnx` extra: run `make onnx` and put "
                         ".venv/onnx on PYTHONPATH.") from error
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = num_threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    for _ in range(warmup_runs):
        session.run(names, inputs)
    seconds = []
    for _ in range(num_runs):
        start = time.perf_counter()
        values = session.run(names, inputs)
        seconds.append(time.perf_counter() - start)
    return seconds, dict(zip(names, values))


def _directory_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(directory) for name in names)


def benchmark_tflite(output_dir: str, config: AlbertConfig, seq_length: int = 128, batch_size: int = 1,
                     variants: Sequence[str] = TFLITE_VARIANTS, num_threads: int = 1, num_runs: int = 20,
                     warmup_runs: int = 2, onnx: bool = False) -> List[dict]:
    """Exports a random encoder of `config` to `<output_dir>/encoder`, converts `variants` and times them.

    Returns one record per variant (and one with `variant` "onnx" when `onnx`): `variant`, `bytes`, `conversion_s`,
    `latency_ms_median` / `_min` / `_max`, the drift (`max_abs_diff/pooled_output`,
    `max_abs_diff/sequence_output`) and the setting (`seq_length`,
    `batch_size`, `num_threads`, `num_runs`, `saved_model_variables_bytes`, `cpu`, `load_average`,
    `tensorflow`).

    Example:
    >>> records = benchmark_tflite("/tmp/tflite_bench", AlbertConfig.from_preset("albert-base"))  # doctest: +SKIP
    >>> [(record["variant"], record["bytes"] // 2**20) for record in records]  # doctest: +SKIP
    [('float32', 45), ('int8', 12), ('float16', 23)]
    """
    check_tflite_variants(variants)
    if onnx:
        require_tf2onnx()
    if seq_length > config.max_position_embeddings:
        raise ValueError(f"seq_length={seq_length} exceeds the config's max_position_embeddings="
                         f"{config.max_position_embeddings}.")
    if num_runs < 1 or num_threads < 1 or batch_size < 1:
        raise ValueError(f"num_runs, num_threads and batch_size must be positive; got {num_runs}, {num_threads} "
                         f"and {batch_size}.")
    encoder_dir = os.path.join(output_dir, "encoder")
    if tf.io.gfile.exists(encoder_dir):
        raise FileExistsError(f"{encoder_dir} exists; give an empty --output_dir.")
    encoder = AlbertEncoder(config)
    inputs = benchmark_inputs(config, batch_size, seq_length)
    encoder({name: tf.constant(inputs[name]) for name in INPUT_NAMES})
    hub_encoder = AlbertHubEncoder(encoder)
    logger.info("Exporting a randomly initialised encoder (%d variables) to %s", len(hub_encoder.variables),
                encoder_dir)
    tf.saved_model.save(hub_encoder, encoder_dir, signatures=hub_encoder.trace())
    loaded, signature = serving_signature(encoder_dir)
    reference = {name: value.numpy() for name, value in signature(**inputs).items()}
    del loaded, signature
    records = []
    for variant in list(variants) + (["onnx"] if onnx else []):
        start = time.perf_counter()
        if variant == "onnx":
            path = convert_to_onnx(encoder_dir, ENCODER_TFLITE_OUTPUTS, overwrite=True)
        else:
            path = convert_to_tflite(encoder_dir, [variant], seq_length, ENCODER_TFLITE_OUTPUTS,
                                     overwrite=True)[variant]
        conversion_s = time.perf_counter() - start
        logger.info("Timing %s: %d runs after %d warm-up runs, %d thread(s).", path, num_runs, warmup_runs,
                    num_threads)
        timer = time_onnx if variant == "onnx" else time_tflite
        seconds, outputs = timer(path, inputs, num_threads, num_runs, warmup_runs)
        record = {"variant": variant, "bytes": os.path.getsize(path), "conversion_s": round(conversion_s, 1),
                  "latency_ms_median": 1000 * statistics.median(seconds), "latency_ms_min": 1000 * min(seconds),
                  "latency_ms_max": 1000 * max(seconds), **output_drift(reference, outputs),
                  "seq_length": seq_length, "batch_size": batch_size, "num_threads": num_threads,
                  "num_runs": num_runs, "saved_model_variables_bytes": _directory_bytes(
                      os.path.join(encoder_dir, "variables")), "cpu": cpu_model_name(), "load_average": load_average(),
                  "tensorflow": tf.__version__}
        logger.info("%s: %.1f MB, %.1f ms median (%.1f-%.1f), drift %s", variant, record["bytes"] / 1e6,
                    record["latency_ms_median"], record["latency_ms_min"], record["latency_ms_max"],
                    {name: value for name, value in record.items() if name.startswith("max_abs_diff")})
        records.append(record)
    return records


def tflite_table(records: Sequence[dict]) -> str:
    """A Markdown table of `benchmark_tflite`'s records."""
    lines = ["| variant | size | latency median (min-max) | max abs drift pooled / sequence | conversion |",
             "|---|---|---|---|---|"]
    for record in records:
        lines.append(f"| {record['variant']} | {record['bytes'] / 1e6:.1f} MB ({record['bytes'] / 2**20:.1f} MiB) | "
                     f"{record['latency_ms_median']:.0f} ms ({record['latency_ms_min']:.0f}-"
                     f"{record['latency_ms_max']:.0f}) | {record['max_abs_diff/pooled_output']:.2g} / "
                     f"{record['max_abs_diff/sequence_output']:.2g} | {record['conversion_s']:.0f} s |")
    return "\n".join(lines)
