"""The peer comparison: our pretraining step beside keras-hub's and transformers' ALBERT on the same workload.

Every configuration (an implementation in a precision) trains the same config, batch (random_batch's, written
once to a file all read), sequence length, masked positions and loss with AdamW: ours is the `pretrain_step`
workload with our AdamW (the original's, without bias correction) instead of its default LAMB, the peers the
steps of peers/pretraining_steps.py with their frameworks' AdamW. Each configuration runs in a
process of its own, interleaved over the repeats (ours-f32, keras-hub-f32, transformers-f32, ours-bf16, ...,
then again), so a machine that slows down during the run slows every configuration alike. Each record holds the
median, min and max sequences/s over the repeats, the largest peak RSS, and its ratio against keras-hub float32
(our float32 step when keras-hub is not compared).

keras-hub comes from requirements-peers.txt, which `make peers` installs into .venv/peers: that directory is on
the keras-hub child's path only. transformers and torch are requirements-dev.txt's.
"""

import dataclasses
import importlib.machinery
import json
import os
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from albert_tf.benchmarking.child_process import REPOSITORY_ROOT, run_python_child
from albert_tf.benchmarking.flops import workload_flops
from albert_tf.benchmarking.peer_protocol import PEERS, PRECISIONS, RECORD_MARKER
from albert_tf.benchmarking.probes import device_description, load_average
from albert_tf.benchmarking.workloads import BenchmarkSettings, random_batch, run_in_subprocess, summarize
from albert_tf.checkpoints.hf_names import hf_config_from_albert, uses_plain_layout
from albert_tf.config import AlbertConfig
from albert_tf.training.compile_choice import cpu_model_name

OURS = "albert-tf"
IMPLEMENTATIONS = (OURS,) + PEERS
PEER_PACKAGES = os.path.join(REPOSITORY_ROOT, ".venv", "peers")
# The peers' steps import their frameworks, so they live outside the installed packages, in the checkout's peers/.
PEER_STEPS_MODULE = "peers.pretraining_steps"
# The learning rate every configuration's AdamW starts from: our pretrain_step's (run_pretraining's default).
LEARNING_RATE = 0.00176
_PEER_MODULES = {"keras-hub": ("keras_hub",), "transformers": ("torch", "transformers")}
_LABELS = {OURS: "ours", "keras-hub": "keras-hub", "transformers": "transformers"}


def parse_peers(names: Sequence[str]) -> tuple:
    """The peers named (in IMPLEMENTATIONS' order, each once); an unknown name is refused in one sentence.

    Example:
    >>> parse_peers(["transformers", "keras-hub"])
    ('keras-hub', 'transformers')
    """
    unknown = sorted(set(names) - set(PEERS))
    if unknown:
        raise ValueError(f"Unknown peers {unknown}; allowed: {', '.join(PEERS)}.")
    return tuple(peer for peer in PEERS if peer in names)


def check_peers_installed(peers: Sequence[str]) -> None:
    """Fails, naming the missing packages and `make peers`, unless each peer's packages can be imported and the peers'
    steps (peers/, which the package does not install) are in the checkout this runs from.

    Looked up without importing them: this process stays free of keras-hub and PyTorch.
    """
    if peers and importlib.machinery.PathFinder.find_spec(PEER_STEPS_MODULE.split(".")[0],
                                                          [REPOSITORY_ROOT]) is None:
        raise RuntimeError(f"The peer comparison runs the peers' steps from a checkout of albert-tf: {REPOSITORY_ROOT} "
                           "has no peers/ (pip install . does not install it).")
    path = [*sys.path, PEER_PACKAGES]
    missing = [module for peer in peers for module in _PEER_MODULES[peer]
               if importlib.machinery.PathFinder.find_spec(module, path) is None]
    if missing:
        raise RuntimeError(f"The peer comparison needs {', '.join(missing)}: run `make peers` (it installs "
                           f"requirements-peers.txt into {PEER_PACKAGES}).")


