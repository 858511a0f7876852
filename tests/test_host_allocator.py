"""The host-allocator choice the training entry points make before TensorFlow creates its devices."""

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
