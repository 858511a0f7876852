"""The workloads and how they are timed: settings, synthetic batches, the model workloads, the data workloads'
measurement and the preset comparison.

The model workloads run what users run:
- `pretrain_step`: `albert_tf.tasks.pretraining.Pretraining` (AlbertPretrainer, LAMB unless the settings say
  AdamW, the shared Trainer) and the Trainer's own training function, MLM on `max_predictions_per_seq`
  gathered positions + SOP, backward, clipping and the optimizer update;
- `finetune_step`: AlbertClassifier (2 labels) with the fine-tuning loss of run_glue and AdamW, on the Trainer;
- `encode`: the encoder's forward pass (`training=False`), one tf.function call per batch.
Their batches are random ids held in memory, so input never bounds them (the `input_pipeline` workload,
which needs data_gen, is measured by run_scripts/benchmark.py with `measure_dataset`).

Timing: `warmup_steps` steps first (tracing and XLA compilation), then `repeats` timed runs of `steps` steps,
with the matmul peak measured before the first and after every run; the record holds the median, min and max
of the sequences/s over the repeats and the best peak seen. `peak_rss_mb` is the process's high-water mark
(`getrusage`: imports, compilation and steps), so a workload measures cleanly in a process of its own
(`run_in_subprocess`); `steady_peak_rss_mb` is the high-water mark of the timed steps alone (Linux).

Units: MB and GFLOP are decimal (1e6 bytes, 1e9 FLOP).
"""

import dataclasses
import json
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from albert_tf.benchmarking.child_process import run_python_child
from albert_tf.benchmarking.flops import FINETUNE_NUM_LABELS, MODEL_WORKLOADS, workload_flops
from albert_tf.benchmarking.probes import (checkpoint_bytes, device_description, load_average,
                                           measure_matmul_peaks, parameter_bytes, peak_device_memory_bytes,
                                           peak_rss_bytes, reset_rss_high_water_mark, rss_high_water_mark_bytes)
from albert_tf.config import AlbertConfig
from albert_tf.training import compile_choice
from albert_tf.training.bfloat16_support import cpu_bfloat16_units, xla_bfloat16_dot_dtype
from albert_tf.training.host_allocator import cpu_allocator

FIRST_NON_SPECIAL_ID = 5
# Every record has at least these: what ran, then what was measured (None where it does not apply).
SETTING_FIELDS = ("workload", "preset", "batch_size", "seq_length", "mixed_precision", "jit_compile")
MEASURED_FIELDS = ("seq_per_s_median", "seq_per_s_min", "seq_per_s_max", "gflop_per_s", "peak_gflop_per_s",
                   "peak_fraction", "peak_rss_mb")
RECORD_FIELDS = SETTING_FIELDS + MEASURED_FIELDS
# The child process (workload_child) prints its record on a line that starts with this.
CHILD_RECORD_MARKER = "BENCHMARK_RECORD "


@dataclasses.dataclass
class BenchmarkSettings:
    """What a model workload runs and how it is timed.

    `config` is an AlbertConfig's dict (so settings travel to a child process as JSON); `model_name` labels
    the records (a preset name or a config file). `steps_per_loop` is the Trainer's: steps per tf.function call.
    `jit_compile` is the Trainer's too: "auto" (the training scripts' default), True or False; `encode`, which
    has no training step to measure, takes auto's evaluation path (the rule's, else XLA).
    `recompute_blocks` trains with block recomputation; the FLOPs counted stay the model's own (3x the forward),
    so the recomputed forward pass shows as a lower % of peak. `optimizer` is pretrain_step's ("lamb" as
    run_pretraining, or "adamw", the peer comparison's); finetune_step always uses AdamW, as run_glue.
    `measure_peak=False` skips the matmul peak (its fields and the % of peak are None): for tiny models, where
    compiling the probe costs more than the steps and a fraction of peak means nothing.

    Example:
    >>> settings = BenchmarkSettings(config=AlbertConfig.from_preset("albert-base").to_dict(),
    ...                              model_name="albert-base", steps=4)
    >>> settings.albert_config().hidden_size
    768
    """

    config: dict
    model_name: str
    batch_size: int = 8
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    mixed_precision: str = "float32"
    jit_compile: Union[bool, str] = "auto"
    steps: int = 10
    warmup_steps: int = 2
    repeats: int = 3
    steps_per_loop: int = 1
    recompute_blocks: Union[bool, int] = False
    optimizer: str = "lamb"
    measure_peak: bool = True

    def __post_init__(self):
        self.jit_compile = compile_choice.parse_jit_compile(self.jit_compile, source="Benchmark setting jit_compile")
        for name in ("batch_size", "seq_length", "max_predictions_per_seq", "steps", "repeats", "steps_per_loop"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Benchmark setting {name} must be a positive integer, got {value!r}.")
        if self.warmup_steps < 0:
            raise ValueError(f"Benchmark setting warmup_steps must be >= 0, got {self.warmup_steps!r}.")
        if self.seq_length > self.albert_config().max_position_embeddings:
            raise ValueError(f"seq_length={self.seq_length} exceeds the model's max_position_embeddings="
                             f"{self.albert_config().max_position_embeddings}.")
        if self.max_predictions_per_seq > self.seq_length - 2:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must leave [CLS] and [SEP] "
                             f"unmasked: at most seq_length - 2 = {self.seq_length - 2}.")

    def albert_config(self) -> AlbertConfig:
        return AlbertConfig.from_dict(self.config, source=f"benchmark model {self.model_name}")