def check_peers_can_build(config: AlbertConfig, model_name: str) -> None:
    """Fails, in one sentence, unless the peers can build `config`: keras-hub refuses groups that do not divide the
    layers, and transformers places some layers' groups differently from the original where uses_plain_layout
    says so.

    Example:
    >>> check_peers_can_build(AlbertConfig.from_preset("albert-base"), "albert-base")
    """
    if not uses_plain_layout(config) or config.num_hidden_layers % config.num_hidden_groups:
        raise ValueError(f"The peers share whole blocks in groups only; {model_name} has share_type="
                         f"{config.share_type!r}, num_hidden_layers={config.num_hidden_layers}, num_hidden_groups="
                         f"{config.num_hidden_groups}, which they cannot build (compare a config with "
                         "share_type='all' and groups that divide the layers).")


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One row of the comparison: an implementation (IMPLEMENTATIONS) in a precision (PRECISIONS)."""

    implementation: str
    precision: str

    @property
    def label(self) -> str:
        return f"{_LABELS[self.implementation]} {self.precision}"


def configurations(peers: Sequence[str], precisions: Sequence[str] = PRECISIONS) -> List[Configuration]:
    """The rows in run order: per precision, ours and then each peer.

    Example:
    >>> [c.label for c in configurations(["keras-hub"])]
    ['ours float32', 'keras-hub float32', 'ours bfloat16', 'keras-hub bfloat16']
    """
    unknown = sorted(set(precisions) - set(PRECISIONS))
    if unknown:
        raise ValueError(f"Unknown peer precisions {unknown}; allowed: {', '.join(PRECISIONS)}.")
    return [Configuration(implementation, precision) for precision in precisions
            for implementation in (OURS, *parse_peers(peers))]


def peer_spec(settings: BenchmarkSettings, batch_file: str) -> dict:
    """What a peer's child process needs (peers/pretraining_steps.py's run_peer_step): sizes, timing,
    the batch's file."""
    config = settings.albert_config()
    # The SOP head's dropout is the config's, as in our pretrainer (transformers' own default is 0.1).
    hf_config = hf_config_from_albert(config, ["AlbertForPreTraining"],
                                      classifier_dropout_prob=config.hidden_dropout_prob)
    return {"config": config.to_dict(), "hf_config": hf_config, "batch_file": batch_file,
            "learning_rate": LEARNING_RATE, "steps": settings.steps, "warmup_steps": settings.warmup_steps,
            "extra_paths": [PEER_PACKAGES]}


def run_ours(configuration: Configuration, settings: BenchmarkSettings, timeout_seconds: Optional[float] = None
             ) -> dict:
    """Our `pretrain_step` workload in `configuration`'s precision with AdamW, one repeat in its own process."""
    mixed_precision = "mixed_bfloat16" if configuration.precision == "bfloat16" else "float32"
    record = run_in_subprocess("pretrain_step", dataclasses.replace(
        settings, mixed_precision=mixed_precision, optimizer="adamw", repeats=1), timeout_seconds=timeout_seconds)
    return dict(record, seq_per_s=record["seq_per_s_median"], optimizer="albert-tf AdamW (original's)")


def run_peer(configuration: Configuration, spec: dict, timeout_seconds: Optional[float] = None) -> dict:
    """`configuration`'s peer step (peers/pretraining_steps.py) in a Python process of its own; its record."""
    return run_python_child(
        ["-m", PEER_STEPS_MODULE, configuration.implementation, configuration.precision,
         json.dumps(spec)], RECORD_MARKER, f"The peer comparison's {configuration.label} step failed in its "
        "child process", timeout_seconds=timeout_seconds).record


