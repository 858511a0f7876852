"""Evaluation metrics of the fine-tuning benchmarks, in numpy, as GLUE and RACE report them.

Every function takes 1-D array-likes of equal, non-zero length (the multi-label ones 2-D [examples, labels] 0/1
arrays) and returns a Python float (`multilabel_f1_scores` an array).
Degenerate cases follow scikit-learn / the original's `tf.div_no_nan`: a zero denominator gives 0.0
(F1 with no predicted or true positives, MCC with a constant row or column of the confusion matrix).
"""

import numpy as np


def _as_pair(predictions, labels, dtype=None):
    predictions = np.asarray(predictions, dtype=dtype)
    labels = np.asarray(labels, dtype=dtype)
    if predictions.ndim != 1 or predictions.shape != labels.shape:
        raise ValueError(f"Metrics need two 1-D arrays of the same length, got shapes {predictions.shape} "
                         f"(predictions) and {labels.shape} (labels).")
    if predictions.size == 0:
        raise ValueError("Metrics need at least one example, got empty predictions and labels.")
    return predictions, labels


def _binary_counts(predictions, labels):
    predictions, labels = _as_pair(predictions, labels)
    for name, values in (("predictions", predictions), ("labels", labels)):
        unexpected = np.setdiff1d(np.unique(values), [0, 1])
        if unexpected.size:
            raise ValueError(f"Binary metrics need {name} in {{0, 1}}, got {unexpected[:5].tolist()}.")
    positive, true = predictions == 1, labels == 1
    return (float(np.sum(positive & true)), float(np.sum(positive & ~true)),
            float(np.sum(~positive & true)), float(np.sum(~positive & ~true)))


def accuracy(predictions, labels):
    """The fraction of predictions equal to their label.

    Example:
    >>> accuracy([0, 1, 1, 2], [0, 1, 0, 2])
    0.75
    """
    predictions, labels = _as_pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels):
    """Binary F1 of the positive label 1: 2·TP / (2·TP + FP + FN), as GLUE scores MRPC and QQP.

    Example:
    >>> round(f1_score([1, 1, 0, 0], [1, 0, 1, 0]), 4)
    0.5
    """
    true_positive, false_positive, false_negative, _ = _binary_counts(predictions, labels)
    denominator = 2 * true_positive + false_positive + false_negative
    return 2 * true_positive / denominator if denominator else 0.0


def matthews_corrcoef(predictions, labels):
    """Matthews correlation of binary predictions, as GLUE scores CoLA (0.0 when undefined).

    Example:
    >>> round(matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0]), 4)
    0.5774
    """
    tp, fp, fn, tn = _binary_counts(predictions, labels)
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson_correlation(predictions, labels):
    """Pearson correlation of two real-valued arrays (STS-B); 0.0 when either is constant.

    Example:
    >>> pearson_correlation([1.0, 2.0, 3.0], [2.0, 4.0, 7.0]) > 0.99
    True
    """
    predictions, labels = _as_pair(predictions, labels, dtype=np.float64)
    predictions = predictions - predictions.mean()
    labels = labels - labels.mean()
    denominator = np.sqrt(np.sum(predictions ** 2) * np.sum(labels ** 2))
    return float(np.sum(predictions * labels) / denominator) if denominator else 0.0


def rank_with_ties(values):
    """1-based ranks; tied values share the average of the ranks they span (what Spearman needs).

    Example:
    >>> rank_with_ties([10, 20, 20, 5]).tolist()
    [2.0, 3.5, 3.5, 1.0]
    """
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman_correlation(predictions, labels):
    """Spearman rank correlation: Pearson of the average ranks, so ties are handled (STS-B).

    Example:
    >>> spearman_correlation([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    1.0
    """
    predictions, labels = _as_pair(predictions, labels, dtype=np.float64)
    return pearson_correlation(rank_with_ties(predictions), rank_with_ties(labels))


# ---- several classes, and several labels per example ----------------------------------------------

