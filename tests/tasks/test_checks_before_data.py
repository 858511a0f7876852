"""A fine-tuning run that cannot go ahead is refused before its task reads or writes data: the options, the config,
the tokenizer and the weights are checked first (tasks/finetuning_options.py, tasks/model_source.py), so a refused
run leaves no feature cache and nothing in --output_dir."""
import os

import pytest

from albert_tf.tasks import multi_seed
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.glue import GlueOptions, run_glue
from albert_tf.tasks.ner import NerOptions, run_ner
from albert_tf.tasks.race import RaceOptions, run_race
from albert_tf.tasks.squad import SquadOptions, run_squad
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from tests.tasks.task_data import (squad_json, write_keyword_conll, write_keyword_mrpc, write_keyword_race,
                                   write_labeled_text)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Every task's files, two examples a split, and a config file that is not JSON."""
    directory = tmp_path_factory.mktemp("data")
    write_keyword_mrpc(directory / "glue", sizes=(("train", 2), ("dev", 2)))
    write_keyword_race(directory / "race", sizes=(("train", 2), ("dev", 2)))
    write_keyword_conll(directory / "conll", sizes=(("train", 2), ("valid", 2)))
    squad_json(directory / "squad.json", 2, 0.0, seed=0)
    write_labeled_text(directory / "own.tsv", "single_label", 4)
    (directory / "broken_config.json").write_text("{not json")
    return directory


def _finetuning_options(tmp_path, tokenizer, **changes):
    values = dict(output_dir=str(tmp_path / "run"), cached_dir=str(tmp_path / "cache"), preset="albert-base",
                  spm_model_file=tokenizer.spm_model_file, max_seq_length=32, do_train=True, do_eval=True,
                  train_step=2)
    values.update(changes)
    return FinetuningOptions(**values)


def _run_task(name, data, options):
    if name == "glue":
        return run_glue(GlueOptions(options, task_name="MRPC", data_dir=str(data / "glue")))
    if name == "race":
        return run_race(RaceOptions(options, data_dir=str(data / "race"), max_qa_length=8))
    if name == "squad":
        squad_file = str(data / "squad.json")
        return run_squad(SquadOptions(options, train_file=squad_file, predict_file=squad_file, doc_stride=8,
                                      max_query_length=8))
    if name == "ner":
        return run_ner(NerOptions(options, data_dir=str(data / "conll")))
    return run_text_classification(TextClassificationOptions(
        options, text_field="text", label_field="topic", train_file=str(data / "own.tsv"),
        eval_file=str(data / "own.tsv")))


def _written(tmp_path):
    """Every directory and file the run made under the test's own directory (the data lives elsewhere)."""
    return sorted(os.path.relpath(os.path.join(directory, name), tmp_path)
                  for directory, subdirectories, files in os.walk(tmp_path) for name in subdirectories + files)


TASKS = ("glue", "race", "squad", "ner", "text_classification")


@pytest.mark.parametrize("task", TASKS)
def test_the_same_run_with_good_options_writes_its_feature_cache(task, data, tmp_path, tokenizer, monkeypatch):
    """The control: the tasks below would have written their caches had the checks come after the data."""
    monkeypatch.setattr(multi_seed, "run_trials", lambda task, options, source: {})
    _run_task(task, data, _finetuning_options(tmp_path, tokenizer))
    assert any(path.startswith("cache") for path in _written(tmp_path))


@pytest.mark.parametrize("task", TASKS)
def test_a_sequence_longer_than_the_models_positions_is_refused_before_any_task_writes(task, data, tmp_path,
                                                                                       tokenizer):
    options = _finetuning_options(tmp_path, tokenizer, max_seq_length=1024)
    with pytest.raises(ValueError, match="--max_seq_length=1024 exceeds the model's max_position_embeddings=512"):
        _run_task(task, data, options)
    assert _written(tmp_path) == []


BAD_INPUTS = {
    "no config": (dict(preset=None), ValueError, "Give --albert_config_file or --preset to define the model."),
    "a config file that is not JSON": (dict(preset=None, albert_config_file="{data}/broken_config.json"),
                                       ValueError, "broken_config.json is not valid JSON"),
    "a config file that is not there": (dict(preset=None, albert_config_file="{data}/no_config.json"),
                                        FileNotFoundError, "no_config.json does not exist"),
    "no tokenizer": (dict(spm_model_file=None), ValueError, r"Give --spm_model_file \(or --vocab_file\)"),
    "a checkpoint that is not there": (dict(init_checkpoint="{data}/no_checkpoint"), ValueError,
                                       "no_checkpoint is not a TF1 checkpoint"),
    "a hub module that is not there": (dict(hub_module_handle="{data}/glue"), ValueError,
                                       "holds no saved_model.pb"),
    "nothing to do": (dict(do_train=False, do_eval=False), ValueError, "Nothing to do"),
    "a batch size of 0": (dict(eval_batch_size=0), ValueError, "--eval_batch_size must be a positive integer"),
    "steps and epochs": (dict(num_train_epochs=2.0), ValueError, "Give train_step .* or num_train_epochs .*, not "
                                                                  "both"),
    "a warmup proportion above 1": (dict(train_step=None, num_train_epochs=1.0, warmup_proportion=2.0), ValueError,
                                    r"warmup_proportion must be in \[0, 1\], got 2.0"),
    "an unknown optimizer": (dict(optimizer="sgd"), ValueError, "Unknown --optimizer='sgd'"),
    "an unknown precision policy": (dict(mixed_precision="float16"), ValueError,
                                    "Unknown --mixed_precision='float16'"),
    "an unknown strategy": (dict(strategy="gpu"), ValueError, "Unknown --strategy='gpu'"),
    "a dropout of 1": (dict(dropout_prob=1.0), ValueError, r"--dropout_prob must be in \[0, 1\), got 1.0"),
    "preprocessing without an export": (dict(with_preprocessing=True), ValueError,
                                        "--with_preprocessing puts the preprocessor in the --export_dir model"),
    "preprocessing for a WordPiece vocabulary": (dict(with_preprocessing=True, export_dir="{data}/export",
                                                      spm_model_file=None, vocab_file="{data}/vocab.txt"),
                                                 ValueError, "--with_preprocessing builds its preprocessor from a "
                                                             "SentencePiece model"),
}


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_a_bad_input_is_refused_before_the_task_reads_or_writes_its_data(kind, data, tmp_path, tokenizer):
    changes, error, message = BAD_INPUTS[kind]
    changes = {name: value.format(data=data) if isinstance(value, str) else value for name, value in changes.items()}
    with pytest.raises(error, match=message):
        _run_task("glue", data, _finetuning_options(tmp_path, tokenizer, **changes))
    assert _written(tmp_path) == []


@pytest.mark.parametrize("task", ("race", "squad", "ner"))
def test_a_raw_text_export_of_a_model_that_is_no_classifier_is_refused_before_any_task_writes(task, data, tmp_path,
                                                                                              tokenizer):
    options = _finetuning_options(tmp_path, tokenizer, with_preprocessing=True, export_dir=str(tmp_path / "export"))
    with pytest.raises(ValueError, match="--with_preprocessing exports a classifier of raw text, which run_glue and "
                                         "run_classifier fine-tune"):
        _run_task(task, data, options)
    assert _written(tmp_path) == []
