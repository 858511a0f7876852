"""SQuAD post-processing: model outputs of every document span -> n-best answers per question, and the files.

Faithful to google-research/albert squad_utils (accumulate_predictions_v1/v2, write_predictions_v1/v2):
- candidates are (start, end) document positions whose start is in the span where it has max context,
  end >= start, length <= max_answer_length; their score is start + end (v1: logits; v2: log probs);
- the n-best list is filled in decreasing score with distinct texts, each recovered from the ORIGINAL
  context (`context[first char of start piece : last char of end piece + 1].strip()`), and carries
  `probability`, a softmax over the n-best scores;
- v1 takes the n_best_size best starts x ends of every span; with no valid candidate the answer is
  "empty" (the original's nonce);
- v2 takes the model's beam (start_top x end_top); the null odds of a question is the smallest
  cls_logit over its spans; with no valid candidate the best answer is "" (scores -1e6).

One choice differs from the original: a v2 question is answered when its null odds is <= the threshold
(the official evaluation's "no answer when the score is > threshold"), not only when it is <, so a
threshold found by the official search reproduces the score it was found with.
"""

import json
import math
import unicodedata
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from data_gen.readers.squad import FeatureAlignment, SquadExample

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
V1_EMPTY_TEXT = "empty"
V2_EMPTY_LOG_PROB = -1e6
# The score a question without any document span gets; the original's "large and positive" start value.
NO_SPAN_NULL_ODDS = 1e6
V1_RESULT_KEYS = ("unique_ids", "start_logits", "end_logits")
V2_RESULT_KEYS = ("unique_ids", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
                  "cls_logits")


def postprocess_v1(examples: Sequence[SquadExample], alignment: FeatureAlignment, results: Mapping[str, np.ndarray],
                   n_best_size: int = 20, max_answer_length: int = 30) -> Tuple[Dict[str, str], Dict[str, list]]:
    """Predictions {qid: text} and n-best lists {qid: [{text, probability, start_logit, end_logit}]}.

    `results` holds "unique_ids" [N] and "start_logits", "end_logits" [N, S] of the model, in any order.

    Example (one span: [CLS] who [SEP] Ann met Bob. [SEP]):
    >>> from data_gen.readers.squad import FeatureAlignment, SquadExample
    >>> example = SquadExample("q1", "Who?", "Ann met Bob.", ["Bob"])
    >>> alignment = FeatureAlignment(
    ...     unique_ids=np.array([7]), example_index=np.array([0]),
    ...     token_start_char=np.array([[-1, -1, -1, 0, 4, 8, -1]]),
    ...     token_end_char=np.array([[-1, -1, -1, 2, 6, 11, -1]]),
    ...     token_is_max_context=np.array([[0, 0, 0, 1, 1, 1, 0]]))
    >>> logits = np.array([[0.0, 0.0, 0.0, 0.0, 1.0, 5.0, 0.0]])
    >>> results = {"unique_ids": np.array([7]), "start_logits": logits, "end_logits": logits}
    >>> predictions, nbest = postprocess_v1([example], alignment, results)
    >>> predictions, [entry["text"] for entry in nbest["q1"]][:3]
    ({'q1': 'Bob.'}, ['Bob.', 'met Bob.', 'Ann met Bob.'])
    """
    rows = _result_rows(alignment, results, V1_RESULT_KEYS)
    predictions, all_nbest = {}, {}
    for example_index, example in enumerate(examples):
        candidates = []
        for feature in _features_of(alignment, example_index):
            row = rows[feature]
            start_logits, end_logits = results["start_logits"][row], results["end_logits"][row]
            for start, end in _valid_pairs(alignment, feature, _best_indexes(start_logits, n_best_size),
                                           _best_indexes(end_logits, n_best_size), max_answer_length):
                candidates.append((float(start_logits[start]), float(end_logits[end]), feature, start, end))
        nbest = _nbest(example, alignment, candidates, n_best_size, ("start_logit", "end_logit"))
        if not nbest:
            nbest = [{"text": V1_EMPTY_TEXT, "start_logit": 0.0, "end_logit": 0.0}]
        _add_probabilities(nbest, ("start_logit", "end_logit"))
        predictions[example.qas_id] = nbest[0]["text"]
        all_nbest[example.qas_id] = nbest
    return predictions, all_nbest


