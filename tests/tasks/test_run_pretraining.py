import json
import logging
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions, run_pretraining
from albert_tf.training.pretraining_losses import pretraining_loss
from data_gen.pretraining.input_pipeline import pretraining_dataset_fn
from tests import helpers
from tests.helpers import run_script, write_pretraining_records

SEQ, PREDICTIONS = 16, 3
SIZES = dict(hidden_size=32, num_hidden_layers=2, intermediate_size=64, max_position_embeddings=32,
             initializer_range=0.02)


def tiny_config(**overrides):
    return helpers.tiny_config(**{**SIZES, **overrides})


def options(output_dir, **overrides):
    values = dict(output_dir=str(output_dir), max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
                  train_batch_size=16, eval_batch_size=16, learning_rate=0.02, num_train_steps=40,
                  num_warmup_steps=4, save_checkpoints_steps=20, max_eval_steps=10, log_every_steps=10,
                  jit_compile=False)  # XLA: the bfloat16 test; the command-line runs take the default, auto
    values.update(overrides)
    return PretrainingOptions(**values)


def dataset_fn(pattern, is_training=True):
    return pretraining_dataset_fn(pattern, max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS,
                                  is_training=is_training, seed=1)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    write_pretraining_records(str(directory / "train.tfrecord"), num_records=256, max_seq_length=SEQ,
                              max_predictions=PREDICTIONS)
    write_pretraining_records(str(directory / "eval.tfrecord"), num_records=64, max_seq_length=SEQ,
                              max_predictions=PREDICTIONS, seed=5)
    return directory


@pytest.mark.slow
def test_loss_falls_and_evaluation_writes_results(records, tmp_path):
    run = Pretraining(tiny_config(), options(tmp_path))
    batch = next(iter(dataset_fn(str(records / "eval.tfrecord"), is_training=False)(None, 64, 0)))
    before, _ = pretraining_loss(run.model(batch), batch)
    run.train(dataset_fn(str(records / "train.tfrecord")))
    after, _ = pretraining_loss(run.model(batch), batch)
    # Untrained: about ln(60) + ln(2) = 4.8; learning the masked-token distribution alone gives about 4.4.
    assert float(after) < float(before) - 0.25
    results = run.evaluate_checkpoints(dataset_fn(str(records / "eval.tfrecord"), is_training=False))
    assert results["global_step"] == 40
    written = json.loads((tmp_path / "eval_results.json").read_text())
    assert set(written) == {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                            "sentence_order_accuracy", "sentence_order_loss"}
    assert 0.0 < written["masked_lm_accuracy"] <= 1.0 and 0.0 < written["sentence_order_accuracy"] <= 1.0
    np.testing.assert_allclose(written["loss"], written["masked_lm_loss"] + written["sentence_order_loss"],
                               rtol=1e-3)
    # A block per evaluated checkpoint, the last one's lines equal to eval_results.json.
    text = (tmp_path / "eval_results.txt").read_text()
    assert text.startswith("global_step = ") and "saved " in text
    assert f"global_step = 40\nloss = {written['loss']}\n" in text
    best = json.loads((tmp_path / "best" / "eval_results.json").read_text())
    assert best["masked_lm_accuracy"] == max(best["masked_lm_accuracy"], written["masked_lm_accuracy"])
    assert tf.io.gfile.glob(str(tmp_path / "best" / "ckpt-best.index"))
    assert (tmp_path / "best" / "albert_config.json").read_text() == (tmp_path / "albert_config.json").read_text()
    assert tf.io.gfile.glob(str(tmp_path / "eval" / "events.out.tfevents.*"))


