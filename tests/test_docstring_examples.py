"""The runnable examples in the library's docstrings run, and print what they say."""

import doctest
import importlib
import os
import pkgutil

import pytest

import albert_tf
import data_gen

MODULES = sorted(name for package in (albert_tf, data_gen)
                 for _, name, _ in pkgutil.walk_packages(package.__path__, package.__name__ + "."))
# Their examples run a benchmark or build a corpus: seconds each.
SLOW_MODULES = ("albert_tf.benchmarking", "data_gen.pretraining.corpora")


@pytest.mark.parametrize("module_name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_MODULES else name
                                         for name in MODULES])
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    environment = dict(os.environ)  # Some examples choose settings, such as the host allocator.
    try:
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    finally:
        os.environ.clear()
        os.environ.update(environment)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {module_name} failed."
