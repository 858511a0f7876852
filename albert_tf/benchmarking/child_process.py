"""A measurement in a Python process of its own: its peak memory is then the measured work's alone."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from typing import Dict, Optional, Sequence

import psutil

from albert_tf.training.host_allocator import release_library_pages

REPOSITORY_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# `make install`'s directory of the report's packages (requirements-report.txt: scipy, matplotlib), beside
# site-packages. No TensorFlow process has it on its path (albert_tf/experiments/write_report.py says why); the
# child processes that write a report or run a statistical test add it.
REPORT_PACKAGES = os.path.join(sys.prefix, "report")


def add_report_packages_to_path() -> None:
    """Appends REPORT_PACKAGES to sys.path: after site-packages, so nothing there shadows the environment's own."""
    if os.path.isdir(REPORT_PACKAGES) and REPORT_PACKAGES not in sys.path:
        sys.path.append(REPORT_PACKAGES)


@dataclasses.dataclass
class ChildRun:
    """What a child process reported, and its peak memory where it was sampled (else None).

    `peak_pss_bytes` is the proportional set size summed over the child and its descendants: a page shared by
    n processes counts 1/n, so it falls when other processes on the machine map the same libraries (every
    process that imports TensorFlow shares its hundreds of MB of code). `peak_anonymous_bytes` sums the PSS of
    their anonymous pages alone (Linux's Pss_Anon: the heap and stacks, a page that a forked worker shares with
    its parent counted once), which no other process can share, so nothing outside the job moves it (None
    where the kernel does not report it). `peak_rss_bytes` is the resident size of the child itself,
    `peak_descendant_rss_bytes` that of its largest descendant (a worker).
    """

    record: dict
    peak_pss_bytes: Optional[int] = None
    peak_rss_bytes: Optional[int] = None
    peak_anonymous_bytes: Optional[int] = None
    peak_descendant_rss_bytes: Optional[int] = None


def exit_description(returncode: int) -> str:
    """How a child process ended, as a failure message says it: its exit status, or the signal that killed it.

    Example:
    >>> exit_description(1), exit_description(-9)
    ('exit 1', 'killed by SIGKILL')
    """
    if returncode >= 0:
        return f"exit {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def start_python(arguments: Sequence[str], environment: Dict[str, str]) -> subprocess.Popen:
    """Starts `python ARGUMENTS` in the repository root with `environment`, its stdout and stderr read as text.

    Every child process of the library starts here, so that one replacement changes how they all start: the tests
    fork them from a process that has imported TensorFlow already (tests/forked_scripts.py).
    """
    return subprocess.Popen([sys.executable, *arguments], cwd=REPOSITORY_ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_python_child(arguments: Sequence[str], marker: str, failure: str, timeout_seconds: Optional[float] = None,
                     memory_poll_seconds: Optional[float] = None) -> ChildRun:
    """Runs `python ARGUMENTS` (`-c CODE ...` or `-m MODULE ...`) and returns the JSON that follows `marker` on the
    last line of its stdout that starts with it.

    The child runs from the repository root with it on PYTHONPATH, so it imports this checkout (data_gen and
    run_scripts included) and the parent need import nothing of what the child runs. With
    `memory_poll_seconds`, the child's memory is sampled at that interval while it runs. A child that fails or
    prints no `marker` line raises RuntimeError "`failure` (exit N):", or "(killed by SIGKILL)" for a child a signal
    ended (the kernel's out-of-memory killer sends SIGKILL), followed by the end of its stderr; one
    still running after `timeout_seconds` is killed and raises subprocess.TimeoutExpired. The parent first hands
    back its own resident pages of TensorFlow's libraries (`release_library_pages`): Linux reclaims no page that
    two processes map, so the parent's would keep the child's import pages resident in the child too, where a
    training process of its own releases them.

    Example:
    >>> run_python_child(["-c", "print('RESULT {\\"answer\\": 42}')"], "RESULT ", "The example failed").record
    {'answer': 42}
    """
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPOSITORY_ROOT,
                                                                         os.environ.get("PYTHONPATH")])))
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    release_library_pages()
    with start_python(arguments, environment) as child:
        memory = None if memory_poll_seconds is None else _PeakMemory(child.pid)
        while True:
            if memory is not None:
                memory.sample()
            wait_seconds = memory_poll_seconds
            if deadline is not None:
                remaining = max(0.0, deadline - time.monotonic())
                wait_seconds = remaining if wait_seconds is None else min(wait_seconds, remaining)
            try:
                # Waiting on the pipes rather than the process: a child that writes more than a pipe holds
                # would otherwise block.
                stdout, stderr = child.communicate(timeout=wait_seconds)
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    child.kill()
                    stdout, stderr = child.communicate()
                    raise subprocess.TimeoutExpired(child.args, timeout_seconds, output=stdout, stderr=stderr)
    lines = [line for line in stdout.splitlines() if line.startswith(marker)]
    if child.returncode != 0 or not lines:
        raise RuntimeError(f"{failure} ({exit_description(child.returncode)}):\n{stderr[-4000:]}")
    record = json.loads(lines[-1][len(marker):])
    if memory is None:
        return ChildRun(record)
    return ChildRun(record, peak_pss_bytes=memory.pss_bytes, peak_rss_bytes=memory.rss_bytes,
                    peak_anonymous_bytes=memory.anonymous_bytes,
                    peak_descendant_rss_bytes=memory.descendant_rss_bytes)


