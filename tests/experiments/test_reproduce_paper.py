"""run_scripts/reproduce_paper.py end to end at the smoke budget, in one run on a corpus given with --corpus: a
SIGTERM stops it in one line and a rerun resumes it, the report's files, and a rerun that keeps the finished arms.
Nothing here checks the numbers."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess

import pytest

from albert_tf.experiments import speed
from albert_tf.experiments.reproduce import EXPERIMENT_NAMES, EXPERIMENTS, ReproduceOptions, check_run_identity
from albert_tf.experiments.runner import ARM_RESULT_NAME, HELD_OUT_CURVE_POINTS
from data_gen.pretraining import corpora
from tests.helpers import REPO_ROOT, run_script, sigterm_on_log_line, start_script


def _checkpoint_files(output_dir):
    return glob.glob(os.path.join(output_dir, "arms", "**", "ckpt-[0-9]*"), recursive=True)


def _write_user_corpus(path):
    """Half of the built-in corpus, written to a file, stands in for the user's text: a vocabulary of the smoke
    budget's size needs more distinct words than the generated test corpora hold."""
    corpora.write_corpus(path)
    with open(path, encoding="utf-8") as handle:
        documents = handle.read().split("\n\n")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join(documents[:len(documents) // 2]) + "\n\n")
    return path


def _copy_what_git_commits(output_dir, kept_dir):
    """Copies the files of `output_dir` that paper_runs/.gitignore lets git commit, as if the run had been made
    under paper_runs/ and is now checked out on another machine; returns their paths relative to `output_dir`."""
    files = [os.path.relpath(path, output_dir) for path in glob.glob(os.path.join(output_dir, "**"), recursive=True)
             if os.path.isfile(path)]
    as_committed = {os.path.join("paper_runs", "run", relative): relative for relative in files}
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO_ROOT, capture_output=True,
                             text=True, input="\n".join(as_committed) + "\n").stdout.splitlines()
    copied = sorted(set(files) - {as_committed[path] for path in ignored})
    for relative in copied:
        os.makedirs(os.path.dirname(os.path.join(kept_dir, relative)), exist_ok=True)
        shutil.copy(os.path.join(output_dir, relative), os.path.join(kept_dir, relative))
    return copied


def _stop_with_sigterm_after_step_12(flags, output_dir, arm_key):
    """Starts the run, sends SIGTERM (as a cluster manager would) once the first training has logged step 12 (off
    its checkpoint schedule of every 10 steps, so the stop saves a checkpoint of its own),
    checks that the run stops in one line with the arm resumable, and returns the step it stopped at."""
    process = start_script("reproduce_paper", *flags)
    rest = sigterm_on_log_line(process, "step 12/40")
    assert process.returncode == 128 + signal.SIGTERM, rest[-3000:]
    assert "Traceback" not in rest
    arm_dir = os.path.join(output_dir, "arms", *arm_key.split("/"))
    stopped = re.search(rf"\] Stopped by SIGTERM during training {arm_key} at step (\d+) \(checkpoint saved in "
                        rf"{re.escape(arm_dir)}\); rerun the same command to resume\.$", rest.strip().splitlines()[-1])
    assert stopped, rest[-3000:]
    step = int(stopped.group(1))
    assert 12 <= step < 40 and step % 10 and os.path.exists(os.path.join(arm_dir, f"ckpt-{step}.index"))
    assert not os.path.exists(os.path.join(arm_dir, ARM_RESULT_NAME))
    assert not os.path.exists(os.path.join(output_dir, "REPORT.md"))
    return step


@pytest.mark.slow
def test_smoke_budget_on_a_corpus_stops_on_sigterm_resumes_writes_every_table_plot_and_key_and_keeps_the_arms(
        tmp_path):
    corpus = _write_user_corpus(str(tmp_path / "corpus.txt"))
    output_dir = str(tmp_path / "smoke")
    # --nojit_compile: auto's timed trials and XLA's compiles would be most of the tiny models' minutes.
    flags = ("--experiment=all", "--budget=smoke", f"--corpus={corpus}", "--seeds=3", "--nojit_compile",
             f"--output_dir={output_dir}")
    step = _stop_with_sigterm_after_step_12(flags, output_dir, "sharing/attention/seed3")
    # Nine trainings, nine fine-tunings and five speed measurements: 4.5 minutes alone on a Zen 3's core, more
    # beside the other test worker; the default 10 minutes left too little room on a slow, shared machine.
    first = run_script("reproduce_paper", *flags, timeout=1800)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "trainings: 0 finished and kept, 9 to run" in first.stderr
    assert f"Training from step {step} to 40" in first.stderr
    report = open(os.path.join(output_dir, "REPORT.md"), encoding="utf-8").read()
    for title in ("## Verdicts", "| experiment | claim | verdict | difference | seed spread |",
                  "## Cross-layer sharing (paper Table 4)", "| share_type | paper params |",
                  "## Sentence objectives: none, NSP, SOP (paper Table 5)", "| trained on | paper MLM |",
                  "| majority baseline |", "## Layer transitions (paper Figure 2)", "| depth | all-shared: L2",
                  "## Embedding size (paper Table 3)", "| share | E | paper params |", "## Dropout (paper section 4.8)",
                  "| dropout | paper downstream avg |", "## Speed and memory (paper Table 2)",
                  "| model | paper params | paper speedup |", "tiny shapes: the models' widths / 32",
                  f"corpus: {corpus}", "**What this scale cannot show.** The paper's figures are downstream averages",
                  "Ours come from a model a fraction of ALBERT-base's size", "## What the trainings cost",
                  "| training | seed | CPU | compile path | sittings | steps recorded |"):
        assert title in report
    assert re.search(r"\n\*\*Downstream dev sets\.\*\* .*: documents, \d+ examples \(at the mean accuracy "
                     r"0\.\d{3}, binomial sd 0\.\d{3}\)\.\n", report)
    # The arm the SIGTERM stopped trained in two sittings, which its row of the costs table sums.
    assert re.search(r"\n\| sharing/attention \| 3 \| [^|]+ \| TensorFlow's own kernels \| 2 \| 40 \| ", report)
    assert "| 1 | 2 | none (the not-shared arm, reused) |" in report
    assert "| 2 | 1 | all (the all-shared arm, reused) |" in report
    for plot in ("sharing_accuracy.png", "sop_vs_nsp_accuracy.png", "layer_transitions_curves.png",
                 "embedding_size_mlm.png", "dropout_curves.png", "speed.png",
                 *(f"{name}_learning_curves.png" for name in EXPERIMENTS)):
        assert os.path.getsize(os.path.join(output_dir, plot)) > 1000
    document = json.load(open(os.path.join(output_dir, "results.json"), encoding="utf-8"))
    assert set(document["arms"]) == ({f"sharing/{share_type}" for share_type in ("none", "attention", "ffn", "all")}
                                     | {f"sop_vs_nsp/{arm}" for arm in ("none", "nsp", "sop")}
                                     | {"layer_transitions/all", "layer_transitions/none"}
                                     | {f"embedding_size/{share_type}_E{size}" for share_type in ("all", "none")
                                        for size in (8, 16)}
                                     | {"dropout/dropout0", "dropout/dropout0.1"})
    for arm, seeds in document["arms"].items():
        assert set(seeds) == {"seed3"}
        assert set(seeds["seed3"]) >= {"parameters", "masked_lm_accuracy", "sentence_order_accuracy"}
        if not arm.startswith("layer_transitions/"):
            assert set(seeds["seed3"]) >= {"downstream/documents/accuracy", "downstream/documents/loss"}
        if arm.startswith("sop_vs_nsp/"):
            assert set(seeds["seed3"]) >= {"pure_sop/sentence_order_accuracy", "pure_nsp/sentence_order_accuracy",
                                           "pure_sop/masked_lm_accuracy"}
        if arm.startswith("layer_transitions/"):
            assert len(seeds["seed3"]["transitions/l2_distance"]) == 2
    assert len(document["arms"]["layer_transitions/all"]["seed3"]["transitions_twice_as_deep/cosine_similarity"]) == 4
    # The dropout arms' held-out curve: every kept checkpoint, the last the final figure.
    curve = document["arms"]["dropout/dropout0.1"]["seed3"]
    assert curve["curve/step"] == [10, 20, 30, 40]
    # The arm stopped by SIGTERM kept the checkpoint of that step too; its curve has the scheduled steps alone.
    assert os.path.exists(os.path.join(output_dir, "arms", "sharing", "attention", "seed3",
                                                      f"ckpt-{step}.index"))
    assert document["arms"]["sharing/attention"]["seed3"]["curve/step"] == [10, 20, 30, 40]
    assert curve["curve/masked_lm_accuracy"][-1] == pytest.approx(curve["masked_lm_accuracy"])  # float32 events
    assert set(document["measurements"]) == {f"speed/{name}" for name in speed.MODELS}
    assert all(record["seq_per_s_median"] > 0 and record["parameter_mb"] > 0
               for record in document["measurements"].values())
    assert document["measurements"]["speed/bert-large"]["speedup"] == 1.0
    assert set(document["claims"]) == {f"sharing/{claim}{suffix}" for suffix in ("", "_downstream") for claim in (
                                           "attention_sharing_is_free", "ffn_sharing_costs_most",
                                           "smaller_groups_are_better")} | {
                                       "sop_vs_nsp/nsp_does_not_solve_sop", "sop_vs_nsp/sop_solves_nsp",
                                       "sop_vs_nsp/sop_beats_nsp_downstream", "sop_vs_nsp/sop_beats_none_downstream",
                                       "layer_transitions/all_shared_is_smoother", "layer_transitions/no_fixed_point",
                                       "speed/albert_large_is_faster", "speed/albert_xxlarge_is_slower"} | {
                                       f"{claim}{suffix}" for suffix in ("", "_downstream") for claim in (
                                           "embedding_size/all_shared_best_at_budget_embedding_size",
                                           "embedding_size/not_shared_larger_is_better",
                                           "dropout/removing_dropout_helps")}
    assert set(document["baselines"]) == {"masked_lm", "sentence_order", "masked_lm_pure", "sop_pure", "nsp_pure",
                                          "downstream/documents"}
    # A new experiment must add its checks here.
    assert set(EXPERIMENT_NAMES) == {"sharing", "sop_vs_nsp", "layer_transitions", "embedding_size", "dropout",
                                     "speed"}

    # Fifteen arms, nine trainings: each row that reuses another arm's training says so in the report and in
    # results.json, and its training directory is that arm's.
    assert "Reused trainings (the same model, records, objective and seed" in report
    assert "sop_vs_nsp/sop is sharing/all." in report and "dropout/dropout0 is sharing/all." in report
    assert "layer_transitions/all is sharing/all; layer_transitions/none is sharing/none." in report
    assert document["arms"]["embedding_size/none_E16"]["seed3"]["trained_as"] == "sharing/none/seed3"
    assert "trained_as" not in document["arms"]["sharing/none"]["seed3"]
    assert sorted(os.listdir(os.path.join(output_dir, "arms", "dropout"))) == ["dropout0.1"]
    # The kept checkpoints of each training, the one the SIGTERM saved, and one per training's downstream run (every
    # experiment but layer_transitions fine-tunes, and its two trainings are reused by others).
    assert len([path for path in _checkpoint_files(output_dir) if path.endswith(".index")]) == (
        9 * HELD_OUT_CURVE_POINTS + 1 + 9)

    # A training's downstream runs finish before its arm_result.json is written, and what git commits of the
    # directory is enough for a rerun (here or on another machine, which is the harder case: no checkpoints): the
    # data is written again and matches its record, and nothing trains, fine-tunes or measures again.
    for downstream in glob.glob(os.path.join(output_dir, "arms", "*", "*", "seed3", "downstream", "*",
                                             "downstream_result.json")):
        arm_result = os.path.join(downstream.split(os.sep + "downstream" + os.sep)[0], ARM_RESULT_NAME)
        assert os.path.getmtime(downstream) <= os.path.getmtime(arm_result)
    kept_dir = str(tmp_path / "kept")
    copied = _copy_what_git_commits(output_dir, kept_dir)
    assert "run.json" in copied and "data/data_record.json" in copied and "REPORT.md" in copied
    assert len([path for path in copied if path.endswith(ARM_RESULT_NAME)]) == 9
    assert not [path for path in copied if "ckpt" in path or "tfevents" in path or path.startswith("data/text")]
    speed_records = {path: os.path.getmtime(path) for path in glob.glob(os.path.join(kept_dir, "speed", "*.json"))}
    assert len(speed_records) == len(speed.MODELS)
    kept_flags = [flag for flag in flags if not flag.startswith("--output_dir=")] + [f"--output_dir={kept_dir}"]
    kept = run_script("reproduce_paper", *kept_flags)
    assert kept.returncode == 0, kept.stderr[-3000:]
    assert "Arms: 15, in 9 trainings (6 arms reuse another arm's training); trainings: 9 finished and kept, 0 to run" \
        in kept.stderr
    assert "Downstream runs: 9 finished and kept, 0 to run" in kept.stderr
    assert not _checkpoint_files(kept_dir)
    assert {path: os.path.getmtime(path) for path in speed_records} == speed_records
    assert json.load(open(os.path.join(kept_dir, "results.json"), encoding="utf-8")) == document
    for plot in (f"{name}_learning_curves.png" for name in EXPERIMENTS):
        assert os.path.getsize(os.path.join(kept_dir, plot)) > 1000


@pytest.mark.slow
def test_a_corpus_too_small_to_split_is_one_error_line(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("Only one document here.\nWith two sentences.\n", encoding="utf-8")
    completed = run_script("reproduce_paper", f"--corpus={corpus}", f"--output_dir={tmp_path / 'out'}")
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1].startswith(f"error: --corpus={corpus}: its 1 documents give")


def test_a_rerun_with_another_budget_or_corpus_is_one_error_line_and_touches_nothing(tmp_path):
    output_dir = str(tmp_path / "out")
    corpus = _write_user_corpus(str(tmp_path / "corpus.txt"))
    check_run_identity(output_dir, ReproduceOptions(output_dir, budget="smoke", corpus=[corpus]))
    recorded = open(os.path.join(output_dir, "run.json"), encoding="utf-8").read()
    # The same budget and corpus pass, with other seeds and experiments.
    check_run_identity(output_dir, ReproduceOptions(output_dir, experiments=["sharing"], budget="smoke",
                                                    corpus=[corpus], seeds=(0, 1, 2)))
    with pytest.raises(ValueError, match=r"holds a run of --budget=smoke on --corpus=.*corpus\.txt .*not of "
                                         r"--budget=smoke on the built-in corpus with --include_site_packages;"):
        check_run_identity(output_dir, ReproduceOptions(output_dir, budget="smoke", include_site_packages=True))
    completed = run_script("reproduce_paper", "--budget=small", f"--corpus={corpus}", f"--output_dir={output_dir}")
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1] == (
        f"error: --output_dir={output_dir} holds a run of --budget=smoke on --corpus={corpus} "
        f"({os.path.join(output_dir, 'run.json')}), not of --budget=small on --corpus={corpus}; rerun with those "
        "flags or give another --output_dir.")
    assert os.listdir(output_dir) == ["run.json"]
    assert open(os.path.join(output_dir, "run.json"), encoding="utf-8").read() == recorded