@pytest.mark.slow
def test_input_and_output_on_the_ram_filesystem(records, caplog):
    """Shards read and a run written through tf.io.gfile alone (ram:// stands in for gs://): train, then resume."""
    root = f"ram://pretraining_{os.getpid()}_{time.time_ns()}"
    tf.io.gfile.makedirs(f"{root}/data")
    tf.io.gfile.copy(str(records / "train.tfrecord"), f"{root}/data/train.tfrecord-00000")
    run_options = dict(output_dir=f"{root}/run", input_file=f"{root}/data/train.tfrecord-*", do_train=True,
                       train_batch_size=8, eval_batch_size=8, num_warmup_steps=0, save_checkpoints_steps=1,
                       max_eval_steps=1)
    try:
        # Evaluation only in the second run: ram:// appends to a file opened again for writing (TF 2.21).
        results = run_pretraining(tiny_config(), options(**run_options, num_train_steps=1, do_eval=False))
        assert results["train"]["step"] == 1
        with caplog.at_level(logging.INFO, logger="absl"):
            results = run_pretraining(tiny_config(), options(**run_options, num_train_steps=2, do_eval=True))
        assert "Training from step 1 to 2" in caplog.text
        assert results["train"]["step"] == 2 and results["eval"]["global_step"] == 2
        assert tf.train.latest_checkpoint(f"{root}/run") == f"{root}/run/ckpt-2"
        with tf.io.gfile.GFile(f"{root}/run/eval_results.json") as handle:
            assert json.load(handle) == results["eval"]
        assert tf.io.gfile.exists(f"{root}/run/best/ckpt-best.index")
        assert tf.io.gfile.glob(f"{root}/run/train/events.out.tfevents.*")
        assert tf.io.gfile.glob(f"{root}/run/eval/events.out.tfevents.*")
    finally:
        tf.io.gfile.rmtree(root)


def test_output_dir_with_another_config_is_refused(records, tmp_path):
    Pretraining(tiny_config(), options(tmp_path))
    with pytest.raises(ValueError, match=r"hidden_size: 32 there vs 48 now"):
        Pretraining(tiny_config(hidden_size=48), options(tmp_path))


def test_data_config_mismatch_fails_before_training(records, tmp_path):
    run = Pretraining(tiny_config(vocab_size=40), options(tmp_path))
    with pytest.raises(ValueError, match=r"token id 4\d is outside the config's vocab_size=40"):
        run.train(dataset_fn(str(records / "train.tfrecord")), source="train.tfrecord")
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


@pytest.mark.slow
def test_bfloat16_and_jit_compile_train(records, tmp_path):
    run = Pretraining(tiny_config(), options(tmp_path, mixed_precision="mixed_bfloat16", jit_compile=True,
                                             num_train_steps=6, steps_per_loop=3, gradient_accumulation_steps=2))
    results = run.train(dataset_fn(str(records / "train.tfrecord")))
    assert results["step"] == 6 and np.isfinite(results["loss"])


def _script(records, output_dir, *extra):
    """The Python arguments of a run_pretraining run."""
    return ["-m", "run_scripts.run_pretraining", f"--input_file={records / 'train.tfrecord'}",
            f"--output_dir={output_dir}", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
            "--train_batch_size=8", "--learning_rate=0.005", "--num_warmup_steps=2", "--save_checkpoints_steps=100",
            "--log_every_steps=1", "--deterministic", "--do_train", *extra]


def _final_weights(output_dir, config):
    model = AlbertPretrainer(config)
    tf.train.Checkpoint(model=model).read(tf.train.latest_checkpoint(str(output_dir))).expect_partial()
    return {variable.path: variable.numpy() for variable in model.weights}


UNINTERRUPTED_STEPS = 30


