"""TensorFlow's host (CPU) memory: its allocator (malloc, or the caching BFC allocator), and what start-up leaves.

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

And `release_library_pages` asks Linux to take back the resident pages of TensorFlow's shared libraries that
only its import used: registering every op and kernel touches about 300 MB of libtensorflow_cc that training
never reads again. The training loop's first call does it before tracing and again after compiling.
"""

import contextlib
import ctypes
import functools
import importlib.util
import os
import sys
import threading
from typing import Optional, Sequence

from absl import logging

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


LIBRARY_PAGES_VARIABLE = "ALBERT_TF_RELEASE_LIBRARY_PAGES"
# From Linux's <asm-generic/mman-common.h> (Linux 5.4 and later); Python's mmap module does not export it.
_MADV_PAGEOUT = 21
_EINVAL = 22


@functools.lru_cache(maxsize=None)
def _madvise():
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def _tensorflow_directory() -> Optional[str]:
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def process_status_bytes(field: str) -> Optional[int]:
    """A size field of /proc/self/status ("VmHWM", "RssFile", ...) in bytes; None without procfs or the field.

    Example:
    >>> process_status_bytes("NoSuchField") is None
    True
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def release_library_pages(directories: Optional[Sequence[str]] = None) -> Optional[int]:
    """Asks Linux to reclaim this process's resident pages of the files mapped from `directories`.

    The default is TensorFlow's package directory: its import registers every op and kernel, which leaves
    about 300 MB of libtensorflow_cc.so resident that training never touches again; the kernel reads back
    any page that is used later. Pages that another process also maps stay (they are shared anyway). Returns
    the bytes by which this process's file-backed resident memory fell, or None where nothing was asked:
    not Linux, a kernel before 5.4 (no MADV_PAGEOUT), or ALBERT_TF_RELEASE_LIBRARY_PAGES=0 in the environment.

    Example:
    >>> released = release_library_pages()
    >>> released is None or released >= 0
    True
    """
    if os.environ.get(LIBRARY_PAGES_VARIABLE, "1").lower() in ("0", "false"):
        return None
    madvise = _madvise()
    if not sys.platform.startswith("linux") or madvise is None:
        return None
    if directories is None:
        directories = [directory for directory in [_tensorflow_directory()] if directory]
    prefixes = tuple(os.path.join(os.path.realpath(directory), "") for directory in directories)
    before = process_status_bytes("RssFile")
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            mappings = [line.split(maxsplit=5) for line in maps]
    except OSError:
        return None
    if before is None:
        return None
    for fields in mappings:
        if len(fields) < 6 or not fields[5].rstrip("\n").startswith(prefixes):
            continue
        start, end = (int(address, 16) for address in fields[0].split("-"))
        # A mapping unmapped since /proc/self/maps was read fails with ENOMEM; only EINVAL means no support.
        if madvise(start, end - start, _MADV_PAGEOUT) != 0 and ctypes.get_errno() == _EINVAL:
            return None
    return max(0, before - (process_status_bytes("RssFile") or 0))


@contextlib.contextmanager
def releasing_start_up_memory():
    """Runs the block (the training loop's first call) between two `release_library_pages` and under
    `releasing_free_heap`, and logs what the library pages gave back.

    The first release takes the import's pages before tracing needs memory; the second those that only
    tracing and compilation read, before the training steps reach their peak.

    Example:
    >>> with releasing_start_up_memory():
    ...     garbage = [bytearray(1 << 16) for _ in range(100)]
    """
    before = release_library_pages()
    with releasing_free_heap():
        yield
    after = release_library_pages()
    if before is not None and after is not None:
        logging.info("Released %.0f MB of TensorFlow's resident library pages before tracing and %.0f MB after "
                     "compiling (%s=0 keeps them).", before / 1e6, after / 1e6, LIBRARY_PAGES_VARIABLE)
