"""The official SQuAD v1.1 and v2.0 evaluation, on `{question id: gold answer texts}` and `{question id: text}`.

The scores, answer normalisation and threshold search are those of the official scripts
(evaluate-v1.1.py, evaluate-v2.0.py, which google-research/albert squad_utils copies):
answers are lowercased, stripped of punctuation and of the articles a/an/the, and whitespace-collapsed;
EM and F1 take the max over the gold answers.

The two versions differ in small ways that are kept:
- v1.1: a question without prediction scores 0 and is counted; F1 is 0 whenever the token overlap is
  empty, even when prediction and answer both normalise to nothing.
- v2.0: gold answers that normalise to nothing are dropped, and a question left without gold answers
  has the single gold answer ""; F1 of an empty prediction or answer is 1 when both are empty, else 0.
  A no-answer probability (here the null odds, any real score) above `na_prob_thresh` turns a
  prediction into "no answer"; `find_best_thresh` scans every threshold.

Key names: `evaluate_v1` returns the official "exact_match" and "f1". `evaluate_v2` returns the
official v2 keys except that "exact" is named "exact_match" (HasAns_exact, NoAns_exact, best_exact and
best_exact_thresh keep their official names). `evaluate_v2_as_original` computes what the original
run_squad_v2.py reports instead (a threshold tuned on the scored split, then the official script).
"""

import collections
import re
import string
from typing import Dict, Mapping, Optional, Sequence, Tuple

from absl import logging

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)
# evaluate-v2.0.py's default, which the original's squad_utils.evaluate_v2 applies to the null odds.
ORIGINAL_NA_PROB_THRESH = 1.0


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace.

    Example:
    >>> normalize_answer("The  Denver-Broncos!")
    'denverbroncos'
    """
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> int:
    """1 when both normalise to the same text, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction: str, gold: str) -> float:
    """Token F1 as evaluate-v1.1.py computes it (0 without common tokens).

    Example:
    >>> round(f1_v1("the big red dog", "red dog"), 4)
    0.8
    """
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = sum((collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_v2(prediction: str, gold: str) -> float:
    """Token F1 as evaluate-v2.0.py computes it: an empty side scores 1 if both are empty, else 0."""
    prediction_tokens = normalize_answer(prediction).split() if prediction else []
    gold_tokens = normalize_answer(gold).split() if gold else []
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    return f1_v1(prediction, gold)


def evaluate_v1(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str]) -> Dict[str, float]:
    """evaluate-v1.1.py: {"exact_match", "f1"} in percent over every gold question.

    Example:
    >>> evaluate_v1({"q1": ["Denver Broncos"], "q2": ["1990"]}, {"q1": "the Denver Broncos", "q2": "in 1990"})
    {'exact_match': 50.0, 'f1': 83.33333333333333}
    """
    if not gold:
        raise ValueError("evaluate_v1 needs at least one gold question.")
    unanswered = [qas_id for qas_id, answers in gold.items() if not answers]
    if unanswered:
        raise ValueError(f"{len(unanswered)} gold questions have no answer (first: {unanswered[0]!r}); the v1.1 "
                         "evaluation needs at least one per question (SQuAD v2.0 data needs evaluate_v2).")
    missing = [qas_id for qas_id in gold if qas_id not in predictions]
    if missing:
        logging.warning("%d of %d questions have no prediction and score 0 (first: %r).", len(missing), len(gold),
                        missing[0])
    exact_total = f1_total = 0.0
    for qas_id, answers in gold.items():
        if qas_id in predictions:
            exact_total += max(exact_match(predictions[qas_id], answer) for answer in answers)
            f1_total += max(f1_v1(predictions[qas_id], answer) for answer in answers)
    return {"exact_match": 100.0 * exact_total / len(gold), "f1": 100.0 * f1_total / len(gold)}


def raw_scores_v2(gold: Mapping[str, Sequence[str]],
                  predictions: Mapping[str, str]) -> Tuple[Dict[str, int], Dict[str, float]]:
    """evaluate-v2.0.py get_raw_scores: per-question EM and F1 before any no-answer threshold."""
    exact_scores, f1_scores = {}, {}
    for qas_id, answers in gold.items():
        answers = [answer for answer in answers if normalize_answer(answer)] or [""]
        prediction = predictions[qas_id]
        exact_scores[qas_id] = max(exact_match(prediction, answer) for answer in answers)
        f1_scores[qas_id] = max(f1_v2(prediction, answer) for answer in answers)
    return exact_scores, f1_scores


def apply_no_answer_threshold(scores: Mapping[str, float], na_probs: Mapping[str, float],
                              has_answer: Mapping[str, bool], na_prob_thresh: float) -> Dict[str, float]:
    """A question whose no-answer score is above the threshold scores 1 if it has no answer, else 0."""
    return {qas_id: float(not has_answer[qas_id]) if na_probs[qas_id] > na_prob_thresh else score
            for qas_id, score in scores.items()}


def find_best_thresh(predictions: Mapping[str, str], scores: Mapping[str, float], na_probs: Mapping[str, float],
                     has_answer: Mapping[str, bool]) -> Tuple[float, float]:
    """evaluate-v2.0.py find_best_thresh: (best score in percent, its threshold).

    Questions are answered in increasing no-answer score; the threshold is the score of the last one
    answered, and 0.0 when answering none is best (the official start value).
    """
    current = best = sum(1 for qas_id in has_answer if not has_answer[qas_id])
    best_thresh = 0.0
    for qas_id in sorted(na_probs, key=lambda key: na_probs[key]):
        if qas_id not in scores:
            continue
        if has_answer[qas_id]:
            current += scores[qas_id]
        elif predictions[qas_id]:
            current -= 1
        if current > best:
            best = current
            best_thresh = na_probs[qas_id]
    return 100.0 * best / len(scores), best_thresh


def evaluate_v2(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
                na_probs: Optional[Mapping[str, float]] = None, na_prob_thresh: float = 1.0) -> Dict[str, float]:
    """evaluate-v2.0.py's main: overall, HasAns_ and NoAns_ scores (percent) and, with `na_probs`, best_*.

    `gold[qid]` is empty for a question without answer. Every gold question needs a prediction (the
    official script fails on a missing one). Without `na_probs` every no-answer score is 0.

    Example:
    >>> gold = {"q1": ["Denver Broncos"], "q2": []}
    >>> evaluate_v2(gold, {"q1": "Denver Broncos", "q2": ""})["exact_match"]
    100.0
    """
    if not gold:
        raise ValueError("evaluate_v2 needs at least one gold question.")
    missing = [qas_id for qas_id in gold if qas_id not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} of {len(gold)} questions have no prediction (first: {missing[0]!r}); the "
                         "SQuAD v2.0 evaluation needs one per question (\"\" for no answer).")
    search_threshold = na_probs is not None
    if na_probs is None:
        na_probs = {qas_id: 0.0 for qas_id in gold}
    without_odds = [qas_id for qas_id in gold if qas_id not in na_probs]
    if without_odds:
        raise ValueError(f"{len(without_odds)} of {len(gold)} questions have no no-answer score (first: "
                         f"{without_odds[0]!r}); na_probs needs one per question.")
    has_answer = {qas_id: bool(answers) for qas_id, answers in gold.items()}
    exact_raw, f1_raw = raw_scores_v2(gold, predictions)
    exact_thresh = apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1_thresh = apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    results = _eval_dict(exact_thresh, f1_thresh, list(gold))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qas_ids = [qas_id for qas_id, value in has_answer.items() if value == wanted]
        if qas_ids:
            part = _eval_dict(exact_thresh, f1_thresh, qas_ids)
            results.update({f"{prefix}_exact": part["exact_match"], f"{prefix}_f1": part["f1"],
                            f"{prefix}_total": part["total"]})
    if search_threshold:
        results["best_exact"], results["best_exact_thresh"] = find_best_thresh(predictions, exact_raw, na_probs,
                                                                               has_answer)
        results["best_f1"], results["best_f1_thresh"] = find_best_thresh(predictions, f1_raw, na_probs, has_answer)
    return results


