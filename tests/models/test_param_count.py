
import pytest

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.models import param_count
from tests.helpers import run_script


@pytest.mark.parametrize("preset, overrides, expected", [
    ("albert-base", {}, 11_683_584),
    ("albert-large", {}, 17_683_968),
    ("albert-xxlarge", {}, 222_595_584),
    ("bert-large", {}, 334_607_360),
    ("albert-base", {"share_type": "attention"}, 63_647_232),
    ("albert-base", {"share_type": "ffn"}, 37_686_528),
    ("albert-base", {"share_type": "none"}, 89_650_176),
])
def test_analytic_counts(preset, overrides, expected):
    assert param_count.encoder_parameters(AlbertConfig.from_preset(preset, **overrides)) == expected


def test_albert_base_built_model_matches_its_analytic_count():
    config = AlbertConfig.from_preset("albert-base")
    assert param_count.model_parameters(AlbertEncoder(config)) == 11_683_584


@pytest.mark.slow
def test_paper_tables_script_prints_exact_counts_beside_the_paper():
    result = run_script("count_params", "--paper_tables", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "### Table 1" in result.stdout and "### Table 3" in result.stdout and "### Table 4" in result.stdout
    assert "| albert-xxlarge | 222,595,584 | 222.6 | 235 |" in result.stdout
    assert "| 128 | all | 11,683,584 | 11.7 | 12 |" in result.stdout
    assert "| 768 | ffn | 57,117,696 | 57.1 | 57 |" in result.stdout
    assert "| 64 | none | 87,648,000 | 87.6 | 87 |" in result.stdout


@pytest.mark.slow
def test_count_params_script_with_overrides():
    result = run_script("count_params", "--preset=albert-base", "--share_type=attention", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("63,647,232 parameters")
