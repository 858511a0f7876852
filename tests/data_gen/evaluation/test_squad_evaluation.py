"""The SQuAD metric against the official v1.1 / v2.0 evaluation semantics, with hand-worked numbers."""
import random

import pytest

from data_gen.evaluation import squad_evaluation as evaluation
from tests.helpers import official_squad_v2_eval, squad_dataset

# Answer texts that score in every way: articles and punctuation alone normalise to nothing.
TEXTS = ("the", "a", "An.", "Paris", "paris!", "the red dog", "red", "dog red", "in 1990", "1990", "")


@pytest.mark.parametrize("text, expected", [
    ("The Quick, brown fox!", "quick brown fox"),
    ("an apple a day", "apple day"),
    ("Theatre and thereafter", "theatre and thereafter"),  # articles only as whole words
    ("A.B.C. (1,000)", "abc 1000"),
    ("  Éclair\tAU  lait ", "éclair au lait"),
    ("the", ""),
])
def test_normalize_answer(text, expected):
    assert evaluation.normalize_answer(text) == expected


def test_token_f1_hand_worked():
    # prediction [big, red, dog] vs gold [red, dog]: precision 2/3, recall 1 -> 0.8.
    assert evaluation.f1_v1("the big red dog", "Red dog.") == pytest.approx(0.8)
    # Repeated tokens count once per occurrence in both: common {red: 1, dog: 1}.
    assert evaluation.f1_v1("red red dog", "red dog") == pytest.approx(0.8)
    assert evaluation.f1_v1("cat", "dog") == 0.0


def test_empty_answers_differ_between_versions():
    # Both normalise to nothing: v1's F1 is 0 (no common tokens), v2's is 1 (both empty).
    assert evaluation.f1_v1("The", "the") == 0.0
    assert evaluation.f1_v2("The", "the") == 1.0
    assert evaluation.f1_v2("", "Paris") == 0.0
    assert evaluation.exact_match("The", "a") == 1


def test_evaluate_v1_hand_worked():
    gold = {"q1": ["Denver Broncos", "The Denver Broncos"], "q2": ["1990"], "q3": ["Paris"], "q4": ["the"]}
    predictions = {"q1": "denver broncos.", "q2": "in 1990", "q4": "The", "extra": "ignored"}
    # EM: q1 1, q2 0, q3 missing 0, q4 1 (both normalise to "") -> 2/4.
    # F1: q1 1, q2 2/3 (precision 1/2, recall 1), q3 0, q4 0 (v1: no common token) -> (5/3)/4.
    results = evaluation.evaluate_v1(gold, predictions)
    assert results["exact_match"] == pytest.approx(50.0)
    assert results["f1"] == pytest.approx(100.0 * (5 / 3) / 4)


def test_evaluate_v1_needs_gold_answers():
    with pytest.raises(ValueError, match="1 gold questions have no answer.*'q2'.*evaluate_v2"):
        evaluation.evaluate_v1({"q1": ["a"], "q2": []}, {"q1": "a", "q2": ""})


GOLD_V2 = {"q1": ["Denver Broncos"], "q2": ["1990", "in 1990"], "q3": [], "q4": [], "q5": ["the"]}
PREDICTIONS_V2 = {"q1": "Denver Broncos", "q2": "1990 season", "q3": "", "q4": "Paris", "q5": ""}
NULL_ODDS_V2 = {"q1": -3.0, "q2": 0.5, "q3": 2.0, "q4": 1.0, "q5": -1.0}


def test_evaluate_v2_without_null_odds():
    # Raw EM: q1 1, q2 0, q3 1 ("" = no answer), q4 0, q5 1 (gold "the" normalises away -> gold "").
    # Raw F1: q1 1, q2 2/3 (max of 2/3 vs "1990" and 1/2 vs "in 1990"), q3 1, q4 0, q5 1.
    results = evaluation.evaluate_v2(GOLD_V2, PREDICTIONS_V2)
    assert results["exact_match"] == pytest.approx(60.0)
    assert results["f1"] == pytest.approx(100.0 * (11 / 3) / 5)
    assert results["total"] == 5
    # q5 has a gold answer in the file, so it counts as HasAns (official make_qid_to_has_ans).
    assert (results["HasAns_total"], results["NoAns_total"]) == (3, 2)
    assert results["HasAns_exact"] == pytest.approx(200.0 / 3)
    assert results["HasAns_f1"] == pytest.approx(100.0 * (8 / 3) / 3)
    assert results["NoAns_exact"] == pytest.approx(50.0)
    assert results["NoAns_f1"] == pytest.approx(50.0)
    assert "best_f1" not in results


