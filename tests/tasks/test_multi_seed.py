"""albert_tf.tasks.multi_seed: the statistics of a multi-seed run, its layout and resumption on the driver's toy task,
and run_glue --num_trials end to end."""
import dataclasses
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks import finetuning, multi_seed
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.ner import NerOptions, run_ner
from albert_tf.tasks.race import RaceOptions, run_race
from albert_tf.tasks.squad import SquadOptions, run_squad
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from tests.helpers import run_script
from tests.tasks.task_data import (GLUE_TINY_CONFIG, squad_json, write_keyword_conll, write_keyword_mrpc,
                                   write_keyword_race, write_labeled_text)
from tests.tasks.toy_task import toy_examples, toy_options, toy_task


def _record(trial, seed, **metrics):
    return {"trial": trial, "seed": seed, "metrics": metrics}


def test_statistics_cover_every_numeric_metric_and_the_best_trial_has_the_highest_task_metric():
    records = [_record(0, 10, accuracy=0.50, loss=0.9, global_step=100, source="a"),
               _record(1, 11, accuracy=0.75, loss=0.4, global_step=100, source="b"),
               _record(2, 12, accuracy=0.75, loss=0.5, global_step=200, source="c"),
               _record(3, 13, accuracy=0.60, loss=0.6, global_step=100, source="d")]
    summary = multi_seed.aggregate_trials(records, "accuracy")
    assert set(summary) == {"num_trials", "best_metric", "best_trial", "trials", "median", "mean", "std"}
    assert summary["num_trials"] == 4 and summary["best_metric"] == "accuracy"
    # The first of equal best values wins.
    assert summary["best_trial"] == 1
    assert summary["trials"] == records
    # Strings are not metrics; integers (global_step) are.
    assert set(summary["median"]) == set(summary["mean"]) == set(summary["std"]) == {"accuracy", "loss",
                                                                                     "global_step"}
    # An even count's median is the mean of the middle two.
    assert summary["median"] == pytest.approx({"accuracy": 0.675, "loss": 0.55, "global_step": 100.0})
    assert summary["mean"] == pytest.approx({"accuracy": 0.65, "loss": 0.6, "global_step": 125.0})
    # The sample standard deviation: sum of squared deviations over n - 1.
    accuracy_deviations = np.array([0.50, 0.75, 0.75, 0.60]) - 0.65
    assert summary["std"]["accuracy"] == pytest.approx(math.sqrt(np.sum(accuracy_deviations ** 2) / 3))
    assert summary["std"]["global_step"] == pytest.approx(50.0)


def test_a_nan_never_wins_and_bad_inputs_are_named():
    summary = multi_seed.aggregate_trials([_record(0, 1, f1=float("nan")), _record(1, 2, f1=0.1)], "f1")
    assert summary["best_trial"] == 1 and math.isnan(summary["median"]["f1"])
    with pytest.raises(ValueError, match="at least two"):
        multi_seed.aggregate_trials([_record(0, 1, f1=0.5)], "f1")
    with pytest.raises(ValueError, match="Trial 1 reports no 'f1'"):
        multi_seed.aggregate_trials([_record(0, 1, f1=0.5), _record(1, 2, accuracy=0.5)], "f1")
    # A metric that one trial lacks has no statistics rather than ones over fewer trials.
    assert "mcc" not in multi_seed.aggregate_trials([_record(0, 1, f1=0.5, mcc=0.1), _record(1, 2, f1=0.6)],
                                                "f1")["median"]


def test_num_trials_is_refused_where_trials_could_not_differ_or_be_compared():
    with pytest.raises(ValueError, match="--num_trials must be a positive integer, got 0"):
        FinetuningOptions("/tmp/x", num_trials=0)
    with pytest.raises(ValueError, match="--num_trials=3 needs --do_train and --do_eval"):
        FinetuningOptions("/tmp/x", num_trials=3, do_train=True)


def _trial_results_mtimes(run):
    return {name: os.stat(run / name / multi_seed.TRIAL_RESULTS_NAME).st_mtime_ns
            for name in sorted(os.listdir(run)) if name.startswith(multi_seed.TRIAL_DIR_PREFIX)}


def _trial_options(output_dir, **changes):
    """A shorter toy run than the driver's tests need: the trials are compared, not judged."""
    return toy_options(output_dir, do_train=True, do_eval=True, train_step=30, save_checkpoints_steps=10,
                       steps_per_loop=10, **changes)


