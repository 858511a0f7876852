"""The host-allocator choice the training entry points make before TensorFlow creates its devices, and heap release."""

import ctypes
import os
import platform
import threading
import time

import pytest

from albert_tf.training import host_allocator


def test_caching_allocator_is_selected_when_the_environment_is_silent(monkeypatch):
    monkeypatch.delenv(host_allocator.CPU_ALLOCATOR_VARIABLE, raising=False)
    assert host_allocator.prefer_caching_allocator() == "bfc"
    assert host_allocator.cpu_allocator() == "bfc"


@pytest.mark.parametrize("value, expected", [("false", "default"), ("0", "default"), ("true", "bfc"),
                                             ("1", "bfc")])
def test_an_explicit_environment_setting_wins(monkeypatch, value, expected):
    monkeypatch.setenv(host_allocator.CPU_ALLOCATOR_VARIABLE, value)
    assert host_allocator.prefer_caching_allocator() == expected
    assert host_allocator.cpu_allocator() == expected


def test_unknown_allocator_names_the_value(monkeypatch):
    monkeypatch.delenv(host_allocator.CPU_ALLOCATOR_VARIABLE, raising=False)
    with pytest.raises(ValueError, match="'tcmalloc'"):
        host_allocator.select_cpu_allocator("tcmalloc")


def _resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


needs_glibc_and_procfs = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
    reason="malloc_trim and /proc are glibc and Linux facilities")
KEEP_EVERY = 64


def _touched_chunks(count=40_000, chunk_bytes=4096):
    """libc and `count` malloc'd chunks, every page written (about 160 MB resident)."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(chunk_bytes) for _ in range(count)]
    for chunk in chunks:
        ctypes.memset(chunk, 1, chunk_bytes)
    return libc, chunks


def _fragment(libc, chunks):
    """Frees all but every KEEP_EVERY-th chunk, so free() alone cannot shrink the heap: only a trim returns the gaps."""
    for index, chunk in enumerate(chunks):
        if index % KEEP_EVERY:
            libc.free(chunk)


def _free_the_rest(libc, chunks):
    for chunk in chunks[::KEEP_EVERY]:
        libc.free(chunk)


@needs_glibc_and_procfs
def test_release_free_heap_returns_fragmented_free_pages():
    libc, chunks = _touched_chunks()
    _fragment(libc, chunks)
    before = _resident_bytes()
    assert host_allocator.release_free_heap()
    released = before - _resident_bytes()
    _free_the_rest(libc, chunks)
    assert released > 100e6


@needs_glibc_and_procfs
def test_releasing_free_heap_hands_pages_back_while_the_block_runs():
    threads_before = threading.active_count()
    with host_allocator.releasing_free_heap(interval_seconds=0.05):
        libc, chunks = _touched_chunks()
        allocated = _resident_bytes()
        _fragment(libc, chunks)
        time.sleep(1.0)
        released = allocated - _resident_bytes()
    _free_the_rest(libc, chunks)
    assert released > 100e6
    assert threading.active_count() == threads_before


@pytest.mark.parametrize("before, after", [
    (None, "--xla_cpu_use_fusion_emitters=false"),
    ("--xla_dump_to=/tmp/dump", "--xla_dump_to=/tmp/dump --xla_cpu_use_fusion_emitters=false"),
    ("--xla_cpu_use_fusion_emitters=true", "--xla_cpu_use_fusion_emitters=true")])
def test_lean_xla_compilation_is_added_unless_xla_flags_choose(monkeypatch, before, after):
    if before is None:
        monkeypatch.delenv("XLA_FLAGS", raising=False)
    else:
        monkeypatch.setenv("XLA_FLAGS", before)
    assert host_allocator.prefer_lean_xla_compilation() == after
    assert os.environ["XLA_FLAGS"] == after
