"""Strategy selection, and the training loop under MirroredStrategy and MultiWorkerMirroredStrategy.

Logical CPU devices and TF_CONFIG must be set before TensorFlow initialises, so the multi-replica runs
are subprocesses (tests/_toy_training.py) with bounded timeouts.
"""
import contextlib
import json
import os
import socket
import subprocess
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import distribution
from tests import _toy_training as toy
from tests import forked_scripts
from tests.helpers import TOY_SCRIPT, run_python, script_environment

TOY_FLAGS = ["--num_train_steps=6", "--global_batch_size=8", "--deterministic", "--save_checkpoints_steps=3",
             "--steps_per_loop=2"]
TIMEOUT_S = 300  # bounded, with room for a loaded 2-core machine


def test_unknown_name_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'; allowed: one_device, mirrored, "
                                         "multi_worker_mirrored, tpu"):
        distribution.get_strategy("gpu")


def test_tpu_without_a_tpu_fails_fast():
    start = time.monotonic()
    with pytest.raises(ValueError, match="--strategy=tpu needs --tpu"):
        distribution.get_strategy("tpu")
    with contextlib.closing(socket.socket()) as listener:
        listener.bind(("127.0.0.1", 0))
        closed_port = listener.getsockname()[1]
    with pytest.raises(ValueError, match=f"No TPU answers at --tpu='grpc://127.0.0.1:{closed_port}'"):
        distribution.get_strategy("tpu", tpu=f"grpc://127.0.0.1:{closed_port}")
    with pytest.raises(ValueError, match="not a grpc://host:port address"):
        distribution.get_strategy("tpu", tpu="grpc://no-port")
    assert time.monotonic() - start < 15


def test_one_device_uses_the_cpu_without_a_gpu():
    strategy = distribution.get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.num_replicas_in_sync == 1
    assert strategy.extended.worker_devices[0].endswith("CPU:0")


@pytest.mark.parametrize("tf_config, message", [
    (None, "needs the TF_CONFIG environment variable"),
    ("{cluster", "TF_CONFIG is not valid JSON"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "non-empty 'worker'"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "must name a job of the cluster"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
     r"task index 2 is not an index into the 2 'worker' address\(es\)"),
])
def test_multi_worker_needs_a_valid_tf_config(monkeypatch, tf_config, message):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ValueError, match=message):
        distribution.get_strategy("multi_worker_mirrored")


def _start_toy(model_dir, *flags, **env):
    """Starts a toy run; its output goes to files beside model_dir, so a full pipe can never block it."""
    log = open(f"{model_dir}.log", "w+")
    process = forked_scripts.popen([TOY_SCRIPT, f"--model_dir={model_dir}", *TOY_FLAGS, *flags],
                                   env=script_environment(**env), stdout=log, stderr=subprocess.STDOUT)
    process.log = log
    return process


def _results(processes):
    """Waits for every process and returns their RESULT dicts; a failure or the timeout stops them all."""
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and any(p.poll() is None for p in processes):
            if any(p.poll() not in (None, 0) for p in processes):
                break  # a worker died: the others would wait for it in a collective until the deadline
            time.sleep(0.2)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    outputs = []
    for process in processes:
        process.log.seek(0)
        outputs.append(process.log.read())
        process.log.close()
    failures = [f"exit {p.returncode}:\n{output[-3000:]}" for p, output in zip(processes, outputs) if p.returncode]
    assert not failures, "\n\n".join(failures)
    return [json.loads(output.split("RESULT ")[-1].splitlines()[0]) for output in outputs]


@pytest.fixture(scope="module")
def one_device_and_mirrored(tmp_path_factory):
    """The same run (TOY_FLAGS) on one device, in this process, and on 2 logical CPUs, in a subprocess."""
    root = tmp_path_factory.mktemp("runs")
    mirrored = _start_toy(root / "mirrored", "--strategy=mirrored", "--logical_cpus=2", "--eval_examples=29")
    keras.utils.set_random_seed(1234)  # as --deterministic does, so the initial weights are the same
    trainer = toy.build(tf.distribute.OneDeviceStrategy("/cpu:0"), str(root / "one_device"), num_train_steps=6,
                        steps_per_loop=2, save_checkpoints_steps=3)
    one_device = toy.train_and_report(trainer, num_train_steps=6, global_batch_size=8, eval_examples=29)
    return one_device, _results([mirrored])[0]


@pytest.mark.slow
def test_mirrored_on_two_logical_cpus_matches_one_device(one_device_and_mirrored):
    one_device, mirrored = one_device_and_mirrored
    assert (one_device["replicas"], mirrored["replicas"]) == (1, 2)
    assert mirrored["loss"] == pytest.approx(one_device["loss"], rel=1e-5)
    for name in ("accuracy", "loss"):
        assert mirrored["evaluation"][name] == pytest.approx(one_device["evaluation"][name], rel=1e-5)
    # 29 examples in per-replica batches of 4: the last step gives one replica 4 examples, the other 1.
    assert mirrored["predictions"]["example_id"] == list(range(29))
    np.testing.assert_allclose(mirrored["predictions"]["logits"], one_device["predictions"]["logits"], atol=1e-5)
    for mirrored_weight, one_device_weight in zip(mirrored["weights"], one_device["weights"]):
        np.testing.assert_allclose(mirrored_weight, one_device_weight, rtol=0, atol=1e-5)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