# ---- timing -----------------------------------------------------------------------------------------

def summarize(values: Sequence[float]) -> Dict[str, float]:
    """{"median", "min", "max"} of measurements.

    Example:
    >>> summarize([3.0, 1.0, 2.0])
    {'median': 2.0, 'min': 1.0, 'max': 3.0}
    """
    if not values:
        raise ValueError("summarize needs at least one measurement.")
    return {"median": float(statistics.median(values)), "min": float(min(values)), "max": float(max(values))}


# ---- synthetic batches ------------------------------------------------------------------------------

def random_batch(workload: str, config: AlbertConfig, batch_size: int, seq_length: int,
                 max_predictions_per_seq: int, seed: int = 0) -> Dict[str, np.ndarray]:
    """A full-length batch of random ids with the inputs (and labels) `workload` reads.

    Pretraining batches mask `max_predictions_per_seq` distinct positions (never [CLS] or the last [SEP]),
    all with weight 1, as a full record of create_pretraining_data.

    Example:
    >>> config = AlbertConfig.from_preset("albert-base")
    >>> random_batch("pretrain_step", config, 2, 16, 3)["masked_lm_positions"].shape
    (2, 3)
    """
    rng = np.random.default_rng(seed)
    word_ids = rng.integers(FIRST_NON_SPECIAL_ID, config.vocab_size, (batch_size, seq_length), dtype=np.int32)
    type_ids = np.zeros((batch_size, seq_length), np.int32)
    type_ids[:, seq_length // 2:] = 1
    batch = {"input_word_ids": word_ids, "input_mask": np.ones((batch_size, seq_length), np.int32),
             "input_type_ids": type_ids}
    if workload == "pretrain_step":
        positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length - 1), max_predictions_per_seq,
                                                 replace=False) for _ in range(batch_size)]), axis=1)
        batch.update(
            masked_lm_positions=positions.astype(np.int32),
            masked_lm_ids=rng.integers(FIRST_NON_SPECIAL_ID, config.vocab_size, positions.shape, dtype=np.int32),
            masked_lm_weights=np.ones(positions.shape, np.float32),
            next_sentence_labels=rng.integers(0, 2, (batch_size,), dtype=np.int32))
    elif workload == "finetune_step":
        batch["label_ids"] = rng.integers(0, FINETUNE_NUM_LABELS, (batch_size,), dtype=np.int32)
    return batch


def _repeating_dataset_fn(batch):
    def dataset_fn(input_context, batch_size, skip_batches):
        del input_context, skip_batches
        return tf.data.Dataset.from_tensors({name: value[:batch_size] for name, value in batch.items()}).repeat()

    return dataset_fn


# ---- model workloads --------------------------------------------------------------------------------