def test_trials_lay_out_and_keep_the_best_for_predictions_and_the_export(tmp_path):
    written = {}
    run = tmp_path / "run"
    results = multi_seed.run_trials(toy_task(written), _trial_options(
        run, do_predict=True, num_trials=2, seed=7, eval_every_checkpoint=True,
        export_dir=str(tmp_path / "export")))
    summary = json.loads((run / "eval_results.json").read_text())
    assert [(record["trial"], record["seed"]) for record in summary["trials"]] == [(0, 7), (1, 8)]
    accuracies = [record["metrics"]["accuracy"] for record in summary["trials"]]
    assert summary["best_trial"] == int(np.argmax(accuracies)) and summary["best_metric"] == "accuracy"
    assert summary["median"]["accuracy"] == pytest.approx(np.mean(accuracies))
    assert {name: results[name] for name in summary} == summary
    for record in summary["trials"]:
        trial_dir = run / f"trial-{record['trial']}"
        assert json.loads((trial_dir / multi_seed.TRIAL_RESULTS_NAME).read_text()) == record
        # Each trial is an ordinary run of the driver; its metrics are those of its best checkpoint.
        best_results = json.loads((trial_dir / "best" / "eval_results.json").read_text())
        assert record["metrics"] == {name: value for name, value in best_results.items()
                                     if name != "source_checkpoint"}
        assert tf.train.latest_checkpoint(str(trial_dir)) == str(trial_dir / "ckpt-30")
    text = (run / "eval_results.txt").read_text()
    assert f"best_trial = {summary['best_trial']}\n" in text and "std_accuracy = " in text

    # best/ is the best trial's best/, and predictions and the export come from it, into the run's own places.
    best_trial = run / f"trial-{summary['best_trial']}"
    assert (run / "best" / "eval_results.json").read_text() == (best_trial / "best" / "eval_results.json").read_text()
    assert (run / "albert_config.json").read_text() == (best_trial / "albert_config.json").read_text()
    assert results["best"]["checkpoint"] == results["prediction_checkpoint"] == str(run / "best" / "ckpt-best")
    test = toy_examples(23, 3)
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    outputs = served(**{name: tf.constant(test[name]) for name in ("input_word_ids", "input_mask", "input_type_ids")})
    np.testing.assert_allclose(outputs["logits"].numpy(), written["test"]["logits"], atol=1e-5)


@pytest.mark.slow
def test_trials_are_the_lone_runs_of_their_seeds_resume_and_add_trials(tmp_path):
    run = tmp_path / "run"
    summary = multi_seed.run_trials(toy_task({}), _trial_options(run, num_trials=2, seed=7, eval_every_checkpoint=True))

    # Trial k is the run that seed + k gives alone.
    alone = finetuning.run_finetuning(toy_task({}), _trial_options(tmp_path / "alone", seed=8,
                                                                   eval_every_checkpoint=True))
    assert {name: value for name, value in alone["best"].items() if name != "checkpoint"} == \
        summary["trials"][1]["metrics"]

    # A rerun with more trials keeps the finished ones and adds the missing one.
    finished = _trial_results_mtimes(run)
    more = multi_seed.run_trials(toy_task({}), _trial_options(run, num_trials=3, seed=7))
    assert {name: mtime for name, mtime in _trial_results_mtimes(run).items() if name in finished} == finished
    assert sorted(_trial_results_mtimes(run)) == ["trial-0", "trial-1", "trial-2"]
    assert more["trials"][:2] == summary["trials"] and more["trials"][2]["seed"] == 9
    assert "prediction_checkpoint" not in more

    # A trial stopped after its checkpoint at step 20 (no ckpt-30, no trial_results.json) resumes from it.
    stopped = run / "trial-2"
    for path in [stopped / multi_seed.TRIAL_RESULTS_NAME, *stopped.glob("ckpt-30.*")]:
        path.unlink()
    (stopped / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                        'all_model_checkpoint_paths: "ckpt-10"\n'
                                        'all_model_checkpoint_paths: "ckpt-20"\n')
    kept_checkpoint = os.stat(stopped / "ckpt-20.index").st_mtime_ns
    resumed = multi_seed.run_trials(toy_task({}), _trial_options(run, num_trials=3, seed=7))
    assert os.stat(stopped / "ckpt-20.index").st_mtime_ns == kept_checkpoint
    assert tf.train.latest_checkpoint(str(stopped)) == str(stopped / "ckpt-30")
    # The driver skips the batches already trained on, so the resumed trial ends where the straight one did.
    assert resumed["trials"][2]["metrics"] == pytest.approx(more["trials"][2]["metrics"], abs=1e-6)
    assert resumed["trials"][:2] == more["trials"][:2]

    with pytest.raises(ValueError, match="records seed 7, but --seed=100 gives trial-0 seed 100"):
        multi_seed.run_trials(toy_task({}), _trial_options(run, num_trials=2, seed=100))
    other_task = dataclasses.replace(toy_task({}), name="other")
    with pytest.raises(ValueError, match="holds a trial of task 'toy', not of 'other'"):
        multi_seed.run_trials(other_task, _trial_options(run, num_trials=2, seed=7))


