"""Probes of the machine and the process: the matmul peak, peak RSS and device memory, the device, the bytes of a
model's parameters and checkpoint, the load average.

Units: MB and GFLOP are decimal (1e6 bytes, 1e9 FLOP).
"""

import os
import resource
import tempfile
import time
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.training.compile_choice import cpu_model_name
from albert_tf.training.host_allocator import process_status_bytes


def measure_matmul_peaks(m: int, k: int, n: int, dtype: str = "float32", min_seconds: float = 0.5,
                         jit_compile: Sequence[bool] = (True, False)) -> Dict[str, float]:
    """GFLOP/s of chained [m,k]x[k,n] and [m,n]x[n,k] matmuls in `dtype`, on TensorFlow's default device.

    Each way of running TensorFlow in `jit_compile` (XLA, and the plain oneDNN/cuBLAS kernels) is timed over
    calls of at least `min_seconds` and reported under "xla" or "plain"; the best of them is the peak, so a
    model can be held against the fastest matmul this process can get at its sizes and precision. Both are
    kept because they can differ by precision: XLA:CPU, for one, computes bfloat16 dots in float32. The
    chain keeps every product needed (no dead-code elimination) and its scale near 1.

    Example:
    >>> sorted(measure_matmul_peaks(64, 64, 64, min_seconds=0.01))
    ['plain', 'xla']
    """
    # Drawn by TensorFlow in `dtype`: float64 host arrays would add their own transient pages to the
    # workload's peak RSS, which this is measured alongside.
    x, w1, w2 = (tf.random.stateless_normal(shape, seed=(0, index), stddev=stddev, dtype=dtype)
                 for index, (shape, stddev) in enumerate((((m, k), 1.0), ((k, n), k ** -0.5),
                                                          ((n, k), n ** -0.5))))
    peaks = {}
    for jit in jit_compile:
        @tf.function(jit_compile=jit)
        def chain(x, w1, w2, count):
            def body(index, x):
                return index + 1, tf.matmul(tf.matmul(x, w1), w2)

            _, x = tf.while_loop(lambda index, _: index < count, body, (tf.constant(0), x))
            return tf.reduce_sum(tf.cast(x, tf.float32))

        def timed(count):
            start = time.perf_counter()
            chain(x, w1, w2, tf.constant(count)).numpy()
            return time.perf_counter() - start

        timed(1)
        count = 1
        elapsed = timed(count)
        while elapsed < min_seconds:
            count = max(count + 1, int(count * min_seconds / max(elapsed, 1e-6) * 1.2))
            elapsed = timed(count)
        elapsed = min(elapsed, timed(count))
        peaks["xla" if jit else "plain"] = count * 4 * m * k * n / elapsed / 1e9
    return peaks


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far, across resets of the kernel's high-water mark.

    VmHWM, not ru_maxrss: Linux carries ru_maxrss over an exec, so a child process started by a large parent
    would report at least the parent's size. ru_maxrss only where there is no procfs.
    """
    high_water_mark = rss_high_water_mark_bytes()
    if high_water_mark is None:
        high_water_mark = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return max(_peak_before_resets, high_water_mark)


_peak_before_resets = 0


def reset_rss_high_water_mark() -> bool:
    """Restarts the kernel's peak-RSS count (VmHWM) from the current RSS; False where that is not possible.

    After warmup this separates what the timed steps hold from one-time peaks such as XLA compilation;
    `peak_rss_bytes` keeps the peak from before.
    """
    global _peak_before_resets
    peak = peak_rss_bytes()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    _peak_before_resets = peak
    return True


def rss_high_water_mark_bytes() -> Optional[int]:
    """VmHWM of /proc/self/status: the peak RSS since the last reset (or since the start), None without procfs."""
    return process_status_bytes("VmHWM")


def peak_device_memory_bytes() -> Optional[int]:
    """The first GPU's peak allocated memory, or None without a GPU."""
    if not tf.config.list_logical_devices("GPU"):
        return None
    return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])


def parameter_bytes(model) -> int:
    """Bytes of the model's unique variables (a shared variable counts once)."""
    unique = {id(variable): variable for variable in model.weights}
    return sum(int(np.prod(variable.shape)) * tf.as_dtype(variable.dtype).size for variable in unique.values())


def checkpoint_bytes(model) -> int:
    """Size on disk of `tf.train.Checkpoint(model=model)`, the model part of the Trainer's checkpoints.

    Example:
    >>> import keras
    >>> checkpoint_bytes(keras.Sequential([keras.Input((4,)), keras.layers.Dense(250)])) > 5000
    True
    """
    with tempfile.TemporaryDirectory() as directory:
        prefix = tf.train.Checkpoint(model=model).write(os.path.join(directory, "model"))
        return sum(os.path.getsize(path) for path in tf.io.gfile.glob(prefix + "*"))


def device_description() -> str:
    """The device the workloads run on: the first GPU's name, else the CPU model and core count."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name)
    return f"{cpu_model_name()}, {len(os.sched_getaffinity(0))} cores"


def load_average() -> float:
    """The 1-minute load average: above the core count, other processes share the CPU with the benchmark."""
    return os.getloadavg()[0]