def _pretrain_step(settings: BenchmarkSettings, output_dir: str):
    from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions

    total = settings.warmup_steps + settings.steps * settings.repeats
    options = PretrainingOptions(
        output_dir=output_dir, max_seq_length=settings.seq_length,
        max_predictions_per_seq=settings.max_predictions_per_seq, train_batch_size=settings.batch_size,
        num_train_steps=total, num_warmup_steps=max(1, total // 10), steps_per_loop=settings.steps_per_loop,
        jit_compile=settings.jit_compile, mixed_precision=settings.mixed_precision,
        recompute_blocks=settings.recompute_blocks, optimizer=settings.optimizer,
        save_checkpoints_steps=total, log_every_steps=total)
    run = Pretraining(settings.albert_config(), options)
    return run.model, run.trainer


def _finetune_step(settings: BenchmarkSettings, output_dir: str):
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.training.distribution import get_strategy
    from albert_tf.tasks.classification_functions import classification_loss_fn
    from albert_tf.training.optimization import create_optimizer
    from albert_tf.training.training_settings import set_mixed_precision
    from albert_tf.training.trainer import Trainer

    total = settings.warmup_steps + settings.steps * settings.repeats
    set_mixed_precision(settings.mixed_precision)
    strategy = get_strategy("one_device")
    with strategy.scope():
        model = AlbertClassifier(settings.albert_config(), num_labels=FINETUNE_NUM_LABELS,
                                 recompute_blocks=settings.recompute_blocks)
        optimizer = create_optimizer("adamw", 2e-5, total, max(1, total // 10))
    trainer = Trainer(strategy, model, optimizer, classification_loss_fn, model_dir=output_dir,
                      steps_per_loop=settings.steps_per_loop, jit_compile=settings.jit_compile)
    return model, trainer


def _training_steps_function(workload: str, settings: BenchmarkSettings, output_dir: str):
    """(model, run(num_steps), jit_compile choice): the Trainer's training function over an in-memory batch."""
    build = _pretrain_step if workload == "pretrain_step" else _finetune_step
    model, trainer = build(settings, output_dir)
    batch = random_batch(workload, settings.albert_config(), settings.batch_size, settings.seq_length,
                         settings.max_predictions_per_seq)
    train_steps = trainer.make_train_function(_repeating_dataset_fn(batch), settings.batch_size)

    def run(num_steps):
        for done in range(0, num_steps, settings.steps_per_loop):
            train_steps(min(settings.steps_per_loop, num_steps - done))

    return model, run, trainer.jit_compile_choice


def _encode_function(settings: BenchmarkSettings):
    from albert_tf.training.distribution import get_strategy
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.training.training_settings import set_mixed_precision

    set_mixed_precision(settings.mixed_precision)
    strategy = get_strategy("one_device")
    with strategy.scope():
        model = AlbertEncoder(settings.albert_config())
    if settings.jit_compile == compile_choice.AUTO:
        choice = compile_choice.inference_choice(compile_choice.describe_device(strategy),
                                                 model.dtype_policy.compute_dtype)
    else:
        choice = compile_choice.forced_choice(settings.jit_compile)
    batch = random_batch("encode", settings.albert_config(), settings.batch_size, settings.seq_length,
                         settings.max_predictions_per_seq)
    inputs = {name: tf.constant(value) for name, value in batch.items()}

    @tf.function(jit_compile=choice.jit_compile)
    def encode(inputs):
        return tf.reduce_sum(tf.cast(model(inputs, training=False)["sequence_output"], tf.float32))

    def run(num_steps):
        total = None
        for _ in range(num_steps):
            total = encode(inputs)
        total.numpy()

    return model, run, choice


# The optimizer each model workload trains with where the settings do not choose it (None: no training).
_OPTIMIZERS = {"finetune_step": "adamw", "encode": None}


def run_model_workload(workload: str, settings: BenchmarkSettings) -> dict:
    """Builds, warms up and times one model workload in this process; returns its record.

    Example:
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    ...                       intermediate_size=64, embedding_size=16)
    >>> settings = BenchmarkSettings(config=config.to_dict(), model_name="tiny", batch_size=2, seq_length=16,
    ...                              max_predictions_per_seq=3, steps=2, warmup_steps=1, repeats=1)
    >>> run_model_workload("encode", settings)["seq_per_s_median"] > 0
    True
    """
    if workload not in MODEL_WORKLOADS:
        raise ValueError(f"Unknown model workload {workload!r}; allowed: {', '.join(MODEL_WORKLOADS)}.")
    config = settings.albert_config()
    with tempfile.TemporaryDirectory() as output_dir:
        start = time.perf_counter()
        if workload == "encode":
            model, run, choice = _encode_function(settings)
        else:
            model, run, choice = _training_steps_function(workload, settings, output_dir)
        run(max(settings.warmup_steps, 1))
        warmup_seconds = time.perf_counter() - start

        def matmul_peaks():
            if not settings.measure_peak:
                return {"xla": None, "plain": None}
            return measure_matmul_peaks(settings.batch_size * settings.seq_length, config.hidden_size,
                                        config.intermediate_size, model.dtype_policy.compute_dtype)

        # Measured around every repeat, the best is the machine's peak even when other processes load it.
        peaks = [matmul_peaks()]
        seconds, steady_rss = [], []
        for _ in range(settings.repeats):
            counting = reset_rss_high_water_mark()
            start = time.perf_counter()
            run(settings.steps)
            seconds.append(time.perf_counter() - start)
            if counting:
                steady_rss.append(rss_high_water_mark_bytes())
            peaks.append(matmul_peaks())
        flops = workload_flops(workload, config, settings.batch_size, settings.seq_length,
                               settings.max_predictions_per_seq)
        rates = summarize([settings.steps * settings.batch_size / elapsed for elapsed in seconds])
        gflop_per_s = rates["median"] / settings.batch_size * flops / 1e9
        peak_by_mode = {mode: None if not settings.measure_peak else max(measured[mode] for measured in peaks)
                        for mode in peaks[0]}
        peak = max(peak_by_mode.values()) if settings.measure_peak else None
        device_memory = peak_device_memory_bytes()
        return {
            "workload": workload, "preset": settings.model_name, "batch_size": settings.batch_size,
            "seq_length": settings.seq_length, "mixed_precision": settings.mixed_precision,
            "jit_compile": choice.jit_compile, "jit_compile_setting": settings.jit_compile,
            "jit_compile_choice": choice.describe(), "jit_compile_steps_per_second": choice.steps_per_second,
            "steps": settings.steps, "repeats": settings.repeats,
            "warmup_steps": settings.warmup_steps, "steps_per_loop": settings.steps_per_loop,
            "recompute_blocks": settings.recompute_blocks, "optimizer": _OPTIMIZERS.get(workload, settings.optimizer),
            "seq_per_s_median": rates["median"], "seq_per_s_min": rates["min"], "seq_per_s_max": rates["max"],
            "tokens_per_s": rates["median"] * settings.seq_length,
            "step_seconds_median": settings.batch_size / rates["median"],
            "gflop_per_step": flops / 1e9, "gflop_per_s": gflop_per_s, "peak_gflop_per_s": peak,
            "peak_gflop_per_s_xla": peak_by_mode["xla"], "peak_gflop_per_s_plain": peak_by_mode["plain"],
            "peak_fraction": None if peak is None else gflop_per_s / peak, "peak_rss_mb": peak_rss_bytes() / 1e6,
            "steady_peak_rss_mb": max(steady_rss) / 1e6 if steady_rss else None,
            "peak_device_memory_mb": None if device_memory is None else device_memory / 1e6,
            "parameter_mb": parameter_bytes(model) / 1e6, "checkpoint_mb": checkpoint_bytes(model) / 1e6,
            "warmup_seconds": warmup_seconds, "device": device_description(),
            "cpu_model": compile_choice.cpu_model_name(), "cpu_allocator": cpu_allocator(),
            "cpu_bfloat16_units": cpu_bfloat16_units(),
            "xla_bfloat16_dot_dtype": (xla_bfloat16_dot_dtype() if settings.mixed_precision == "mixed_bfloat16"
                                       else None),
            "load_average": load_average(), "tensorflow": tf.__version__,
        }


def run_in_subprocess(workload: str, settings: BenchmarkSettings, timeout_seconds: Optional[float] = None) -> dict:
    """`run_model_workload` in a fresh Python process (workload_child), so its peak RSS is this workload's alone.

    Example:
    >>> record = run_in_subprocess("pretrain_step", settings)  # doctest: +SKIP
    >>> record["peak_rss_mb"]  # doctest: +SKIP
    1180.4
    """
    return run_python_child(["-m", "albert_tf.benchmarking.workload_child", workload,
                             json.dumps(dataclasses.asdict(settings))], CHILD_RECORD_MARKER,
                            f"Benchmark workload {workload} on {settings.model_name} failed in its child process",
                            timeout_seconds=timeout_seconds).record


# ---- data workloads ---------------------------------------------------------------------------------

def measure_dataset(dataset: tf.data.Dataset, batch_size: int, batches: int, warmup_batches: int = 10,
                    repeats: int = 3) -> Dict[str, float]:
    """Batches/s of iterating `dataset` (a repeating pipeline), as a training loop pulls it.

    Returns the median, min and max over `repeats` timed runs of `batches` batches, each as
    `batches_per_s_*` and `seq_per_s_*` (batches x batch_size).

    Example:
    >>> measure_dataset(tf.data.Dataset.from_tensors([1, 2]).repeat(), 2, batches=5, repeats=1)["batches_per_s_min"] > 0
    True
    """
    iterator = iter(dataset)
    for _ in range(warmup_batches):
        next(iterator)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        rates.append(batches / (time.perf_counter() - start))
    summary = summarize(rates)
    result = {f"batches_per_s_{key}": value for key, value in summary.items()}
    result.update({f"seq_per_s_{key}": value * batch_size for key, value in summary.items()})
    return result


def data_record(workload: str, model_name: str, batch_size: int, seq_length: int, rates: Dict[str, float],
                **extra) -> dict:
    """A record of a data workload in the model workloads' format (no FLOPs, this process's peak RSS)."""
    record = {"workload": workload, "preset": model_name, "batch_size": batch_size, "seq_length": seq_length,
              "mixed_precision": None, "jit_compile": None, "gflop_per_s": None, "peak_gflop_per_s": None,
              "peak_fraction": None, "peak_rss_mb": peak_rss_bytes() / 1e6, "device": device_description(),
              "cpu_model": compile_choice.cpu_model_name(), "cpu_allocator": cpu_allocator(),
              "load_average": load_average(), "tensorflow": tf.__version__}
    record.update(rates)
    record["tokens_per_s"] = record["seq_per_s_median"] * seq_length
    record.update(extra)
    return record


# ---- preset comparison ------------------------------------------------------------------------------

def compare_presets(preset_names: Sequence[str], training_presets: Sequence[str], settings: BenchmarkSettings,
                    run_workload: Callable[[str, BenchmarkSettings], dict] = run_in_subprocess) -> List[dict]:
    """Parameter memory of each preset, and the peak RSS of a pretraining step for `training_presets`.

    Every training preset runs `pretrain_step` with the same batch, length and precision as `settings` for one
    warmup and one timed step (the memory high-water mark is reached by then), in a process of its own (by
    default), so the peak RSS figures compare like with like. Rows are records (workload "preset_memory").

    Example:
    >>> rows = compare_presets(["bert-large", "albert-large"], [], settings)  # doctest: +SKIP
    >>> [round(row["encoder_parameter_mb"]) for row in rows]  # doctest: +SKIP
    [1336, 71]
    """
    from albert_tf.models.param_count import encoder_parameters

    unknown = sorted(set(training_presets) - set(preset_names))
    if unknown:
        raise ValueError(f"Training-memory presets {unknown} are not among the compared presets {list(preset_names)}.")
    rows = []
    for name in preset_names:
        config = AlbertConfig.from_preset(name)
        parameters = encoder_parameters(config)
        row = {"workload": "preset_memory", "preset": name, "batch_size": settings.batch_size,
               "seq_length": settings.seq_length, "mixed_precision": settings.mixed_precision,
               "jit_compile": settings.jit_compile, "encoder_parameters": parameters,
               "encoder_parameter_mb": parameters * 4 / 1e6,
               "cpu_model": compile_choice.cpu_model_name(),
               **{field: None for field in MEASURED_FIELDS}}
        if name in training_presets:
            record = run_workload("pretrain_step", dataclasses.replace(
                settings, config=config.to_dict(), model_name=name, steps=1, repeats=1, warmup_steps=1))
            row.update({field: record[field] for field in MEASURED_FIELDS},
                       parameter_mb=record["parameter_mb"], checkpoint_mb=record["checkpoint_mb"])
        rows.append(row)
    return rows

