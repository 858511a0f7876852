"""What the peer comparison (peer_comparison) and the peers' steps it runs in child processes (peers/
pretraining_steps.py, in the repository beside the installed packages) agree on: the peers, the precisions, the
line that carries a step's record and how a child reads its peak memory.

It imports the standard library and albert_tf.training.host_allocator, which imports no TensorFlow, so a peer's
child process reads it without TensorFlow.

Example:
>>> PEERS, PRECISIONS
(('keras-hub', 'transformers'), ('float32', 'bfloat16'))
"""

import json
import resource
import sys
from typing import Callable, Sequence

from albert_tf.training.host_allocator import process_status_bytes

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
    high_water_mark = process_status_bytes("VmHWM")
    if high_water_mark is None:
        high_water_mark = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return high_water_mark / 1e6


def check_peer_run(peer: str, precision: str, peers: Sequence[str], what: str = "peer") -> None:
    """Fails, naming the value, unless `peer` is one of `peers` (called `what` in the message) and `precision`
    one of PRECISIONS.

    Example:
    >>> check_peer_run("transformers", "bfloat16", PEERS)
    """
    if peer not in peers:
        raise ValueError(f"Unknown {what} {peer!r}; allowed: {', '.join(peers)}.")
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown peer precision {precision!r}; allowed: {', '.join(PRECISIONS)}.")


def run_peer_child(argv: Sequence[str], run: Callable[[str, str, dict], dict]) -> None:
    """The entry of a peer's child process, `python -m peers.<module> PEER PRECISION SPEC_JSON`: prints
    `run(peer, precision, spec)`'s record after RECORD_MARKER.

    The spec's "extra_paths" (where `make peers` installed keras-hub) go at the end of this process's path only,
    after site-packages, so nothing there can shadow the environment's own packages.
    """
    peer, precision, spec = argv
    spec = json.loads(spec)
    sys.path.extend(spec.get("extra_paths", []))
    print(RECORD_MARKER + json.dumps(run(peer, precision, spec)))
