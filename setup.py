"""For Beam's --setup_file: without the `build` package, Beam stages a project by `python setup.py sdist`.

Everything about the package is in pyproject.toml; this file only lets that command run.
"""
from setuptools import setup

setup()
