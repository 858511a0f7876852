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


@pytest.mark.parametrize("seed", range(4))
def test_multiclass_f1_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, 50)
    # Class 4 is only predicted and class 3 may never be: both count in scikit-learn's macro average.
    predictions = np.where(rng.random(50) < 0.6, labels, rng.integers(0, 5, 50))
    assert metrics.macro_f1(predictions, labels) == pytest.approx(
        sk_metrics.f1_score(labels, predictions, average="macro"))
    assert metrics.micro_f1(predictions, labels) == pytest.approx(
        sk_metrics.f1_score(labels, predictions, average="micro"))
    assert metrics.micro_f1(predictions, labels) == pytest.approx(metrics.accuracy(predictions, labels))


@pytest.mark.parametrize("seed", range(4))
def test_multilabel_metrics_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels = (rng.random((40, 5)) < 0.4).astype(int)
    predictions = np.where(rng.random((40, 5)) < 0.7, labels, 1 - labels)
    labels[:, 4] = 0  # a label that is never true,
    predictions[:, 3] = 0  # and one that is never predicted: both F1 0, counted in the macro mean.
    kwargs = dict(y_true=labels, y_pred=predictions, zero_division=0)
    np.testing.assert_allclose(metrics.multilabel_f1_scores(predictions, labels),
                               sk_metrics.f1_score(average=None, **kwargs))
    assert metrics.multilabel_micro_f1(predictions, labels) == pytest.approx(
        sk_metrics.f1_score(average="micro", **kwargs))
    assert metrics.multilabel_macro_f1(predictions, labels) == pytest.approx(
        sk_metrics.f1_score(average="macro", **kwargs))
    assert metrics.exact_match_ratio(predictions, labels) == pytest.approx(
        sk_metrics.accuracy_score(labels, predictions))


def test_multilabel_metrics_refuse_mismatched_or_non_binary_arrays():
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) \(predictions\) and \(2, 2\) \(labels\)"):
        metrics.multilabel_micro_f1(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"labels in \{0, 1\}, got \[2\]"):
        metrics.exact_match_ratio([[0, 1]], [[0, 2]])
