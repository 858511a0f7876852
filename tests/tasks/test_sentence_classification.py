"""Fine-tuning on sentence classification files (albert_tf/tasks/sentence_classification.py) from Python."""
import json

import numpy as np
import pytest

from albert_tf.tasks.finetuning import FinetuningOptions
from albert_tf.tasks.sentence_classification import SentenceClassificationOptions, run_sentence_classification
from tests.tasks.task_data import GLUE_TINY_CONFIG

STEPS = 4
KEYWORDS = ("lamb", "block", "shared")


def _write_split(path, count, labels=KEYWORDS):
    rows = ["sentence\tlabel"]
    for index in range(count):
        label = labels[index % len(labels)]
        rows.append(f"the model learns {label} weights at depth {index}\t{label}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _options(tmp_path, spm_model_file, **changes):
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(GLUE_TINY_CONFIG))
    values = dict(output_dir=str(tmp_path / "run"), albert_config_file=str(config_file),
                  spm_model_file=spm_model_file, max_seq_length=32, do_train=True, do_eval=True, train_step=STEPS,
                  warmup_step=1, learning_rate=1e-3, train_batch_size=8, eval_batch_size=16,
                  save_checkpoints_steps=STEPS, steps_per_loop=STEPS, jit_compile=False)
    values.update(changes)
    return SentenceClassificationOptions(FinetuningOptions(**values), data_dir=str(tmp_path / "data"))


@pytest.mark.slow
def test_fine_tunes_evaluates_and_writes_the_labels_and_predictions(tmp_path, spm_model_file):
    (tmp_path / "data").mkdir()
    _write_split(tmp_path / "data" / "train.tsv", 24)
    _write_split(tmp_path / "data" / "dev.tsv", 9)
    results = run_sentence_classification(_options(tmp_path, spm_model_file))
    assert results["train"]["step"] == STEPS and np.isfinite(results["train"]["loss"])
    assert set(results["eval"]) == {"accuracy", "loss", "global_step"} and results["eval"]["global_step"] == STEPS
    run = tmp_path / "run"
    assert (run / "labels.txt").read_text().split() == list(KEYWORDS)
    predictions = (run / "eval_predictions.tsv").read_text().splitlines()
    assert predictions[0] == "index\tprediction\tlabel" and len(predictions) == 10
    assert [row.split("\t")[2] for row in predictions[1:4]] == list(KEYWORDS)
    assert "eval_accuracy = " in (run / "eval_results.txt").read_text()
    # A rerun resumes: the finished checkpoint is kept and evaluated again, not retrained.
    again = run_sentence_classification(_options(tmp_path, spm_model_file))
    assert again["eval"] == results["eval"] and again["train"]["step"] == STEPS

    _write_split(tmp_path / "data" / "dev.tsv", 4, labels=("lamb", "weights"))
    with pytest.raises(ValueError, match=r"dev.tsv: labels \['weights'\] are not among the training file's labels"):
        run_sentence_classification(_options(tmp_path, spm_model_file, output_dir=str(tmp_path / "other")))
    with pytest.raises(ValueError, match="has no test split to predict; leave out do_predict"):
        run_sentence_classification(_options(tmp_path, spm_model_file, do_predict=True))
