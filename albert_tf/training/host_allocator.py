"""TensorFlow's host (CPU) memory allocator: malloc, or its caching BFC allocator.

TensorFlow reads TF_CPU_ALLOCATOR_USE_BFC once, when it creates its devices (at the first op), so a
choice made here takes effect only before that. With malloc, every XLA training step maps its temporary
buffer afresh (about 0.9 GB at ALBERT-base, batch 8 x 128) and faults each page in again: about 490k page
faults and 1-1.5 s of system time a step. The caching allocator keeps those pages; it made the float32
XLA pretraining step 11% faster on the benchmark machine, at the same peak RSS (BUILD_NOTES.md, "Speed
and memory"). The training entry points therefore ask for it unless the environment says otherwise.

Separately, `release_free_heap` hands the C heap's free pages back to the operating system; the training
loop's first call, which traces and compiles the step, runs under `releasing_free_heap`, which calls it
every 0.2 s and once at the end. And `prefer_lean_xla_compilation` turns off XLA:CPU's fusion emitters,
whose compilation of the many small kernels of the update made the process's peak.
"""

import contextlib
import ctypes
import functools
import os
import threading

CPU_ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"
CPU_ALLOCATORS = ("default", "bfc")
XLA_FLAGS_VARIABLE = "XLA_FLAGS"
LEAN_XLA_CPU_FLAG = "--xla_cpu_use_fusion_emitters=false"


def cpu_allocator() -> str:
    """"bfc" when TF_CPU_ALLOCATOR_USE_BFC turns on TensorFlow's caching host allocator, else "default".

    Example:
    >>> select_cpu_allocator("default")
    >>> cpu_allocator()
    'default'
    """
    return "bfc" if os.environ.get(CPU_ALLOCATOR_VARIABLE, "").lower() in ("1", "true") else "default"


def select_cpu_allocator(name: str) -> None:
    """Sets the host allocator for this process and its children: "bfc" (caching) or "default" (malloc).

    Example:
    >>> select_cpu_allocator("bfc")
    >>> cpu_allocator()
    'bfc'
    """
    if name not in CPU_ALLOCATORS:
        raise ValueError(f"Unknown CPU allocator {name!r}; allowed: {', '.join(CPU_ALLOCATORS)}.")
    os.environ[CPU_ALLOCATOR_VARIABLE] = "true" if name == "bfc" else "false"


def prefer_caching_allocator() -> str:
    """Selects the caching allocator unless TF_CPU_ALLOCATOR_USE_BFC is already set; returns the allocator.

    Training entry points call it first thing in `main`, before TensorFlow runs an op. An explicit
    TF_CPU_ALLOCATOR_USE_BFC=false in the environment wins.

    Example:
    >>> prefer_caching_allocator() in CPU_ALLOCATORS
    True
    """
    if CPU_ALLOCATOR_VARIABLE not in os.environ:
        select_cpu_allocator("bfc")
    return cpu_allocator()


def prefer_lean_xla_compilation() -> str:
    """Adds `--xla_cpu_use_fusion_emitters=false` to XLA_FLAGS unless XLA_FLAGS sets that flag; returns XLA_FLAGS.

    XLA:CPU's fusion emitters compile each fusion into a module of its own; for the optimizer update's 200
    small fusions that took 80-120 MB over the training steps' peak, after the step's buffers exist, and
    made the process's peak RSS. Without them the pretraining step ran as fast or faster (BUILD_NOTES.md,
    "Speed and memory"). Like the allocator, it must be chosen before TensorFlow compiles anything.

    Example:
    >>> "--xla_cpu_use_fusion_emitters=" in prefer_lean_xla_compilation()
    True
    """
    flags = os.environ.get(XLA_FLAGS_VARIABLE, "")
    if LEAN_XLA_CPU_FLAG.split("=")[0] not in flags:
        os.environ[XLA_FLAGS_VARIABLE] = " ".join(filter(None, [flags, LEAN_XLA_CPU_FLAG]))
    return os.environ[XLA_FLAGS_VARIABLE]


def prefer_training_defaults() -> None:
    """`prefer_caching_allocator` and `prefer_lean_xla_compilation`, unless the environment already chooses.

    Every training entry point calls it first thing in `main`, before TensorFlow runs an op.

    Example:
    >>> prefer_training_defaults()
    >>> cpu_allocator() in CPU_ALLOCATORS
    True
    """
    prefer_caching_allocator()
    prefer_lean_xla_compilation()


@functools.lru_cache(maxsize=None)
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_heap() -> bool:
    """Returns the free pages of the C heap to the operating system (glibc's malloc_trim); False without glibc.

    Tracing, Grappler and XLA compilation free most of what they allocate, but glibc keeps those pages in
    its arenas, fragmented, where the tensors of later steps (which the host allocator places elsewhere)
    never reuse them: 70-190 MB of resident memory at ALBERT-base (BUILD_NOTES.md, "Speed and memory").

    Example:
    >>> release_free_heap() in (True, False)
    True
    """
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True


@contextlib.contextmanager
def releasing_free_heap(interval_seconds: float = 0.2):
    """Calls `release_free_heap` every `interval_seconds` from a thread while the block runs, and once after it.

    Tracing and XLA compilation free most of what they allocate as they go; released at the end only, those
    pages add up to the process's peak RSS (1.67 GB against 1.52 GB for the ALBERT-base pretraining step with
    `--recompute_blocks`; BUILD_NOTES.md, "Speed and memory").

    Example:
    >>> with releasing_free_heap():
    ...     garbage = [bytearray(1 << 16) for _ in range(100)]
    """
    done = threading.Event()

    def release_until_done():
        while not done.wait(interval_seconds):
            release_free_heap()

    thread = threading.Thread(target=release_until_done, name="release_free_heap", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        release_free_heap()