def evaluate_v2_as_original(gold: Mapping[str, Sequence[str]], best_answers: Mapping[str, str],
                            null_odds: Mapping[str, float]) -> Dict[str, float]:
    """The v2.0 numbers the original run_squad_v2.py reports (squad_utils.evaluate_v2), on one split.

    1. F1's best threshold is searched on these questions with every one answered (`find_best_thresh`).
    2. A question is answered again only when its null odds are strictly below it (the original's
       write_predictions_v2 uses `<`, so the question at the threshold turns to no answer).
    3. Those predictions are scored with the official script's na_prob_thresh=1.0 applied to the same
       null odds: a question with null odds above 1.0 counts as answered "no answer" whatever its text.
    Returns exact_match, f1 and total (percent), and the threshold as null_score_diff_threshold. It is
    tuned on the split it scores, so it is an upper bound for that split, not a held-out figure.

    Example:
    >>> gold = {"q1": ["x"], "q2": [], "q3": ["z"]}
    >>> answers, odds = {"q1": "x", "q2": "y", "q3": "z"}, {"q1": 1.2, "q2": 2.0, "q3": 1.6}
    >>> scores = evaluate_v2_as_original(gold, answers, odds)
    >>> round(scores["f1"], 1), scores["null_score_diff_threshold"]
    (33.3, 1.6)
    """
    has_answer = {qas_id: bool(answers) for qas_id, answers in gold.items()}
    _, f1_raw = raw_scores_v2(gold, best_answers)
    _, threshold = find_best_thresh(best_answers, f1_raw, null_odds, has_answer)
    predictions = {qas_id: text if null_odds[qas_id] < threshold else "" for qas_id, text in best_answers.items()}
    exact_raw, f1_raw = raw_scores_v2(gold, predictions)
    results = _eval_dict(apply_no_answer_threshold(exact_raw, null_odds, has_answer, ORIGINAL_NA_PROB_THRESH),
                         apply_no_answer_threshold(f1_raw, null_odds, has_answer, ORIGINAL_NA_PROB_THRESH), list(gold))
    results["null_score_diff_threshold"] = threshold
    return results


def _eval_dict(exact_scores, f1_scores, qas_ids):
    return {"exact_match": 100.0 * sum(exact_scores[qas_id] for qas_id in qas_ids) / len(qas_ids),
            "f1": 100.0 * sum(f1_scores[qas_id] for qas_id in qas_ids) / len(qas_ids), "total": len(qas_ids)}
