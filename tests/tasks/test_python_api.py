"""Every task runs from Python, with no absl flags: GLUE, SQuAD, RACE, NER, pretraining and the demo, each on tiny
generated data in the real formats for a few steps, returning its results and writing its files."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.glue import GlueOptions, resolve_options, run_glue
from albert_tf.tasks.ner import NerOptions, run_ner
from albert_tf.tasks.pretraining import PretrainingOptions, run_pretraining
from albert_tf.tasks.quickstart import QuickstartOptions, run_quickstart, summary_text
from albert_tf.tasks.race import RaceOptions, run_race
from albert_tf.tasks.squad import SquadOptions, run_squad
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from tests.helpers import make_spm_model, write_corpus, write_pretraining_records
from tests.tasks.task_data import (GLUE_TINY_CONFIG, squad_data_files, write_keyword_conll, write_keyword_mrpc,
                                   write_keyword_race, write_labeled_text)

pytestmark = pytest.mark.slow

STEPS = 4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """(config file, SentencePiece model) of the GLUE and RACE runs."""
    directory = tmp_path_factory.mktemp("tiny_model")
    config_file = directory / "albert_config.json"
    config_file.write_text(json.dumps(GLUE_TINY_CONFIG))
    return str(config_file), make_spm_model(str(directory))


def _finetuning(output_dir, config_file, spm_model, **changes):
    values = dict(output_dir=str(output_dir), albert_config_file=config_file, spm_model_file=spm_model,
                  cached_dir=str(output_dir / "cache"), max_seq_length=32, do_train=True, do_eval=True,
                  do_predict=True, train_step=STEPS, warmup_step=1, learning_rate=1e-3, train_batch_size=8,
                  eval_batch_size=16, predict_batch_size=16, save_checkpoints_steps=STEPS, steps_per_loop=2,
                  jit_compile=False)
    values.update(changes)
    return FinetuningOptions(**values)


def _lines(path):
    return path.read_text().splitlines()


def test_glue_from_python(tmp_path, tiny_model):
    write_keyword_mrpc(tmp_path / "glue", sizes=(("train", 32), ("dev", 12), ("test", 5)))
    output_dir = tmp_path / "run"
    results = run_glue(GlueOptions(_finetuning(output_dir, *tiny_model), task_name="MRPC",
                                   data_dir=str(tmp_path / "glue")))
    assert results["train"]["step"] == STEPS and np.isfinite(results["train"]["loss"])
    assert set(results["eval"]) == {"accuracy", "f1", "loss", "global_step"}
    assert results["eval"]["global_step"] == STEPS
    assert results["best"]["checkpoint"] == str(output_dir / "best" / "ckpt-best")
    assert json.loads((output_dir / "eval_results.json").read_text()) == results["eval"]
    assert "eval_accuracy = " in (output_dir / "eval_results.txt").read_text()
    assert len(_lines(output_dir / "eval_predictions.tsv")) == 1 + 12
    assert _lines(output_dir / "MRPC.tsv")[0] == "index\tprediction" and len(_lines(output_dir / "MRPC.tsv")) == 1 + 5
    assert np.loadtxt(output_dir / "test_results.tsv", delimiter="\t").shape == (5, 2)
    assert len(list((output_dir / "cache").iterdir())) == 6  # train, dev and test features, each with metadata


def test_glue_paper_hparams_yield_to_the_explicit_options(tmp_path, tiny_model):
    options = GlueOptions(_finetuning(tmp_path, *tiny_model, do_train=False, do_eval=False, learning_rate=1e-4),
                          task_name="ax", data_dir=str(tmp_path), use_paper_hparams=True)
    with pytest.raises(ValueError, match="run_glue.sh has no hyperparameters for 'ax'"):
        run_glue(options)
    mrpc = GlueOptions(options.finetuning, task_name="mrpc", use_tfds=True, use_paper_hparams=True,
                       explicit_options=["learning_rate"])
    resolved = resolve_options(mrpc)
    assert (resolved.learning_rate, resolved.train_step, resolved.warmup_step) == (1e-4, 800, 200)
    assert resolved.eval_every_checkpoint and resolved.save_checkpoints_steps == 100
    with pytest.raises(ValueError, match=r"Give --data_dir \(the GLUE data directory\) or --tfds."):
        run_glue(GlueOptions(options.finetuning, task_name="mrpc"))


def test_squad_v2_from_python(tmp_path, squad_assets):
    directory, spm_model, config_file = squad_assets
    train, dev, search = squad_data_files(directory, version_2=True)
    output_dir = tmp_path / "run"
    results = run_squad(SquadOptions(
        _finetuning(output_dir, config_file, spm_model, max_seq_length=48, num_train_epochs=None),
        train_file=train, predict_file=dev, version_2_with_negative=True, doc_stride=16, max_query_length=8,
        n_best_size=5, max_answer_length=8, start_n_top=3, end_n_top=3, null_threshold_search_file=search))
    assert results["eval"]["global_step"] == STEPS
    assert results["eval"]["total"] == 48 and 0.0 <= results["eval"]["f1"] <= 100.0
    assert results["eval"]["null_score_diff_threshold"] == results["eval"]["best_f1_thresh_threshold_search"]
    predictions = json.loads((output_dir / "predictions.json").read_text())
    null_odds = json.loads((output_dir / "null_odds.json").read_text())
    assert len(predictions) == len(null_odds) == 48
    assert (output_dir / "nbest_predictions.json").exists()
    assert "f1" in json.loads((output_dir / "predict_results.json").read_text())


def test_race_from_python(tmp_path, tiny_model):
    write_keyword_race(tmp_path / "data", sizes=(("train", 8), ("dev", 4), ("test", 4)))
    output_dir = tmp_path / "run"
    results = run_race(RaceOptions(_finetuning(output_dir, *tiny_model, max_seq_length=40),
                                   data_dir=str(tmp_path / "data"), max_qa_length=16))
    assert set(results["eval"]) == {"accuracy", "accuracy_middle", "accuracy_high", "loss", "global_step"}
    assert results["eval"]["global_step"] == STEPS
    rows = _lines(output_dir / "test_predictions.tsv")
    assert rows[0] == "id\tlevel\tprediction\tlabel" and len(rows) == 1 + 8
    test_results = json.loads((output_dir / "predict_results.json").read_text())
    assert test_results["eval_accuracy"] == test_results["accuracy"]
    assert (output_dir / "predict_results.txt").exists() and (output_dir / "eval_predictions.tsv").exists()


def test_ner_from_python_and_an_evaluation_rerun_that_keeps_its_labels(tmp_path, tiny_model):
    write_keyword_conll(tmp_path / "data", tag_scheme="iob2", sizes=(("train", 16), ("dev", 6), ("test", 5)))
    output_dir = tmp_path / "run"
    results = run_ner(NerOptions(_finetuning(output_dir, *tiny_model, max_seq_length=16,
                                             export_dir=str(tmp_path / "export")),
                                 data_dir=str(tmp_path / "data"), tag_scheme="iob2"))
    assert set(results["eval"]) == {"precision", "recall", "f1", "accuracy", "loss", "global_step"}
    assert results["eval"]["global_step"] == STEPS
    assert len([row for row in _lines(output_dir / "eval_predictions.txt") if not row]) == 6
    assert len([row for row in _lines(output_dir / "test_predictions.txt") if not row]) == 5
    assert set(json.loads((output_dir / "predict_results.json").read_text())) == {"precision", "recall", "f1",
                                                                                  "accuracy", "loss"}
    serving = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    ids = tf.constant([[2, 9, 9, 3] + [0] * 12])
    served = serving(input_word_ids=ids, input_mask=tf.cast(ids > 0, tf.int32), input_type_ids=tf.zeros_like(ids))
    assert served["logits"].shape == (1, 16, 5) and served["probabilities"].shape == (1, 16, 5)
    # labels.txt keeps the head's labels when the dev data (here without any LOC) would give others.
    (tmp_path / "data" / "dev.txt").write_text("lamb NN I-NP B-PER\nthe NN I-NP O\n")
    again = run_ner(NerOptions(_finetuning(output_dir, *tiny_model, max_seq_length=16, do_train=False,
                                           do_predict=False, init_checkpoint=str(output_dir / "best")),
                               data_dir=str(tmp_path / "data"), tag_scheme="iob2"))
    assert again["eval"]["global_step"] == STEPS
    assert _lines(output_dir / "labels.txt") == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def test_own_multi_label_data_from_python_and_a_prediction_rerun(tmp_path, tiny_model):
    for split, count in (("train", 16), ("dev", 6), ("test", 5)):
        write_labeled_text(tmp_path / f"{split}.jsonl", "multi_label", count, seed=len(split))
    output_dir = tmp_path / "run"
    files = dict(train_file=str(tmp_path / "train.jsonl"), eval_file=str(tmp_path / "dev.jsonl"),
                 predict_file=str(tmp_path / "test.jsonl"))
    results = run_text_classification(TextClassificationOptions(
        _finetuning(output_dir, *tiny_model), text_field="text", label_field="topic", multi_label=True, **files))
    assert set(results["eval"]) == {"micro_f1", "macro_f1", "exact_match", "f1_lamb", "f1_prediction", "loss",
                                    "global_step"}
    assert results["eval"]["global_step"] == STEPS
    assert len(_lines(output_dir / "eval_predictions.tsv")) == 1 + 6
    assert np.loadtxt(output_dir / "test_results.tsv").shape == (5, 2)
    # Prediction only, from best/: labels.txt gives the head its labels.
    (output_dir / "predictions.tsv").unlink()
    again = run_text_classification(TextClassificationOptions(
        _finetuning(output_dir, *tiny_model, do_train=False, do_eval=False), text_field="text",
        label_field="topic", multi_label=True, predict_file=files["predict_file"]))
    assert again["prediction_checkpoint"] == str(output_dir / "best" / "ckpt-best")
    assert len(_lines(output_dir / "predictions.tsv")) == 1 + 5


def test_pretraining_from_python(tmp_path):
    records = write_pretraining_records(str(tmp_path / "train.tfrecord"), num_records=32, max_seq_length=16,
                                                 max_predictions=3)
    config = AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=32)
    output_dir = tmp_path / "run"
    results = run_pretraining(config, PretrainingOptions(
        output_dir=str(output_dir), input_file=records, do_train=True, do_eval=True, max_seq_length=16,
        max_predictions_per_seq=3, train_batch_size=8, eval_batch_size=8, num_train_steps=STEPS, num_warmup_steps=1,
        save_checkpoints_steps=STEPS, max_eval_steps=2, jit_compile=False))
    assert results["train"]["step"] == STEPS and np.isfinite(results["train"]["loss"])
    assert results["eval"]["global_step"] == STEPS
    assert json.loads((output_dir / "eval_results.json").read_text()) == results["eval"]
    assert (output_dir / "best" / "ckpt-best.index").exists()
    with pytest.raises(ValueError, match="At least one of --do_train or --do_eval"):
        run_pretraining(config, PretrainingOptions(output_dir=str(output_dir), input_file=records, do_train=False))


def test_demo_from_python(tmp_path):
    train_text = write_corpus(str(tmp_path / "train.txt"), num_documents=60)
    eval_text = write_corpus(str(tmp_path / "eval.txt"), num_documents=10, seed=1)
    summary = run_quickstart(QuickstartOptions(
        output_dir=str(tmp_path / "demo"), input_file=train_text, eval_input_file=eval_text, vocab_size=100,
        max_seq_length=32, dupe_factor=1, num_train_steps=STEPS, train_batch_size=8, num_workers=1,
        jit_compile=False))
    assert summary["eval"]["global_step"] == STEPS
    assert json.loads((tmp_path / "demo" / "demo_results.json").read_text()) == summary
    text = summary_text(summary)
    assert f"ALBERT demo finished in {summary['seconds']} s" in text
    # The SOP baseline is the held-out instances' majority label, as create_pretraining_data counted them.
    totals = json.loads((tmp_path / "demo" / "data" / "eval.tfrecord.summary.json").read_text())["totals"]
    labels = [totals["next_sentence_label_0"], totals["next_sentence_label_1"]]
    order_baseline = summary["sentence_order_majority_baseline"]
    assert order_baseline == {"label": int(labels[1] > labels[0]), "accuracy": pytest.approx(max(labels) / sum(labels))}
    assert (f"| sentence_order_accuracy | {summary['eval']['sentence_order_accuracy']:.3f} | "
            f"{order_baseline['accuracy']:.3f} (always ") in text
    with pytest.raises(ValueError, match="--input_file needs --eval_input_file"):
        run_quickstart(QuickstartOptions(output_dir=str(tmp_path / "other"), input_file=train_text))
