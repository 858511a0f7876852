"""The downstream score (albert_tf/experiments/downstream.py): one tiny arm fine-tuned on the held-out document
classification and on a GLUE copy's SST-2 and MNLI, and a rerun that keeps every finished run."""
import dataclasses
import os
import random

import pytest

from albert_tf.experiments.budgets import SMOKE
from albert_tf.experiments.downstream import (downstream_baselines, downstream_dev_sizes, prepare_classification,
                                              run_downstream)
from albert_tf.experiments.pretraining_data import prepare_pretraining_data
from albert_tf.experiments.reproduce import ReproduceOptions, run_reproduction
from albert_tf.experiments.runner import arm_directory, run_arms
from albert_tf.experiments.sharing import sharing_arms
from tests.helpers import write_corpus

BUDGET = dataclasses.replace(SMOKE, vocab_size=120, num_train_steps=4, max_eval_steps=2, holdout_fraction=0.3,
                             downstream_documents=3, finetune_steps=2, finetune_batch_size=8)
WORDS = "the model learns a shared block of attention and feed forward weights".split()


def _write_glue(directory):
    """SST-2 and MNLI in the GLUE download's layout, a few rows each."""
    rng = random.Random(0)

    def text():
        return " ".join(rng.choice(WORDS) for _ in range(6))

    (directory / "SST-2").mkdir(parents=True)
    for split, count in (("train", 16), ("dev", 6)):
        rows = ["sentence\tlabel"] + [f"{text()}\t{index % 2}" for index in range(count)]
        (directory / "SST-2" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    (directory / "MNLI").mkdir()
    labels = ("contradiction", "entailment", "neutral", "neutral")
    for split, count in (("train", 16), ("dev_matched", 4), ("dev_mismatched", 4)):
        rows = ["\t".join(f"column{column}" for column in range(11))]
        rows += ["\t".join([str(index)] + ["x"] * 7 + [text(), text(), labels[index % 4]]) for index in range(count)]
        (directory / "MNLI" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return str(directory)


@pytest.mark.slow
def test_an_arm_is_fine_tuned_on_every_task_once_and_a_rerun_keeps_the_runs(tmp_path, caplog):
    corpus = write_corpus(str(tmp_path / "corpus.txt"), num_documents=80)
    data = prepare_pretraining_data(str(tmp_path / "data"), BUDGET, corpus_files=[corpus])
    glue_dir = _write_glue(tmp_path / "glue")
    # A grouped arm (4 layers, 2 per group), so the grouped model goes through pretraining and fine-tuning too.
    arm = next(arm for arm in sharing_arms({**BUDGET.model, "num_hidden_layers": 4}, BUDGET.vocab_size, seeds=[0])
               if arm.name == "group2")
    assert arm.downstream and arm.config.num_hidden_groups == 2
    arms_dir = str(tmp_path / "arms")
    directories = {arm.key: arm_directory(arms_dir, arm)}
    with pytest.raises(ValueError, match="Arm sharing/group2/seed0 has no checkpoint in .* to fine-tune"):
        run_downstream([arm], directories, BUDGET, data, jit_compile=False)
    run_arms([arm], arms_dir, BUDGET, data, jit_compile=False)

    scores = run_downstream([arm], directories, BUDGET, data, glue_dir, jit_compile=False)[arm.key]
    assert set(scores) == {"documents", "sst-2", "mnli"}
    assert all(scores[task]["global_step"] == BUDGET.finetune_steps for task in scores)
    assert set(scores["mnli"]) >= {"accuracy", "accuracy_mismatched"}
    run_dir = os.path.join(arms_dir, "sharing", "group2", "seed0", "downstream")
    assert sorted(os.listdir(run_dir)) == ["documents", "mnli", "sst-2"]
    assert downstream_baselines(data, BUDGET, glue_dir) == {"downstream/documents": pytest.approx(1 / 3),
                                                    "downstream/sst-2": pytest.approx(0.5),
                                                    "downstream/mnli": pytest.approx(0.5)}
    documents_dev = sum(1 for _ in open(os.path.join(data.document_classification_dir, "dev.tsv"))) - 1
    assert downstream_dev_sizes(data, BUDGET, glue_dir) == {"downstream/documents": documents_dev,
                                                            "downstream/sst-2": 6, "downstream/mnli": 4}

    checkpoint = os.path.join(run_dir, "sst-2", f"ckpt-{BUDGET.finetune_steps}.index")
    written = os.path.getmtime(checkpoint)
    with caplog.at_level("INFO", logger="absl"):
        again = run_downstream([arm], directories, BUDGET, data, glue_dir, jit_compile=False)[arm.key]
    assert again == scores and os.path.getmtime(checkpoint) == written
    assert "Downstream runs: 3 finished and kept, 0 to run" in caplog.text


def test_a_glue_copy_without_mnli_stops_the_run_before_any_training(tmp_path):
    glue_dir = _write_glue(tmp_path / "glue")
    os.remove(os.path.join(glue_dir, "MNLI", "dev_mismatched.tsv"))
    output_dir = tmp_path / "out"
    with pytest.raises(ValueError, match=f"--glue_data_dir={glue_dir} has no {glue_dir}/MNLI/dev_mismatched.tsv; "
                                         "the downstream score reads SST-2 and MNLI"):
        run_reproduction(ReproduceOptions(output_dir=str(output_dir), glue_data_dir=glue_dir))
    assert not output_dir.exists()


@pytest.mark.slow
def test_the_package_classification_is_fine_tuned_by_epochs_and_probed_on_frozen_features(tmp_path):
    budget = dataclasses.replace(BUDGET, downstream_task="packages", downstream_packages=3,
                                 downstream_sentences_per_package=40, finetune_epochs=2.0, linear_probe=True)
    corpus = write_corpus(str(tmp_path / "corpus.txt"), num_documents=80)
    data = prepare_pretraining_data(str(tmp_path / "data"), budget, corpus_files=[corpus])
    # A user's corpus knows no packages: the held-out documents are given three made-up ones.
    with pytest.raises(ValueError, match="needs the built-in corpus"):
        prepare_classification(data, budget)
    with open(data.holdout_text, encoding="utf-8") as handle:
        held_out = [block for block in handle.read().split("\n\n") if block.strip()]
    packages = str(tmp_path / "holdout_packages.txt")
    with open(packages, "w", encoding="utf-8") as handle:
        handle.write("".join(f"package{index % 3}\n" for index in range(len(held_out))))
    data = dataclasses.replace(data, holdout_packages=packages)
    arm = next(arm for arm in sharing_arms(budget.model, budget.vocab_size, seeds=[0]) if arm.name == "all")
    arms_dir = str(tmp_path / "arms")
    run_arms([arm], arms_dir, budget, data, jit_compile=False)
    scores = run_downstream([arm], {arm.key: arm_directory(arms_dir, arm)}, budget, data, jit_compile=False)[arm.key]
    assert set(scores) == {"packages", "packages_probe"}
    set_dir = os.path.join(os.path.dirname(data.document_classification_dir), "packages")
    dev_examples, train_examples = (sum(1 for _ in open(os.path.join(set_dir, name))) - 1
                                    for name in ("dev.tsv", "train.tsv"))
    assert scores["packages_probe"]["examples"] == dev_examples
    assert 0.0 <= scores["packages_probe"]["accuracy"] <= 1.0 and scores["packages_probe"]["train_accuracy"] > 0.34
    assert scores["packages"]["global_step"] == int(train_examples / budget.finetune_batch_size * 2.0)
    baselines = downstream_baselines(data, budget, None)
    assert set(baselines) == {"downstream/packages", "downstream/packages_probe"}
    assert baselines["downstream/packages"] == baselines["downstream/packages_probe"] >= 1 / 3
    assert downstream_dev_sizes(data, budget, None) == {"downstream/packages": dev_examples,
                                                        "downstream/packages_probe": dev_examples}