@pytest.fixture(scope="module")
def uninterrupted(records, tmp_path_factory):
    """(config file, config, final weights) of one uninterrupted run_pretraining of UNINTERRUPTED_STEPS with
    dropout, the reference the interrupted runs below must end at."""
    directory = tmp_path_factory.mktemp("uninterrupted")
    config_path = directory / "albert_config.json"
    config = tiny_config(hidden_dropout_prob=0.1)
    config.to_json_file(str(config_path))
    run = helpers.run_python(*_script(records, directory / "run", f"--albert_config_file={config_path}",
                                      f"--num_train_steps={UNINTERRUPTED_STEPS}"), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    weights = _final_weights(directory / "run", config)
    assert len(weights) == 32 and not np.allclose(weights["albert_pretrainer/predictions/output_bias"], 0.0)
    return config_path, config, weights


@pytest.mark.slow
def test_sigterm_then_rerun_equals_an_uninterrupted_run(records, tmp_path, uninterrupted):
    config_path, config, straight = uninterrupted
    common = (f"--albert_config_file={config_path}", f"--num_train_steps={UNINTERRUPTED_STEPS}")
    interrupted = tmp_path / "interrupted"
    process = helpers.start_python(*_script(records, interrupted, *common))
    rest = helpers.sigterm_on_log_line(process, "step 10/", timeout=240)
    assert process.returncode == 0, rest[-2000:]
    preempted_step = int(tf.train.latest_checkpoint(str(interrupted)).rsplit("-", 1)[1])
    assert 10 <= preempted_step < UNINTERRUPTED_STEPS
    rerun = helpers.run_python(*_script(records, interrupted, *common), timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    resumed = _final_weights(interrupted, config)
    assert straight.keys() == resumed.keys()
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)


def test_script_errors(records, tmp_path):
    missing = run_script("run_pretraining", "--input_file=/nonexistent/x-*", f"--output_dir={tmp_path}",
                         "--preset=albert-base", "--do_train", timeout=120)
    assert missing.returncode != 0 and "/nonexistent/x-*" in missing.stderr
    tpu = run_script("run_pretraining", f"--input_file={records}/train.tfrecord", f"--output_dir={tmp_path / 'tpu'}",
                     "--preset=albert-base", "--strategy=tpu", "--do_train", timeout=120)
    assert tpu.returncode != 0 and "TPU" in tpu.stderr
    original = run_script("run_pretraining", "--input_file=x", "--output_dir=y", "--use_tpu=true",
                          "--iterations_per_loop=1000", timeout=120)
    assert original.returncode != 0
    assert "--use_tpu is a flag of the original scripts that albert-tf does not have: pass --strategy=tpu" \
        in original.stderr and "--iterations_per_loop" in original.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", ["run_pretraining", "run_glue"])
def test_help_lists_the_shared_training_flags(script):
    help_text = run_script(script, "--help", timeout=120).stdout
    for name in ("--[no]jit_compile", "--num_recomputed_blocks", "--strategy", "--seed", "--mixed_precision"):
        assert name in help_text, name


@pytest.mark.slow
def test_the_masked_lm_alone_leaves_the_sentence_head_untrained(records, tmp_path):
    run = Pretraining(tiny_config(), options(tmp_path, sentence_loss_weight=0.0, num_train_steps=10))
    run.model(next(iter(dataset_fn(str(records / "eval.tfrecord"), is_training=False)(None, 2, 0))))
    # The bias is excluded from weight decay, so with zero gradients nothing moves it.
    head_before = [weight.numpy().copy() for weight in run.model.sentence_order_head.weights]
    encoder_before = [weight.numpy().copy() for weight in run.model.encoder.weights]
    run.train(dataset_fn(str(records / "train.tfrecord")))
    bias_moved = [not np.array_equal(before, weight.numpy()) for before, weight in
                  zip(head_before, run.model.sentence_order_head.weights) if "bias" in weight.path]
    assert bias_moved == [False]
    assert any(not np.array_equal(before, weight.numpy())
               for before, weight in zip(encoder_before, run.model.encoder.weights))
    results = run.evaluate_latest(dataset_fn(str(records / "eval.tfrecord"), is_training=False))
    assert results["global_step"] == 10 and 0.0 < results["sentence_order_accuracy"] <= 1.0
    assert not (tmp_path / "eval_results.json").exists()
    with pytest.raises(ValueError, match="sentence_loss_weight=-1.0 must be >= 0"):
        options(tmp_path, sentence_loss_weight=-1.0)


@pytest.fixture
def small_disk(tmp_path):
    """A 200 KB filesystem (tmpfs): room for the tiny model's first checkpoint, not its second. Mounting needs
    root; a machine that does not allow it skips the test, saying so."""
    mount_point = tmp_path / "small_disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


@pytest.mark.slow
def test_a_full_disk_stops_in_one_line_keeping_the_last_checkpoint_and_a_rerun_ends_as_an_uninterrupted_run(
        records, small_disk, uninterrupted):
    config_path, config, straight = uninterrupted
    common = (f"--albert_config_file={config_path}", f"--num_train_steps={UNINTERRUPTED_STEPS}",
              "--save_checkpoints_steps=10")

    output_dir = small_disk / "run"
    environment = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    full = subprocess.run([sys.executable, *_script(records, output_dir, *common)], capture_output=True, text=True,
                          timeout=300, env=environment)
    assert full.returncode == 1, full.stderr[-3000:]
    assert full.stderr.splitlines()[-1] == (
        f"error: Could not write the checkpoint of step 20 to {output_dir} (No space left on device); the last good "
        "checkpoint, ckpt-10, is kept: make room and rerun the same command to resume.")
    assert "Traceback" not in full.stderr
    assert tf.train.latest_checkpoint(str(output_dir)) == str(output_dir / "ckpt-10")
    assert not [name for name in os.listdir(output_dir) if name.startswith("ckpt-20")]

    subprocess.run(["mount", "-o", "remount,size=20m", str(small_disk)], check=True)
    resumed = helpers.run_python(*_script(records, output_dir, *common), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Training from step 10 to 30" in resumed.stderr
    after = _final_weights(output_dir, config)
    for name in straight:
        np.testing.assert_allclose(after[name], straight[name], atol=1e-6, err_msg=name)


def test_an_evaluation_file_that_is_no_tfrecord_is_one_sentence_naming_it_and_its_flag(records, tmp_path):
    not_records = tmp_path / "eval.tfrecord.summary.json"
    not_records.write_text(json.dumps({"instances": 64}))
    run_options = options(tmp_path / "run", num_train_steps=2, save_checkpoints_steps=2, do_train=True, do_eval=True,
                          input_file=str(records / "train.tfrecord"), eval_input_file=str(not_records))
    with pytest.raises(ValueError) as raised:
        run_pretraining(tiny_config(), run_options)
    assert re.fullmatch(rf"The evaluation data {re.escape(str(not_records))} is damaged: [^:]+ at 0 \(after 0 good "
                        r"records\): write the shard again, or leave it out of --eval_input_file\.", str(raised.value))


def test_a_damaged_shard_stops_the_training_naming_the_shard_and_the_step(records, tmp_path):
    whole = (records / "train.tfrecord").read_bytes()
    record = len(whole) // 256
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(whole[:100 * record + 5])  # a writer killed inside a record's header
    pattern = f"{records / 'train.tfrecord'},{cut}"
    with pytest.raises(ValueError, match=re.escape(
            f"The training data {cut} is damaged: truncated record header at {100 * record} (after 100 good "
            "records): write the shard again, or leave it out of --input_file.")):
        Pretraining(tiny_config(), options(tmp_path / "cut_run")).train(dataset_fn(pattern), source=pattern)

    flipped = bytearray(whole)
    flipped[3 * record + 40] ^= 0xFF
    damaged = tmp_path / "flipped.tfrecord"
    damaged.write_bytes(bytes(flipped))
    run_dir = tmp_path / "flipped_run"
    with pytest.raises(ValueError) as raised:
        Pretraining(tiny_config(), options(run_dir)).train(dataset_fn(str(damaged)), source=str(damaged))
    assert re.fullmatch(rf"The training data {re.escape(str(damaged))} is damaged: corrupted record at "
                        rf"{3 * record + 12} \(after 3 good records\)\. Training stopped at step \d+ and no "
                        rf"checkpoint had been saved in {re.escape(str(run_dir))} yet: write the shard again, or "
                        "leave it out of --input_file, and rerun to resume.", str(raised.value))