def postprocess_v2(examples: Sequence[SquadExample], alignment: FeatureAlignment, results: Mapping[str, np.ndarray],
                   n_best_size: int = 20, max_answer_length: int = 30
                   ) -> Tuple[Dict[str, str], Dict[str, list], Dict[str, float]]:
    """Best non-null answers {qid: text}, n-best lists and null odds {qid: min cls_logit over spans}.

    `results` holds "unique_ids" [N], "start_top_log_probs" / "start_top_index" [N, K],
    "end_top_log_probs" / "end_top_index" [N, K * E] (end beam j of start i at i * E + j) and
    "cls_logits" [N]. Turn the answers into predictions with `apply_null_threshold`.
    """
    rows = _result_rows(alignment, results, V2_RESULT_KEYS)
    start_n_top = results["start_top_index"].shape[1]
    end_n_top = results["end_top_index"].shape[1] // max(start_n_top, 1)
    best_answers, all_nbest, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates = []
        score_null = NO_SPAN_NULL_ODDS
        for feature in _features_of(alignment, example_index):
            row = rows[feature]
            score_null = min(score_null, float(results["cls_logits"][row]))
            for i in range(start_n_top):
                start = int(results["start_top_index"][row, i])
                for j in range(end_n_top):
                    end = int(results["end_top_index"][row, i * end_n_top + j])
                    if _is_valid(alignment, feature, start, end, max_answer_length):
                        candidates.append((float(results["start_top_log_probs"][row, i]),
                                           float(results["end_top_log_probs"][row, i * end_n_top + j]),
                                           feature, start, end))
        nbest = _nbest(example, alignment, candidates, n_best_size, ("start_log_prob", "end_log_prob"))
        if not nbest:
            nbest = [{"text": "", "start_log_prob": V2_EMPTY_LOG_PROB, "end_log_prob": V2_EMPTY_LOG_PROB}]
        _add_probabilities(nbest, ("start_log_prob", "end_log_prob"))
        best_answers[example.qas_id] = nbest[0]["text"]
        all_nbest[example.qas_id] = nbest
        null_odds[example.qas_id] = score_null
    return best_answers, all_nbest, null_odds


def apply_null_threshold(best_answers: Mapping[str, str], null_odds: Mapping[str, float],
                         threshold: Optional[float]) -> Dict[str, str]:
    """{qid: best answer if its null odds <= threshold else ""}; threshold None answers every question.

    Example:
    >>> apply_null_threshold({"q1": "Bob", "q2": "Ann"}, {"q1": -2.0, "q2": 3.0}, 0.0)
    {'q1': 'Bob', 'q2': ''}
    """
    return {qas_id: text if threshold is None or null_odds[qas_id] <= threshold else ""
            for qas_id, text in best_answers.items()}


def write_prediction_files(output_dir: str, predictions: Mapping[str, str], nbest: Mapping[str, list],
                           null_odds: Optional[Mapping[str, float]] = None) -> Dict[str, str]:
    """Writes predictions.json, nbest_predictions.json and (v2) null_odds.json; returns {name: path}.

    predictions.json and null_odds.json are what the official evaluation scripts read
    (`evaluate-v2.0.py data.json predictions.json --na-prob-file null_odds.json`).
    """
    tf.io.gfile.makedirs(output_dir)
    contents = {PREDICTIONS_FILE: predictions, NBEST_FILE: nbest}
    if null_odds is not None:
        contents[NULL_ODDS_FILE] = null_odds
    paths = {}
    for name, content in contents.items():
        paths[name] = os.path.join(output_dir, name)
        with tf.io.gfile.GFile(paths[name], "w") as writer:
            writer.write(json.dumps(content, indent=4, ensure_ascii=False) + "\n")
    return paths


