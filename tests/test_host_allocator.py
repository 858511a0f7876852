"""The host-allocator choice the training entry points make before TensorFlow creates its devices, and heap release."""

import ctypes
import os
import platform
import threading
import time

import pytest

from albert_tf import host_allocator


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


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
                    reason="malloc_trim and /proc are glibc and Linux facilities")
def test_release_free_heap_returns_fragmented_free_pages():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunk_bytes, keep_every = 4096, 64
    chunks = [libc.malloc(chunk_bytes) for _ in range(40_000)]
    for chunk in chunks:
        ctypes.memset(chunk, 1, chunk_bytes)
    # Every 64th chunk stays allocated, so free() alone cannot shrink the heap: only a trim returns the gaps.
    for index, chunk in enumerate(chunks):
        if index % keep_every:
            libc.free(chunk)
    before = _resident_bytes()
    assert host_allocator.release_free_heap()
    released = before - _resident_bytes()
    for chunk in chunks[::keep_every]:
        libc.free(chunk)
    assert released > 100e6


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
                    reason="malloc_trim and /proc are glibc and Linux facilities")
def test_releasing_free_heap_hands_pages_back_while_the_block_runs():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunk_bytes, keep_every = 4096, 64
    threads_before = threading.active_count()
    with host_allocator.releasing_free_heap(interval_seconds=0.05):
        chunks = [libc.malloc(chunk_bytes) for _ in range(40_000)]
        for chunk in chunks:
            ctypes.memset(chunk, 1, chunk_bytes)
        allocated = _resident_bytes()
        # free() alone cannot shrink this heap (every 64th chunk stays): only the thread's trims return the gaps.
        for index, chunk in enumerate(chunks):
            if index % keep_every:
                libc.free(chunk)
        time.sleep(1.0)
        released = allocated - _resident_bytes()
    for chunk in chunks[::keep_every]:
        libc.free(chunk)
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