def test_two_workers_write_one_checkpoint_and_match_one_worker(tmp_path, one_device_and_mirrored):
    one_device, _ = one_device_and_mirrored
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(_start_toy(tmp_path / "model", "--strategy=multi_worker_mirrored",
                                    TF_CONFIG=json.dumps(tf_config)))
    chief, other = _results(processes)

    assert chief["replicas"] == other["replicas"] == 2
    assert chief["loss"] == pytest.approx(one_device["loss"], rel=1e-5)
    for chief_weight, other_weight, one_device_weight in zip(chief["weights"], other["weights"],
                                                             one_device["weights"]):
        np.testing.assert_array_equal(chief_weight, other_weight)
        np.testing.assert_allclose(chief_weight, one_device_weight, rtol=0, atol=1e-5)
    assert sorted(os.listdir(tmp_path / "model")) == [
        "checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index", "ckpt-6.data-00000-of-00001", "ckpt-6.index"]
    restored = toy.make_model()
    tf.train.Checkpoint(model=restored).restore(str(tmp_path / "model" / "ckpt-6")).expect_partial()
    for restored_weight, chief_weight in zip(restored.weights, chief["weights"]):
        np.testing.assert_array_equal(restored_weight.numpy(), chief_weight)


_REPLICA_DROPOUT_SCRIPT = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.layers.replica_dropout import ReplicaDropout

layer_class = ReplicaDropout if sys.argv[1] == "replica" else keras.layers.Dropout
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    layer = layer_class(0.5, seed=3)
    encoder = AlbertEncoder(AlbertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=32, embedding_size=8, hidden_dropout_prob=0.5))
inputs = {"input_word_ids": tf.fill([2, 5], 7), "input_mask": tf.ones([2, 5], tf.int32),
          "input_type_ids": tf.zeros([2, 5], tf.int32)}

@tf.function
def step():
    return strategy.run(lambda: (layer(tf.ones([4, 64]), training=True),
                                 encoder(inputs, training=True)["sequence_output"]))

first, second = step(), step()
masks = strategy.experimental_local_results(first[0])
encoded = strategy.experimental_local_results(first[1])
print("RESULT " + json.dumps({
    "masks_differ": bool(tf.reduce_any(masks[0] != masks[1])),
    "next_step_differs": bool(tf.reduce_any(masks[0] != strategy.experimental_local_results(second[0])[0])),
    "kept": [float(tf.reduce_mean(tf.cast(mask > 0, tf.float32))) for mask in masks],
    "encoder_outputs_differ": bool(tf.reduce_any(encoded[0] != encoded[1]))}))
"""


def _two_cpu_script_result(script, *args):
    result = run_python("-c", script, *args, timeout=TIMEOUT_S, TF_CPP_MIN_LOG_LEVEL="3")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.split("RESULT ")[-1].splitlines()[0])


def _replica_dropout_result(layer_class):
    return _two_cpu_script_result(_REPLICA_DROPOUT_SCRIPT, layer_class)


@pytest.mark.slow
def test_each_replica_draws_its_own_dropout_mask():
    """As the original on TPU cores; keras.layers.Dropout draws one mask for every replica (checked too, so
    this test notices if Keras changes)."""
    replica = _replica_dropout_result("replica")
    assert replica["masks_differ"] and replica["next_step_differs"]
    assert all(0.35 < kept < 0.65 for kept in replica["kept"])
    # Identical inputs on both replicas: only the encoder's dropout masks can make them differ.
    assert replica["encoder_outputs_differ"]
    assert not _replica_dropout_result("keras")["masks_differ"]


_RECOMPUTED_MIRRORED_SCRIPT = """
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from albert_tf import AlbertConfig, AlbertEncoder

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
config = AlbertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, embedding_size=8, hidden_dropout_prob=0.2)
encoders = []
for recompute_blocks in (False, True):
    keras.utils.set_random_seed(3)
    with strategy.scope():
        encoders.append(AlbertEncoder(config, recompute_blocks=recompute_blocks))
encoders[1].set_weights(encoders[0].get_weights())
rng = np.random.default_rng(0)
inputs = {"input_word_ids": tf.constant(rng.integers(0, 30, (4, 5)), tf.int32),
          "input_mask": tf.ones([4, 5], tf.int32), "input_type_ids": tf.zeros([4, 5], tf.int32)}
batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(inputs))))
gradients = []
for encoder in encoders:
    @tf.function
    def step(batch):
        def replica_fn(batch):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.tanh(encoder(batch, training=True)["sequence_output"] * 1.3))
            grads = tape.gradient(loss, encoder.trainable_variables)
            return tf.distribute.get_replica_context().all_reduce(
                "sum", [tf.convert_to_tensor(g) for g in grads if g is not None])
        return strategy.run(replica_fn, args=(batch,))
    gradients.append([strategy.experimental_local_results(g)[0].numpy() for g in step(batch)])
print("RESULT " + json.dumps({"count": len(gradients[1]),
                              "max_difference": max(float(np.max(np.abs(a - b))) for a, b in zip(*gradients))}))
"""


@pytest.mark.slow
def test_recomputed_blocks_under_mirrored_strategy_replay_each_replicas_dropout():
    """Each replica draws its own masks (folded seeds); its re-run must replay exactly those."""
    result = _two_cpu_script_result(_RECOMPUTED_MIRRORED_SCRIPT)
    assert result["count"] > 0
    assert result["max_difference"] < 1e-5
