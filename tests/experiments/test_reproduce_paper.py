"""run_scripts/reproduce_paper.py end to end at the smoke budget: the report's files, a rerun that keeps the
finished arms, and a corpus given with --corpus. Nothing here checks the numbers."""
import glob
import json
import os

import pytest

from albert_tf.experiments.reproduce import EXPERIMENTS
from data_gen import corpora
from tests.helpers import run_script


def _checkpoint_mtimes(output_dir):
    return {path: os.path.getmtime(path) for path in glob.glob(os.path.join(output_dir, "arms", "**", "ckpt-[0-9]*"),
                                                               recursive=True)}


@pytest.mark.slow
def test_smoke_budget_writes_every_table_plot_and_key_and_a_rerun_keeps_the_arms(tmp_path):
    output_dir = str(tmp_path / "smoke")
    first = run_script("reproduce_paper", "--experiment=all", "--budget=smoke", f"--output_dir={output_dir}")
    assert first.returncode == 0, first.stderr[-3000:]
    report = open(os.path.join(output_dir, "REPORT.md"), encoding="utf-8").read()
    assert "## Cross-layer sharing (paper Table 4)" in report
    assert "| share_type | paper params |" in report
    assert os.path.getsize(os.path.join(output_dir, "sharing_accuracy.png")) > 1000
    document = json.load(open(os.path.join(output_dir, "results.json"), encoding="utf-8"))
    assert set(document["arms"]) == {f"sharing/{share_type}" for share_type in ("none", "attention", "ffn", "all")}
    for seeds in document["arms"].values():
        assert set(seeds["seed0"]) >= {"parameters", "masked_lm_accuracy", "sentence_order_accuracy"}
    assert set(document["claims"]) == {"sharing/attention_sharing_is_free", "sharing/ffn_sharing_costs_most"}
    assert set(EXPERIMENTS) == {"sharing"}  # a new experiment must add its checks here

    mtimes = _checkpoint_mtimes(output_dir)
    assert len([path for path in mtimes if path.endswith(".index")]) == 4
    rerun = run_script("reproduce_paper", "--experiment=all", "--budget=smoke", f"--output_dir={output_dir}")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Arms: 4 finished and kept, 0 to run" in rerun.stderr
    assert _checkpoint_mtimes(output_dir) == mtimes


@pytest.mark.slow
def test_smoke_budget_runs_on_a_corpus_given(tmp_path):
    # A part of the built-in corpus written to a file stands in for the user's text: a vocabulary of the smoke
    # budget's size needs more distinct words than the generated test corpora hold.
    corpus = str(tmp_path / "corpus.txt")
    corpora.write_corpus(corpus)
    with open(corpus, encoding="utf-8") as handle:
        documents = handle.read().split("\n\n")
    with open(corpus, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join(documents[:len(documents) // 2]) + "\n\n")
    output_dir = str(tmp_path / "mine")
    completed = run_script("reproduce_paper", "--experiment=sharing", f"--corpus={corpus}", "--seeds=3",
                           f"--output_dir={output_dir}")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"corpus: {corpus}" in open(os.path.join(output_dir, "REPORT.md"), encoding="utf-8").read()
    assert set(json.load(open(os.path.join(output_dir, "results.json")))["arms"]["sharing/all"]) == {"seed3"}


@pytest.mark.slow
def test_a_corpus_too_small_to_split_is_one_error_line(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("Only one document here.\nWith two sentences.\n", encoding="utf-8")
    completed = run_script("reproduce_paper", f"--corpus={corpus}", f"--output_dir={tmp_path / 'out'}")
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1].startswith(f"error: --corpus={corpus}: its 1 documents give")