def compare_peers(peers: Sequence[str], settings: BenchmarkSettings, precisions: Sequence[str] = PRECISIONS,
                  timeout_seconds: Optional[float] = None, run_ours: Callable[..., dict] = run_ours,
                  run_peer: Callable[..., dict] = run_peer) -> List[dict]:
    """Runs every configuration `settings.repeats` times, interleaved, each in its own process; one record each.

    Ours runs with `settings` (its jit_compile included) and AdamW; `settings.warmup_steps` and `steps` are every
    configuration's. Records are in run order; `peer_table` prints them.

    Example:
    >>> records = compare_peers(["keras-hub", "transformers"], settings)  # doctest: +SKIP
    >>> [(record["configuration"], round(record["vs_reference"], 2)) for record in records]  # doctest: +SKIP
    """
    rows = configurations(peers, precisions)
    config = settings.albert_config()
    peers = parse_peers(peers)
    if peers:
        check_peers_can_build(config, settings.model_name)
    check_peers_installed(peers)
    runs: Dict[Configuration, List[dict]] = {row: [] for row in rows}
    with tempfile.TemporaryDirectory() as directory:
        batch_file = os.path.join(directory, "batch.npz")
        np.savez(batch_file, **random_batch("pretrain_step", config, settings.batch_size, settings.seq_length,
                                            settings.max_predictions_per_seq))
        spec = peer_spec(settings, batch_file)
        for _ in range(settings.repeats):
            for row in rows:
                if row.implementation == OURS:
                    runs[row].append(run_ours(row, settings, timeout_seconds))
                else:
                    runs[row].append(run_peer(row, spec, timeout_seconds))
    records = [_record(row, runs[row], settings, workload_flops(
        "pretrain_step", config, settings.batch_size, settings.seq_length, settings.max_predictions_per_seq,
        last_block_on_every_position=row.implementation != OURS)) for row in rows]
    reference = _reference(records)
    for record in records:
        record["reference"] = reference["configuration"]
        record["vs_reference"] = record["seq_per_s_median"] / reference["seq_per_s_median"]
    return records


def _record(row: Configuration, runs: List[dict], settings: BenchmarkSettings, flops: int) -> dict:
    rates = summarize([run["seq_per_s"] for run in runs])
    gflop_per_s = rates["median"] / settings.batch_size * flops / 1e9
    # Only our workload measures the matmul peak (its child imports TensorFlow anyway).
    peak = max((run["peak_gflop_per_s"] for run in runs if run.get("peak_gflop_per_s")), default=None)
    last = runs[-1]
    return {
        "workload": "peer_pretrain_step", "configuration": row.label, "implementation": row.implementation,
        "precision": row.precision, "optimizer": last["optimizer"], "preset": settings.model_name,
        "batch_size": settings.batch_size, "seq_length": settings.seq_length,
        "max_predictions_per_seq": settings.max_predictions_per_seq, "mixed_precision": last["mixed_precision"],
        "jit_compile": last["jit_compile"], "steps": settings.steps, "warmup_steps": settings.warmup_steps,
        "repeats": len(runs), "seq_per_s_median": rates["median"], "seq_per_s_min": rates["min"],
        "seq_per_s_max": rates["max"], "gflop_per_step": flops / 1e9,
        "gflop_per_s": gflop_per_s, "peak_gflop_per_s": peak,
        "peak_fraction": None if peak is None else gflop_per_s / peak,
        "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
        "warmup_seconds": max(run["warmup_seconds"] for run in runs),
        "loss": last.get("loss"), "mlm_logits_shape": last.get("mlm_logits_shape"),
        "sop_logits_shape": last.get("sop_logits_shape"),
        "versions": {name: last[name] for name in ("tensorflow", "keras", "keras_hub", "torch", "transformers")
                     if last.get(name)},
        "cpu_model": cpu_model_name(), "device": device_description(), "load_average": load_average(),
    }


def _reference(records: List[dict]) -> dict:
    """keras-hub float32's record, else our float32 one, else the first."""
    by_row = {(record["implementation"], record["precision"]): record for record in records}
    return by_row.get(("keras-hub", "float32")) or by_row.get((OURS, "float32")) or records[0]
