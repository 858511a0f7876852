"""SQuAD v2.0's eval_results: exact_match and f1 are the official evaluate-v2.0.py's on the predictions.json
written, also for a gold answer that normalises to nothing; the threshold searches and the original's figures keep
their names."""
import json
import random

import pytest

from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.squad import SquadOptions, run_squad, v2_metrics
from data_gen.evaluation import squad_postprocess
from tests.helpers import official_squad_v2_eval, squad_dataset

# q2's only gold answer is "the", which normalises to nothing: the official script scores "" right there.
QUESTIONS = [("q1", "Paris is big", ["Paris"]), ("q2", "the river", ["the"]), ("q3", "a river", []),
             ("q4", "red dog", ["red dog", "dog"]), ("q5", "An apple", ["An", "a"])]
BEST_ANSWERS = {"q1": "Paris", "q2": "river", "q3": "river", "q4": "red", "q5": "apple"}
NULL_ODDS = {"q1": -2.0, "q2": 1.0, "q3": 3.0, "q4": 0.0, "q5": 0.5}


def _official_on_written(questions, best_answers, null_odds, threshold):
    written = squad_postprocess.apply_null_threshold(best_answers, null_odds, threshold)
    return official_squad_v2_eval(squad_dataset(questions), written)


def _gold(questions):
    return {qas_id: answers for qas_id, _, answers in questions}


def test_exact_match_and_f1_are_the_official_scores_of_predictions_json():
    metrics = v2_metrics(_gold(QUESTIONS), BEST_ANSWERS, NULL_ODDS, threshold=0.0)
    # Written: q1 "Paris" (right), q2 "" (right: gold [""]), q3 "" (right), q4 "red" (F1 2/3 vs "red dog"),
    # q5 "" (right: "An" and "a" normalise to nothing). Scoring the best answers at the threshold instead
    # counted q2 and q5 wrong (they have answers in the file): 40.0 exact.
    assert metrics["exact_match"] == pytest.approx(80.0)
    assert metrics["f1"] == pytest.approx(100.0 * (4 + 2 / 3) / 5)
    assert (metrics["total"], metrics["HasAns_total"], metrics["NoAns_total"]) == (5, 4, 1)
    assert metrics["HasAns_exact"] == pytest.approx(75.0) and metrics["NoAns_exact"] == pytest.approx(100.0)
    official = _official_on_written(QUESTIONS, BEST_ANSWERS, NULL_ODDS, 0.0)
    ours = {name: metrics[{"exact": "exact_match"}.get(name, name)] for name in official}
    assert ours == pytest.approx(official)


def test_the_threshold_searches_and_the_originals_figures_keep_their_names():
    metrics = v2_metrics(_gold(QUESTIONS), BEST_ANSWERS, NULL_ODDS, threshold=0.0)
    searched = official_squad_v2_eval(squad_dataset(QUESTIONS), BEST_ANSWERS, NULL_ODDS)
    for name in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        assert metrics[f"oracle_{name}"] == pytest.approx(searched[name])
    assert {"original_exact_match", "original_f1", "original_null_score_diff_threshold"} <= set(metrics)
    assert metrics["original_null_score_diff_threshold"] == metrics["oracle_best_f1_thresh"]
    assert metrics["null_score_diff_threshold"] == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_random_predictions_score_as_the_official_script_scores_them(seed):
    rng = random.Random(seed)
    texts = ["the", "a", "An.", "Paris", "red dog", "dog", "1990", "in 1990"]
    questions, best_answers, null_odds = [], {}, {}
    for index in range(40):
        answers = [] if rng.random() < 0.3 else rng.sample(texts, rng.randint(1, 2))
        questions.append((f"q{index}", "the red dog in Paris in 1990", answers))
        best_answers[f"q{index}"] = rng.choice(texts)
        null_odds[f"q{index}"] = round(rng.uniform(-2.0, 2.0), 1)
    threshold = rng.choice([-1.0, 0.0, 0.5])
    metrics = v2_metrics(_gold(questions), best_answers, null_odds, threshold)
    official = _official_on_written(questions, best_answers, null_odds, threshold)
    assert {name: metrics[{"exact": "exact_match"}.get(name, name)] for name in official} == pytest.approx(official)


@pytest.mark.slow
def test_eval_results_json_is_what_the_official_script_gives_on_predictions_json(tmp_path, squad_assets):
    directory, spm_model, config_file = squad_assets
    questions = [(f"q{index}", f"the river stone {colour} cloud lamp.",
                  ["the"] if index % 3 == 0 else [] if index % 3 == 1 else [colour])
                 for index, colour in enumerate(["Coral", "Violet", "Amber", "Olive"] * 3)]
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps({"version": "v2.0", "data": squad_dataset(questions)}))
    output_dir = tmp_path / "run"
    # A threshold below every null odds answers nothing, so the "the" questions are scored on "".
    results = run_squad(SquadOptions(
        FinetuningOptions(output_dir=str(output_dir), albert_config_file=config_file, spm_model_file=spm_model,
                          max_seq_length=48, do_eval=True, do_predict=True, eval_batch_size=8,
                          predict_batch_size=8, jit_compile=False),
        predict_file=str(dev), version_2_with_negative=True, doc_stride=16, max_query_length=8, n_best_size=5,
        max_answer_length=8, start_n_top=3, end_n_top=3, null_score_diff_threshold=-1e9))
    predictions = json.loads((output_dir / "predictions.json").read_text())
    assert set(predictions.values()) == {""}
    official = official_squad_v2_eval(squad_dataset(questions), predictions)
    assert official["exact"] == pytest.approx(200.0 / 3)  # the "the" and no-answer questions
    for name, value in official.items():
        assert results["eval"][{"exact": "exact_match"}.get(name, name)] == pytest.approx(value), name
    assert json.loads((output_dir / "predict_results.json").read_text())["f1"] == pytest.approx(official["f1"])
