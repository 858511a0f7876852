"""Shared pytest setup: quiet TensorFlow logs and a fixed Keras dtype policy per test."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import pytest


@pytest.fixture(autouse=True)
def _float32_policy():
    """Every test starts (and ends) under float32 so a mixed-precision test cannot leak."""
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")
