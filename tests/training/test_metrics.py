"""albert_tf.training.metrics against hand-worked values and against scikit-learn / scipy."""
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk_metrics

from albert_tf.training import metrics


def test_accuracy_hand_worked():
    assert metrics.accuracy([2, 0, 1, 1, 0], [2, 1, 1, 0, 0]) == pytest.approx(3 / 5)


def test_f1_hand_worked():
    # TP=2 (0, 3), FP=1 (1), FN=1 (2): F1 = 4 / (4 + 1 + 1).
    assert metrics.f1_score([1, 1, 0, 1, 0], [1, 0, 1, 1, 0]) == pytest.approx(4 / 6)


def test_mcc_hand_worked():
    # TP=2, FP=1, FN=1, TN=2: (4 - 1) / sqrt(3 * 3 * 3 * 3) = 1/3.
    assert metrics.matthews_corrcoef([1, 1, 0, 1, 0, 0], [1, 0, 1, 1, 0, 0]) == pytest.approx(1 / 3)


def test_pearson_and_spearman_hand_worked():
    # x = [1, 2, 3], y = [1, 3, 2]: centred x = [-1, 0, 1], y = [-1, 1, 0]; r = 1 / (sqrt(2) sqrt(2)) = 0.5.
    assert metrics.pearson_correlation([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    # Monotone but non-linear: Spearman is exactly 1, Pearson is not.
    assert metrics.spearman_correlation([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)
    assert metrics.pearson_correlation([1, 2, 3, 4], [1, 10, 100, 1000]) < 0.9


def test_ranks_average_ties():
    assert metrics.rank_with_ties([3, 1, 3, 3, 2]).tolist() == [4.0, 1.0, 4.0, 4.0, 2.0]


def test_degenerate_cases_give_zero():
    assert metrics.f1_score([0, 0], [0, 0]) == 0.0
    assert metrics.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0
    assert metrics.pearson_correlation([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_against_sklearn_and_scipy(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=200)
    predictions = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    assert metrics.accuracy(predictions, labels) == pytest.approx(sk_metrics.accuracy_score(labels, predictions))
    assert metrics.f1_score(predictions, labels) == pytest.approx(sk_metrics.f1_score(labels, predictions))
    assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
        sk_metrics.matthews_corrcoef(labels, predictions))
    # STS-B-like scores with many ties (rounded to 0.5), so Spearman's tie handling matters.
    gold = np.round(rng.uniform(0, 5, size=150) * 2) / 2
    predicted = np.round((gold + rng.normal(0, 1.0, size=150)) * 2) / 2
    assert metrics.pearson_correlation(predicted, gold) == pytest.approx(stats.pearsonr(predicted, gold)[0])
    assert metrics.spearman_correlation(predicted, gold) == pytest.approx(stats.spearmanr(predicted, gold)[0])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="same length"):
        metrics.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match=r"labels in \{0, 1\}"):
        metrics.f1_score([1, 0], [2, 0])
    with pytest.raises(ValueError, match="at least one"):
        metrics.pearson_correlation([], [])
