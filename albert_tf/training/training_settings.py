"""How a run trains, whatever it trains: the precision policy, determinism and the settings both tasks share."""

import dataclasses
from typing import Optional, Union

import keras
import tensorflow as tf

from albert_tf.training.compile_choice import parse_jit_compile

MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def set_mixed_precision(policy):
    """Sets the global Keras dtype policy; call it before building the model.

    Example:
    >>> set_mixed_precision("mixed_bfloat16")
    >>> keras.mixed_precision.global_policy().name
    'mixed_bfloat16'
    >>> set_mixed_precision("float32")
    """
    if policy not in MIXED_PRECISION_POLICIES:
        raise ValueError(f"Unknown mixed precision policy {policy!r}; allowed: {', '.join(MIXED_PRECISION_POLICIES)}.")
    keras.mixed_precision.set_global_policy(policy)


def enable_determinism(seed):
    """Seeds Python, numpy, TF and Keras and makes TF ops deterministic; call it before building anything.

    With it, a run that is stopped and resumed from a checkpoint ends with the same weights as one that
    ran straight through (given a dataset_fn that skips exactly the batches already consumed).
    """
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


@dataclasses.dataclass(kw_only=True)
class TrainingSettings:
    """How a run trains, whatever it trains: the fields PretrainingOptions and FinetuningOptions share, set
    by the flags of run_scripts/training_flags.py (keyword-only, so each subclass keeps its own field order).

    `jit_compile` is True (XLA), False (TensorFlow's own kernels) or "auto" (the Trainer takes the faster,
    albert_tf.training.compile_choice); the flag's words (e.g. "no") are read as parse_jit_compile does."""

    strategy: str = "one_device"
    tpu: Optional[str] = None
    steps_per_loop: int = 1
    jit_compile: Union[bool, str] = "auto"
    recompute_blocks: Union[bool, int] = False
    mixed_precision: str = "float32"
    seed: int = 12345
    deterministic: bool = False

    def __post_init__(self):
        self.jit_compile = parse_jit_compile(self.jit_compile)
