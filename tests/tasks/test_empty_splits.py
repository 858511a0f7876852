"""A predict split without examples, from Python: GLUE and SQuAD write their prediction files without rows (a valid
submission, and what the official SQuAD evaluation reads), RACE and a scored SQuAD file stop before training with one
sentence naming the data."""
import json
import logging

import pytest

from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.glue import GlueOptions, run_glue
from albert_tf.tasks.race import RaceOptions, run_race
from albert_tf.tasks.squad import SquadOptions, run_squad
from data_gen.readers import race
from tests.tasks.task_data import GLUE_TINY_CONFIG, squad_data_files, write_keyword_mrpc, write_keyword_race

STEPS = 2


def _options(output_dir, config_file, spm_model, **changes):
    values = dict(output_dir=str(output_dir), albert_config_file=str(config_file), spm_model_file=spm_model,
                  cached_dir=str(output_dir / "cache"), max_seq_length=32, train_step=STEPS, warmup_step=1,
                  learning_rate=1e-3, train_batch_size=8, eval_batch_size=8, predict_batch_size=8,
                  save_checkpoints_steps=STEPS, steps_per_loop=1, jit_compile=False)
    values.update(changes)
    return FinetuningOptions(**values)


@pytest.fixture
def glue_config(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(GLUE_TINY_CONFIG))
    return path


@pytest.mark.slow
def test_glue_test_split_with_only_its_header_writes_empty_prediction_files(tmp_path, glue_config, spm_model_file,
                                                                            caplog):
    write_keyword_mrpc(tmp_path / "glue", sizes=(("train", 16), ("dev", 8), ("test", 0)))
    output_dir = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        results = run_glue(GlueOptions(_options(output_dir, glue_config, spm_model_file, do_train=True,
                                                do_eval=True, do_predict=True),
                                       task_name="MRPC", data_dir=str(tmp_path / "glue")))
    assert results["eval"]["global_step"] == STEPS
    assert (output_dir / "MRPC.tsv").read_text() == "index\tprediction\n"
    assert (output_dir / "test_results.tsv").read_text() == ""  # the original's file has no header
    assert "The test split holds no examples" in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("version_2", [False, True])
def test_squad_predict_file_without_questions_writes_empty_official_files(tmp_path, squad_assets, version_2):
    directory, spm_model, config_file = squad_assets
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"version": "v2.0", "data": [{"title": "none", "paragraphs": []}]}))
    output_dir = tmp_path / "run"
    run_squad(SquadOptions(_options(output_dir, config_file, spm_model, max_seq_length=48, do_predict=True),
                           predict_file=str(empty), version_2_with_negative=version_2, doc_stride=16,
                           max_query_length=8, n_best_size=5, max_answer_length=8, start_n_top=3, end_n_top=3))
    for name in ("predictions.json", "nbest_predictions.json") + (("null_odds.json",) if version_2 else ()):
        assert json.loads((output_dir / name).read_text()) == {}, name
    assert not (output_dir / "predict_results.json").exists()  # no question to score

    train = squad_data_files(directory, version_2)[0]
    with pytest.raises(ValueError, match=rf"^{empty} holds no questions; --do_eval scores it, so it needs at least "
                                         r"one\.$"):
        run_squad(SquadOptions(_options(tmp_path / "eval", config_file, spm_model, max_seq_length=48, do_train=True,
                                        do_eval=True),
                               train_file=train, predict_file=str(empty), version_2_with_negative=version_2,
                               doc_stride=16, max_query_length=8))
    assert not list((tmp_path / "eval").glob("ckpt-*"))  # it stopped before training


def test_squad_threshold_search_file_without_questions_stops_before_training(tmp_path, squad_assets):
    directory, spm_model, config_file = squad_assets
    train, dev = squad_data_files(directory, version_2=True)[:2]
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"version": "v2.0", "data": []}))
    with pytest.raises(ValueError, match=rf"^{empty} holds no questions; --null_threshold_search_file scores it"):
        run_squad(SquadOptions(_options(tmp_path / "run", config_file, spm_model, max_seq_length=48, do_train=True,
                                        do_eval=True),
                               train_file=train, predict_file=dev, version_2_with_negative=True, doc_stride=16,
                               max_query_length=8, null_threshold_search_file=str(empty)))
    assert not list((tmp_path / "run").glob("ckpt-*"))


def test_race_test_split_without_questions_stops_before_training(tmp_path, glue_config, spm_model_file):
    data_dir = tmp_path / "data"
    write_keyword_race(data_dir, sizes=(("train", 4), ("dev", 2)))
    for level in race.LEVELS:
        (data_dir / "RACE" / "test" / level).mkdir(parents=True)
        (data_dir / "RACE" / "test" / level / "all.txt").write_text("\n")
    output_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=rf"^The RACE test files under {data_dir} \(middle, high\) hold no "
                                         r"questions; --do_predict needs at least one\.$"):
        run_race(RaceOptions(_options(output_dir, glue_config, spm_model_file, max_seq_length=40, do_train=True,
                                      do_predict=True), data_dir=str(data_dir), max_qa_length=16))
    assert not list(output_dir.glob("ckpt-*"))
