"""TensorFlow's host (CPU) memory allocator: malloc, or its caching BFC allocator.

TensorFlow reads TF_CPU_ALLOCATOR_USE_BFC once, when it creates its devices (at the first op), so a
choice made here takes effect only before that. With malloc, every XLA training step maps its temporary
buffer afresh (about 0.9 GB at ALBERT-base, batch 8 x 128) and faults each page in again: about 490k page
faults and 1-1.5 s of system time a step. The caching allocator keeps those pages; it made the float32
XLA pretraining step 11% faster on the benchmark machine, at the same peak RSS (BUILD_NOTES.md, "Speed
and memory"). The training entry points therefore ask for it unless the environment says otherwise.
"""

import os

CPU_ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"
CPU_ALLOCATORS = ("default", "bfc")


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
