"""Fixtures of the task tests."""
import pytest

from tests.tasks.task_data import make_squad_assets


@pytest.fixture(scope="module")
def squad_assets(tmp_path_factory):
    """(directory, SentencePiece model, config file) of the SQuAD colour task."""
    return make_squad_assets(tmp_path_factory.mktemp("run_squad"))