def _f1(true_positive, false_positive, false_negative):
    """F1 from counts (arrays or floats); 0.0 where nothing was predicted or true, as scikit-learn."""
    true_positive, false_positive, false_negative = (np.asarray(count, dtype=np.float64) for count in
                                                     (true_positive, false_positive, false_negative))
    denominator = 2 * true_positive + false_positive + false_negative
    return np.divide(2 * true_positive, denominator, out=np.zeros_like(denominator), where=denominator > 0)


def _class_counts(predictions, labels):
    """(classes present in either, and per class TP, FP, FN) of single-label class ids."""
    predictions, labels = _as_pair(predictions, labels)
    classes = np.union1d(predictions, labels)
    predicted = predictions[:, None] == classes[None, :]
    true = labels[:, None] == classes[None, :]
    return (classes, np.sum(predicted & true, axis=0), np.sum(predicted & ~true, axis=0),
            np.sum(~predicted & true, axis=0))


def macro_f1(predictions, labels):
    """The mean of the per-class F1 over the classes that occur in the labels or the predictions (scikit-learn's
    `average="macro"`).

    Example:
    >>> round(macro_f1([0, 1, 2, 2], [0, 1, 1, 2]), 4)
    0.7778
    """
    _, true_positive, false_positive, false_negative = _class_counts(predictions, labels)
    return float(np.mean(_f1(true_positive, false_positive, false_negative)))


def micro_f1(predictions, labels):
    """F1 of the counts summed over classes; for one label per example it equals the accuracy.

    Example:
    >>> micro_f1([0, 1, 2, 2], [0, 1, 1, 2])
    0.75
    """
    _, true_positive, false_positive, false_negative = _class_counts(predictions, labels)
    return float(_f1(np.sum(true_positive), np.sum(false_positive), np.sum(false_negative)))


def _indicator_pair(predictions, labels):
    predictions = np.asarray(predictions)
    labels = np.asarray(labels)
    if predictions.ndim != 2 or predictions.shape != labels.shape or predictions.shape[0] == 0:
        raise ValueError(f"Multi-label metrics need two 2-D [examples, labels] arrays of the same non-empty shape, "
                         f"got shapes {predictions.shape} (predictions) and {labels.shape} (labels).")
    for name, values in (("predictions", predictions), ("labels", labels)):
        unexpected = np.setdiff1d(np.unique(values), [0, 1])
        if unexpected.size:
            raise ValueError(f"Multi-label metrics need {name} in {{0, 1}}, got {unexpected[:5].tolist()}.")
    return predictions == 1, labels == 1


def _label_counts(predictions, labels):
    predicted, true = _indicator_pair(predictions, labels)
    return np.sum(predicted & true, axis=0), np.sum(predicted & ~true, axis=0), np.sum(~predicted & true, axis=0)


def multilabel_f1_scores(predictions, labels) -> np.ndarray:
    """Each label's F1 over the examples, from [examples, labels] 0/1 arrays (scikit-learn's `average=None`).

    Example:
    >>> multilabel_f1_scores([[1, 0], [1, 1]], [[1, 0], [0, 1]]).tolist()
    [0.6666666666666666, 1.0]
    """
    return _f1(*_label_counts(predictions, labels))


def multilabel_macro_f1(predictions, labels):
    """The mean of every label's F1, a label that is never true nor predicted counting 0.0 (scikit-learn's
    multi-label `average="macro"`)."""
    return float(np.mean(multilabel_f1_scores(predictions, labels)))


def multilabel_micro_f1(predictions, labels):
    """F1 of the counts summed over every (example, label) cell.

    Example:
    >>> round(multilabel_micro_f1([[1, 0], [1, 1]], [[1, 0], [0, 1]]), 4)
    0.8
    """
    true_positive, false_positive, false_negative = _label_counts(predictions, labels)
    return float(_f1(np.sum(true_positive), np.sum(false_positive), np.sum(false_negative)))


def exact_match_ratio(predictions, labels):
    """The fraction of examples whose predicted label set is exactly the true one (scikit-learn's multi-label
    accuracy_score, subset accuracy).

    Example:
    >>> exact_match_ratio([[1, 0], [1, 1]], [[1, 0], [0, 1]])
    0.5
    """
    predicted, true = _indicator_pair(predictions, labels)
    return float(np.mean(np.all(predicted == true, axis=1)))
