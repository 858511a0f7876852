"""The host-allocator choice the training entry points make before TensorFlow creates its devices, and heap release."""

import contextlib
import ctypes
import hashlib
import logging
import mmap
import os
import platform
import shutil
import tempfile
import threading
import time

import numpy as np
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


# ---- library pages ------------------------------------------------------------------------------------

PAGE_BYTES = 4096
MAPPED_BYTES = 16 << 20


def _filesystem_type(path):
    """The type of the file system holding `path`, from the longest mount point of /proc/mounts above it."""
    path, best, kind = os.path.realpath(path), "", ""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            mount_point, mount_type = line.split()[1:3]
            inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best):
                best, kind = mount_point, mount_type
    return kind


@pytest.fixture
def disk_directory(tmp_path):
    """A directory on a disk-backed file system: pages of tmpfs files have nowhere to go without swap."""
    for candidate in (str(tmp_path), os.path.dirname(os.path.abspath(__file__))):
        if _filesystem_type(candidate) not in ("tmpfs", "ramfs", "devtmpfs"):
            directory = tempfile.mkdtemp(dir=candidate)
            yield directory
            shutil.rmtree(directory)
            return
    pytest.skip("no disk-backed directory to map a file from")


def _mapped_file(directory, name="library.so"):
    """A file of MAPPED_BYTES random bytes, written out to disk, mapped read-only with every page read."""
    path = os.path.join(directory, name)
    content = np.random.default_rng(0).integers(0, 256, MAPPED_BYTES, dtype=np.uint8).tobytes()
    with open(path, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    with open(path, "rb") as handle:
        mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    sum(mapping[offset] for offset in range(0, MAPPED_BYTES, PAGE_BYTES))
    return path, mapping, hashlib.sha256(content).hexdigest()


def _resident_bytes_of(path):
    resident, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                inside = len(fields) >= 6 and fields[5] == os.path.realpath(path)
            elif inside and fields[0] == "Rss:":
                resident += int(fields[1]) * 1024
    return resident


needs_linux_procfs = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"),
                                        reason="the page release reads Linux's /proc/self/maps")


@needs_linux_procfs
def test_library_pages_under_the_directory_are_released_and_read_back_intact(disk_directory, monkeypatch):
    monkeypatch.delenv(host_allocator.LIBRARY_PAGES_VARIABLE, raising=False)
    path, mapping, digest = _mapped_file(disk_directory)
    assert _resident_bytes_of(path) >= MAPPED_BYTES - PAGE_BYTES

    released = host_allocator.release_library_pages([disk_directory])

    assert released is not None, "this kernel has no MADV_PAGEOUT (Linux 5.4 and later)"
    assert _resident_bytes_of(path) < MAPPED_BYTES // 8
    assert released >= MAPPED_BYTES // 2
    assert hashlib.sha256(mapping[:]).hexdigest() == digest
    mapping.close()


@needs_linux_procfs
def test_files_outside_the_directories_keep_their_pages(disk_directory, tmp_path, monkeypatch):
    monkeypatch.delenv(host_allocator.LIBRARY_PAGES_VARIABLE, raising=False)
    path, mapping, _ = _mapped_file(disk_directory)
    assert host_allocator.release_library_pages([str(tmp_path / "elsewhere")]) is not None
    assert _resident_bytes_of(path) >= MAPPED_BYTES - PAGE_BYTES
    mapping.close()


@needs_linux_procfs
@pytest.mark.parametrize("value", ["0", "false"])
def test_the_environment_can_keep_the_library_pages(disk_directory, monkeypatch, value):
    monkeypatch.setenv(host_allocator.LIBRARY_PAGES_VARIABLE, value)
    path, mapping, _ = _mapped_file(disk_directory)
    assert host_allocator.release_library_pages([disk_directory]) is None
    assert _resident_bytes_of(path) >= MAPPED_BYTES - PAGE_BYTES
    mapping.close()


@needs_linux_procfs
def test_a_kernel_without_pageout_releases_nothing(disk_directory, monkeypatch):
    monkeypatch.delenv(host_allocator.LIBRARY_PAGES_VARIABLE, raising=False)

    def madvise_before_linux_5_4(address, length, advice):
        ctypes.set_errno(22)
        return -1

    monkeypatch.setattr(host_allocator, "_madvise", lambda: madvise_before_linux_5_4)
    path, mapping, _ = _mapped_file(disk_directory)
    assert host_allocator.release_library_pages([disk_directory]) is None
    mapping.close()


def test_start_up_memory_releases_library_pages_around_the_block_and_logs_them(monkeypatch, caplog):
    events = []

    def release_library_pages():
        events.append("library pages")
        return 300_000_000 if len(events) == 1 else 20_000_000

    @contextlib.contextmanager
    def releasing_free_heap():
        events.append("heap: enter")
        yield
        events.append("heap: exit")

    monkeypatch.setattr(host_allocator, "release_library_pages", release_library_pages)
    monkeypatch.setattr(host_allocator, "releasing_free_heap", releasing_free_heap)
    with caplog.at_level(logging.INFO):
        with host_allocator.releasing_start_up_memory():
            events.append("block")

    assert events == ["library pages", "heap: enter", "block", "heap: exit", "library pages"]
    assert "300 MB" in caplog.text and "20 MB" in caplog.text and "ALBERT_TF_RELEASE_LIBRARY_PAGES=0" in caplog.text
