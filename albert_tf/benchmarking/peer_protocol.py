"""What the peer comparison (peer_comparison) and the peers' steps it runs in child processes (peers/
pretraining_steps.py, in the repository beside the installed packages) agree on: the peers, the precisions, the
line that carries a step's record and how a child reads its peak memory.

It imports nothing but the standard library, so a peer's child process reads it without TensorFlow.

Example:
>>> PEERS, PRECISIONS
(('keras-hub', 'transformers'), ('float32', 'bfloat16'))
"""

import resource

PEERS = ("keras-hub", "transformers")
PRECISIONS = ("float32", "bfloat16")
RECORD_MARKER = "PEER_RECORD "


def peak_rss_mb() -> float:
    """This process's peak resident set size in MB: the kernel's VmHWM, which starts at the process's exec, where
    ru_maxrss also counts the pages of the parent that the fork copied (a child of a large parent would report the
    parent's size); ru_maxrss where there is no /proc.

    Example:
    >>> 0 < peak_rss_mb() < 1e6
    True
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