def test_one_trial_is_the_single_run(tmp_path):
    results = multi_seed.run_trials(toy_task({}), toy_options(tmp_path, do_train=True, do_eval=True))
    assert set(results) == {"train", "eval", "best"}
    assert not any(name.startswith(multi_seed.TRIAL_DIR_PREFIX) for name in os.listdir(tmp_path))
    assert json.loads((tmp_path / "eval_results.json").read_text()) == results["eval"]


def test_squad_race_ner_and_own_files_run_their_tasks_through_the_trials(tmp_path, tokenizer, monkeypatch):
    started = []
    monkeypatch.setattr(multi_seed, "run_trials", lambda task, options, source: started.append(
        (task.name, options.num_trials, source.tokenizer.spm_model_file)) or {})
    def options(name):
        return FinetuningOptions(str(tmp_path / name), preset="albert-base", spm_model_file=tokenizer.spm_model_file,
                                 max_seq_length=32, do_train=True, do_eval=True, num_trials=2)

    squad_file = str(squad_json(tmp_path / "squad.json", 2, 0.0, seed=0))
    run_squad(SquadOptions(options("squad_run"), train_file=squad_file, predict_file=squad_file, doc_stride=8,
                           max_query_length=8))
    write_keyword_race(tmp_path / "race", sizes=(("train", 2), ("dev", 2)))
    run_race(RaceOptions(options("race_run"), data_dir=str(tmp_path / "race"), max_qa_length=8))
    write_keyword_conll(tmp_path / "conll", sizes=(("train", 2), ("valid", 2)))
    run_ner(NerOptions(options("ner_run"), data_dir=str(tmp_path / "conll")))
    own_file = str(write_labeled_text(tmp_path / "own.tsv", "single_label", 4))
    run_text_classification(TextClassificationOptions(options("own_run"), text_field="text", label_field="topic",
                                                      train_file=own_file, eval_file=own_file))
    assert started == [(name, 2, tokenizer.spm_model_file)
                       for name in ("squad_v1", "race", "ner", "text_classification (single_label)")]


@pytest.mark.slow
def test_run_glue_num_trials_end_to_end_and_rerun_keeps_finished_trials(tmp_path, tokenizer):
    write_keyword_mrpc(tmp_path / "glue", sizes=(("train", 32), ("dev", 12), ("test", 5)))
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(GLUE_TINY_CONFIG))
    run = tmp_path / "run"
    flags = [f"--data_dir={tmp_path / 'glue'}", "--task_name=MRPC", f"--albert_config_file={config_file}",
             f"--spm_model_file={tokenizer.spm_model_file}", f"--output_dir={run}", "--max_seq_length=32",
             "--do_train", "--do_eval", "--do_predict", "--train_step=4", "--warmup_step=1", "--learning_rate=1e-3",
             "--train_batch_size=8", "--eval_batch_size=16", "--predict_batch_size=16", "--save_checkpoints_steps=4",
             "--steps_per_loop=2", "--nojit_compile", "--num_trials=2", "--seed=3"]
    first = run_script("run_glue", *flags, CUDA_VISIBLE_DEVICES="")
    assert first.returncode == 0, first.stderr[-4000:]
    assert "trial-0 (1 of 2, seed 3) in" in first.stderr and "trial-1 (2 of 2, seed 4) in" in first.stderr
    summary = json.loads((run / "eval_results.json").read_text())
    assert [record["seed"] for record in summary["trials"]] == [3, 4]
    assert set(summary["median"]) >= {"accuracy", "f1", "loss"} and summary["best_metric"] == "accuracy"
    assert (run / "best" / "ckpt-best.index").exists()
    assert [row.split("\t")[0] for row in (run / "MRPC.tsv").read_text().splitlines()] == \
        ["index"] + [str(100 + index) for index in range(5)]
    assert not (run / "trial-0" / "MRPC.tsv").exists()

    finished = _trial_results_mtimes(run)
    again = run_script("run_glue", *flags, CUDA_VISIBLE_DEVICES="")
    assert again.returncode == 0, again.stderr[-4000:]
    assert "trial-0 (1 of 2, seed 3) finished earlier: keeping it" in again.stderr
    assert "trial-1 (2 of 2, seed 4) finished earlier: keeping it" in again.stderr
    assert _trial_results_mtimes(run) == finished
    assert json.loads((run / "eval_results.json").read_text()) == summary
