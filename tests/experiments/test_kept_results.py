"""What lets a reproduction's kept results (arm_result.json files, committed under paper_runs/) carry over to a new
machine safely: the data written there again must match the data the results were trained on, more arms are
trained only by the step code that trained the kept ones, and a kept training that lacks an evaluation and has no
checkpoint is one clear error."""
import json
import os

import pytest

from albert_tf.experiments.budgets import budget_for
from albert_tf.experiments.pretraining_data import DATA_RECORD_NAME, check_data_record, data_record
from albert_tf.experiments.reproduce import EXPERIMENTS
from albert_tf.experiments.runner import ARM_RESULT_NAME, arm_directory, check_step_code, run_arms, trained_by
from data_gen.pretraining import build_vocab


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def test_data_written_again_must_match_its_record_and_a_mismatch_names_the_files_and_packages(tmp_path):
    data_dir = str(tmp_path / "data")
    train = _write(os.path.join(data_dir, "text", "train.txt"), "One sentence.\n\n")
    vocab = _write(os.path.join(data_dir, "vocab", "spm.vocab"), "pieces")
    record = data_record(data_dir, [train, vocab], include_site_packages=True)
    assert set(record["files"]) == {"text/train.txt", "vocab/spm.vocab"}
    assert record["packages"]["tensorflow"] == "2.21.0"
    assert data_record(data_dir, [train], include_site_packages=False)["packages"] is None
    check_data_record(data_dir, record)
    assert json.load(open(os.path.join(data_dir, DATA_RECORD_NAME), encoding="utf-8")) == record
    check_data_record(data_dir, data_record(data_dir, [train, vocab], include_site_packages=True))

    _write(train, "Another sentence.\n\n")
    packages = {**record["packages"], "numpy": "9.9.9", "extra-package": "1.0"}
    changed = {**data_record(data_dir, [train, vocab], include_site_packages=True), "packages": packages}
    with pytest.raises(ValueError) as raised:
        check_data_record(data_dir, changed)
    assert str(raised.value) == (
        f"The data written in {data_dir} differs from the data its results were trained on "
        f"({os.path.join(data_dir, DATA_RECORD_NAME)}): text/train.txt; give another --output_dir, or write the "
        f"same data (delete everything in {data_dir} but data_record.json, then rerun): on Python "
        f"{record['python']}; with the packages numpy {record['packages']['numpy']} (here 9.9.9); without "
        "extra-package.")
    # The built-in corpus is the checkout's docstrings too: another checkout writes other text.
    with pytest.raises(ValueError, match=r"then rerun\): on Python [0-9.]+; from a checkout of the commit that "
                                         r"started the run \(the built-in corpus holds the checkout's docstrings; "
                                         r"each arm_result.json names the commit under trained_by\)\.$"):
        check_data_record(data_dir, data_record(data_dir, [train, vocab], include_site_packages=True),
                          built_in_corpus=True)


def test_more_arms_train_only_by_the_step_code_that_trained_the_kept_ones():
    check_step_code({"sharing/all/seed0": {"trained_by": trained_by()}}, "out/arms")
    assert len(trained_by()["step_code"]) == 16 and trained_by()["cpu"]
    other = {"step_code": "0123456789abcdef", "commit": "6c7e06a", "cpu": "AMD EPYC"}
    with pytest.raises(ValueError, match=r"^out/arms holds training sharing/none/seed1 by step code 0123456789abcdef "
                                         r"\(commit 6c7e06a\), not this checkout's [0-9a-f]{16}; train the rest from a "
                                         r"checkout of that commit \(git worktree add --detach DIR COMMIT\) or give "
                                         r"another --output_dir\.$"):
        check_step_code({"sharing/all/seed0": {"trained_by": trained_by()},
                         "sharing/none/seed1": {"trained_by": other}},
                        "out/arms")
    with pytest.raises(ValueError, match="holds training sharing/none/seed1 by step code None"):
        check_step_code({"sharing/none/seed1": {}}, "out/arms")


def test_a_kept_training_without_checkpoints_that_lacks_an_evaluation_is_one_error(tmp_path):
    budget = budget_for("smoke")
    arms = [arm for arm in EXPERIMENTS["sop_vs_nsp"](budget.model, budget.vocab_size, (0,)) if arm.name == "nsp"]
    arms_dir = str(tmp_path / "arms")
    directory = arm_directory(arms_dir, arms[0])
    # Kept from a run of another experiment, on another machine: the pure sets were not measured, and the
    # checkpoints stayed behind.
    _write(os.path.join(directory, ARM_RESULT_NAME), json.dumps({"arm": "nsp", "seed": 0, "eval": {}}))
    with pytest.raises(ValueError, match=rf"^Training sop_vs_nsp/nsp/seed0 in {directory} is finished but lacks "
                                         rf"pure_eval and has no checkpoint to measure it on; delete its "
                                         rf"{ARM_RESULT_NAME} and rerun to train it again\.$"):
        run_arms(arms, arms_dir, budget, data=None, jit_compile=False)


def test_a_vocabulary_trained_again_elsewhere_has_the_same_record(tmp_path):
    corpus = _write(str(tmp_path / "corpus.txt"), "".join(
        f"Sentence number {index} talks about {word} and {index % 7} other things.\n"
        for index, word in enumerate(["apples", "pears", "plums", "figs", "dates"] * 40)))
    records = []
    for place in ("here", "elsewhere"):
        data_dir = str(tmp_path / place)
        model = build_vocab.train_sentencepiece([corpus], os.path.join(data_dir, "vocab", "spm"), vocab_size=60)
        records.append(data_record(data_dir, [model], include_site_packages=False)["files"])
    assert records[0] == records[1]
    assert open(os.path.join(tmp_path, "here", "vocab", "spm.model"), "rb").read() != open(
        os.path.join(tmp_path, "elsewhere", "vocab", "spm.model"), "rb").read()