class _PeakMemory:
    """Over samples: the peak PSS and anonymous PSS of a process and its descendants together, the peak RSS of the
    process and the peak RSS of its largest descendant."""

    def __init__(self, pid: int):
        self._process = psutil.Process(pid)
        self.pss_bytes = self.rss_bytes = self.descendant_rss_bytes = 0
        self.anonymous_bytes: Optional[int] = None  # until a sample reads it

    def sample(self):
        try:
            descendants = self._process.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        main = _memory(self._process)
        if main is None:
            return
        of_descendants = [info for info in map(_memory, descendants) if info is not None]
        self.rss_bytes = max(self.rss_bytes, main.rss)
        self.pss_bytes = max(self.pss_bytes, main.pss + sum(info.pss for info in of_descendants))
        self.descendant_rss_bytes = max([self.descendant_rss_bytes] + [info.rss for info in of_descendants])
        if main.anonymous is not None:  # None: the kernel does not report it
            self.anonymous_bytes = max(self.anonymous_bytes or 0,
                                       main.anonymous + sum(info.anonymous or 0 for info in of_descendants))


@dataclasses.dataclass
class _Memory:
    rss: int
    pss: int
    anonymous: Optional[int]


_ROLLUP_FIELDS = {"Rss:": "rss", "Pss:": "pss", "Pss_Anon:": "anonymous"}


def _memory(process) -> Optional[_Memory]:
    """One reading of `process`'s resident, proportional and anonymous proportional sizes, or None once it has ended.

    All three come from one read of /proc/PID/smaps_rollup (Pss_Anon since Linux 5.9), so they describe the same
    moment: read apart, a growing process's anonymous pages could exceed the PSS read before them. Elsewhere
    psutil's reading, without the anonymous size.
    """
    fields = {}
    try:
        with open(f"/proc/{process.pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                parts = line.split()
                if parts and parts[0] in _ROLLUP_FIELDS:
                    fields[_ROLLUP_FIELDS[parts[0]]] = int(parts[1]) * 1024
    except OSError:  # the process has ended, or this system has no smaps_rollup
        pass
    if "rss" in fields and "pss" in fields:
        return _Memory(fields["rss"], fields["pss"], fields.get("anonymous"))
    try:
        info = process.memory_full_info()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return _Memory(info.rss, info.pss, None)