def _result_rows(alignment, results, keys):
    missing_keys = [key for key in keys if key not in results]
    if missing_keys:
        raise ValueError(f"Model results lack {missing_keys}; post-processing needs {list(keys)}.")
    rows = {int(unique_id): row for row, unique_id in enumerate(np.asarray(results["unique_ids"]).reshape(-1))}
    feature_rows = []
    for unique_id in alignment.unique_ids:
        if int(unique_id) not in rows:
            raise ValueError(f"No model result for feature unique_id {int(unique_id)}; every evaluation feature "
                             f"needs one ({len(rows)} results for {len(alignment.unique_ids)} features).")
        feature_rows.append(rows[int(unique_id)])
    return feature_rows


def _features_of(alignment, example_index):
    return np.flatnonzero(alignment.example_index == example_index)


def _best_indexes(logits, n_best_size):
    # A stable sort, so equal logits keep position order as the original's sorted(..., reverse=True) does.
    return np.argsort(-np.asarray(logits, np.float64), kind="stable")[:n_best_size]


def _is_valid(alignment, feature, start, end, max_answer_length):
    return (0 <= start <= end < alignment.token_start_char.shape[1]
            and alignment.token_is_max_context[feature, start] == 1
            and alignment.token_start_char[feature, end] >= 0
            and end - start + 1 <= max_answer_length)


def _valid_pairs(alignment, feature, start_indexes, end_indexes, max_answer_length):
    return [(int(start), int(end)) for start in start_indexes for end in end_indexes
            if _is_valid(alignment, feature, int(start), int(end), max_answer_length)]


def span_text(paragraph_text: str, alignment, feature: int, start: int, end: int) -> str:
    """The answer text of document positions start..end of `feature`: the raw paragraph from the start piece's first
    character to the end piece's last, stripped, as the original cuts it.

    A word-start marker that covers no character has an empty range (end = start - 1), and a span of it alone an
    empty text, as in the original; only at the paragraph's first character does the original's alignment give
    such a marker that character (its _convert_index finds no character before it).
    """
    first_char = alignment.token_start_char[feature, start]
    last_char = alignment.token_end_char[feature, end]
    if first_char == 0 and last_char < 0:
        last_char = 0
    return _strip_invisible(paragraph_text[first_char:last_char + 1])


def _strip_invisible(text: str) -> str:
    """`text` without whitespace and format characters (zero-width spaces, joiners, marks of direction) at its ends:
    SentencePiece's normalisation drops the latter, so the original's alignment matched no piece to them."""
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start]) == "Cf"):
        start += 1
    while end > start and (text[end - 1].isspace() or unicodedata.category(text[end - 1]) == "Cf"):
        end -= 1
    return text[start:end]


def _nbest(example, alignment, candidates, n_best_size, score_names):
    candidates = sorted(candidates, key=lambda candidate: candidate[0] + candidate[1], reverse=True)
    nbest, seen = [], set()
    for start_score, end_score, feature, start, end in candidates:
        if len(nbest) >= n_best_size:
            break
        text = span_text(example.paragraph_text, alignment, feature, start, end)
        if text in seen:
            continue
        seen.add(text)
        nbest.append({"text": text, score_names[0]: start_score, score_names[1]: end_score})
    return nbest


def _add_probabilities(nbest: List[dict], score_names):
    scores = [entry[score_names[0]] + entry[score_names[1]] for entry in nbest]
    top = max(scores)
    exponentials = [math.exp(score - top) for score in scores]
    total = sum(exponentials)
    for index, exponential in enumerate(exponentials):
        entry = nbest[index]
        nbest[index] = {"text": entry["text"], "probability": exponential / total,
                        score_names[0]: entry[score_names[0]], score_names[1]: entry[score_names[1]]}