def test_evaluate_v2_threshold_and_search():
    # na_prob_thresh 0.0 turns q2 (0.5 > 0, has an answer) to 0, q3 and q4 (no answer) to 1.
    results = evaluation.evaluate_v2(GOLD_V2, PREDICTIONS_V2, NULL_ODDS_V2, na_prob_thresh=0.0)
    assert results["exact_match"] == pytest.approx(80.0)
    assert results["f1"] == pytest.approx(80.0)
    assert results["NoAns_exact"] == pytest.approx(100.0)
    # The search answers questions in increasing null odds: q1 (-3), q5 (-1), q2 (0.5), q4 (1), q3 (2),
    # starting from 2 (both no-answer questions right). EM: 2 -> 3 -> 4 -> 4 -> 3 -> 3: best 4/5 at -1.
    # F1: 2 -> 3 -> 4 -> 4 + 2/3 -> 3 + 2/3 -> 3 + 2/3: best (14/3)/5 at 0.5.
    assert results["best_exact"] == pytest.approx(80.0)
    assert results["best_exact_thresh"] == -1.0
    assert results["best_f1"] == pytest.approx(100.0 * (14 / 3) / 5)
    assert results["best_f1_thresh"] == 0.5
    # The default na_prob_thresh 1.0 only affects q3 (2.0 > 1.0), which is right either way.
    assert evaluation.evaluate_v2(GOLD_V2, PREDICTIONS_V2, NULL_ODDS_V2)["exact_match"] == pytest.approx(60.0)


def test_evaluate_v2_as_original_reanswers_strictly_below_the_threshold():
    # F1's best threshold is 0.5 (above). The original answers only null odds < 0.5: q1 and q5, so q2 ("1990
    # season", F1 2/3 against "1990") turns to no answer. The na_prob_thresh of 1.0 then only touches q3.
    results = evaluation.evaluate_v2_as_original(GOLD_V2, PREDICTIONS_V2, NULL_ODDS_V2)
    assert results["null_score_diff_threshold"] == 0.5
    assert results["exact_match"] == pytest.approx(80.0) and results["f1"] == pytest.approx(80.0)
    assert results["total"] == 5


def test_evaluate_v2_as_original_applies_the_official_na_prob_thresh():
    # Every null odds is above 1.0, so the answered q1 counts as "no answer" (wrong) even though its text is right.
    gold = {"q1": ["x"], "q2": [], "q3": ["z"]}
    results = evaluation.evaluate_v2_as_original(gold, {"q1": "x", "q2": "y", "q3": "z"},
                                                 {"q1": 1.2, "q2": 2.0, "q3": 1.6})
    assert results["null_score_diff_threshold"] == 1.6
    assert results["f1"] == pytest.approx(100.0 / 3)
    assert evaluation.evaluate_v2(gold, {"q1": "x", "q2": "y", "q3": "z"},
                                  {"q1": 1.2, "q2": 2.0, "q3": 1.6})["best_f1"] == pytest.approx(100.0)


def test_find_best_thresh_keeps_official_start_value():
    # Answering nothing is best: the official threshold stays at its start value 0.0.
    score, threshold = evaluation.find_best_thresh({"q1": "x", "q2": "y"}, {"q1": 0.0, "q2": 0.0},
                                                   {"q1": 5.0, "q2": 7.0}, {"q1": True, "q2": False})
    assert (score, threshold) == (50.0, 0.0)


def test_evaluate_v2_needs_every_prediction():
    with pytest.raises(ValueError, match="1 of 5 questions have no prediction.*'q4'"):
        evaluation.evaluate_v2(GOLD_V2, {key: value for key, value in PREDICTIONS_V2.items() if key != "q4"})
    with pytest.raises(ValueError, match="no no-answer score.*'q1'"):
        evaluation.evaluate_v2(GOLD_V2, PREDICTIONS_V2, {"q2": 0.0, "q3": 0.0, "q4": 0.0, "q5": 0.0})


def _random_v2_case(seed, count=30):
    rng = random.Random(seed)
    questions, predictions, null_odds = [], {}, {}
    for index in range(count):
        answers = [] if rng.random() < 0.3 else [rng.choice(TEXTS[:-1]) for _ in range(rng.randint(1, 3))]
        questions.append((f"q{index}", "the red dog in Paris in 1990", answers))
        predictions[f"q{index}"] = rng.choice(TEXTS)
        null_odds[f"q{index}"] = round(rng.uniform(-3.0, 3.0), 1)  # ties between questions happen
    return questions, predictions, null_odds


@pytest.mark.parametrize("seed", range(4))
def test_evaluate_v2_is_the_official_script(seed):
    questions, predictions, null_odds = _random_v2_case(seed)
    dataset = squad_dataset(questions)
    gold = {qas_id: answers for qas_id, _, answers in questions}
    for na_probs, na_prob_thresh in ((None, 1.0), (null_odds, 1.0), (null_odds, 0.0), (null_odds, -1.5)):
        official = official_squad_v2_eval(dataset, predictions, na_probs, na_prob_thresh)
        ours = evaluation.evaluate_v2(gold, predictions, na_probs, na_prob_thresh)
        assert ours == pytest.approx({"exact_match" if name == "exact" else name: value
                                      for name, value in official.items()})
