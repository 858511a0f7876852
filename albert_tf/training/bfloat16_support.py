"""Whether bfloat16 matmuls can reach bfloat16 hardware: the CPU's units, and the dtype XLA computes them in.

mixed_bfloat16 is faster than float32 only where the matmuls run on bfloat16 units. On CPUs those are
AVX512_BF16 and AMX-BF16. TensorFlow's own (oneDNN) kernels use them; XLA:CPU in this TensorFlow build
converts bfloat16 dot operands to float32 (BUILD_NOTES.md, "Speed and memory"). The Trainer warns when a
mixed_bfloat16 model would be compiled that way on a CPU with the units, and the benchmark records both facts.
"""

import contextlib
import os
from typing import Dict, Optional

import tensorflow as tf


def first_cpu_fields(cpuinfo_path: str = "/proc/cpuinfo") -> Optional[Dict[str, str]]:
    """The first processor's "name: value" fields in `cpuinfo_path` (Linux's /proc/cpuinfo); None without the file.

    Example:
    >>> first_cpu_fields("/no/such/cpuinfo") is None
    True
    """
    if not os.path.exists(cpuinfo_path):
        return None
    fields = {}
    with open(cpuinfo_path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                break
            name, _, value = line.partition(":")
            fields.setdefault(name.strip(), value.strip())
    return fields


def cpu_bfloat16_units() -> Optional[bool]:
    """Whether the CPU has bfloat16 dot-product units (AVX512_BF16 or AMX-BF16); None where /proc/cpuinfo is absent.

    Example:
    >>> cpu_bfloat16_units() in (True, False, None)
    True
    """
    fields = first_cpu_fields()
    if fields is None:
        return None
    flags = fields.get("flags", "").split()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def xla_bfloat16_dot_dtype(device: Optional[str] = None) -> str:
    """The dtype XLA computes a bfloat16 matmul in, read from its optimized HLO: "bf16" or "f32".

    On `device`, or where TensorFlow places the matmul by default (the first GPU, else the CPU).

    Example:
    >>> xla_bfloat16_dot_dtype() in ("bf16", "f32")
    True
    """
    with tf.device(device) if device else contextlib.nullcontext():
        operands = (tf.ones([8, 16], tf.bfloat16), tf.ones([16, 8], tf.bfloat16))
        matmul = tf.function(lambda a, b: tf.matmul(a, b), jit_compile=True)
        hlo = matmul.experimental_get_compiler_ir(*operands)(stage="optimized_hlo")
    dots = [line.split("=", 1)[1].split("[", 1)[0].strip() for line in hlo.splitlines() if " dot(" in line]
    if not dots:
        raise RuntimeError(f"No dot in XLA's optimized HLO of a bfloat16 matmul:\n{hlo}")
    return dots[0]
