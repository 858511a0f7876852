"""tf.distribute strategy selection by name, with clear errors instead of hangs."""

import json
import os
import socket

import tensorflow as tf

STRATEGY_NAMES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")

_TF_CONFIG_EXAMPLE = ('{"cluster": {"worker": ["host1:port", "host2:port"]}, '
                      '"task": {"type": "worker", "index": 0}}')
_TPU_CONNECT_TIMEOUT_S = 10


def get_strategy(name, tpu=None):
    """The tf.distribute.Strategy called `name`; create it before any model, optimizer or dataset.

    - `one_device`: the first GPU if there is one, else the CPU.
    - `mirrored`: all local GPUs; without GPUs, all logical CPU devices (configure several with
      `tf.config.set_logical_device_configuration` to test data parallelism on one CPU).
    - `multi_worker_mirrored`: synchronous data parallelism across the workers listed in the TF_CONFIG
      environment variable; every worker runs the same command with its own `task.index`.
    - `tpu`: `tpu` is a Cloud TPU name or a `grpc://host:port` address; without one, local TPU devices.

    Example:
    >>> strategy = get_strategy("one_device")
    >>> strategy.num_replicas_in_sync
    1
    """
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        if tf.config.list_logical_devices("GPU"):
            return tf.distribute.MirroredStrategy()
        return tf.distribute.MirroredStrategy([device.name for device in tf.config.list_logical_devices("CPU")])
    if name == "multi_worker_mirrored":
        check_tf_config(os.environ.get("TF_CONFIG"))
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _tpu_strategy(tpu)
    raise ValueError(f"Unknown strategy {name!r}; allowed: {', '.join(STRATEGY_NAMES)}.")


def check_tf_config(tf_config):
    """Raises ValueError unless `tf_config` (the TF_CONFIG text) describes a cluster and this task in it."""
    if not tf_config:
        raise ValueError("--strategy=multi_worker_mirrored needs the TF_CONFIG environment variable, e.g. "
                         f"TF_CONFIG='{_TF_CONFIG_EXAMPLE}'; it is not set.")
    try:
        config = json.loads(tf_config)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); expected e.g. {_TF_CONFIG_EXAMPLE}.") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not any(cluster.get(job) for job in ("chief", "worker")):
        raise ValueError(f"TF_CONFIG needs a 'cluster' with a non-empty 'worker' (or 'chief') list of "
                         f"host:port addresses, got {tf_config!r}; expected e.g. {_TF_CONFIG_EXAMPLE}.")
    if not isinstance(task, dict) or task.get("type") not in cluster:
        raise ValueError(f"TF_CONFIG 'task' must name a job of the cluster ({', '.join(cluster)}) as "
                         f"'type', got {task!r}; expected e.g. {_TF_CONFIG_EXAMPLE}.")
    index, addresses = task.get("index"), cluster[task["type"]]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(addresses):
        raise ValueError(f"TF_CONFIG task index {index!r} is not an index into the {len(addresses)} "
                         f"{task['type']!r} address(es) {addresses}.")


def _tpu_strategy(tpu):
    if not tpu and not tf.config.list_physical_devices("TPU"):
        raise ValueError("--strategy=tpu needs --tpu (a Cloud TPU name or grpc://host:port address) or a local "
                         "TPU, and this machine has no TPU device; use one_device, mirrored or "
                         "multi_worker_mirrored here.")
    if tpu and tpu.startswith("grpc://"):
        _check_reachable(tpu)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "local")
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"Could not resolve TPU {tpu!r} ({error}); give a grpc://host:port address or a "
                         "Cloud TPU name visible from this VM.") from None
    if tpu:
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _check_reachable(address):
    """Fails within a few seconds when nothing listens at a grpc:// address (connecting would block)."""
    host, _, port = address[len("grpc://"):].rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--tpu={address!r} is not a grpc://host:port address.")
    try:
        socket.create_connection((host, int(port)), timeout=_TPU_CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise ValueError(f"No TPU answers at --tpu={address!r} ({error}); check the address and that the "
                         "TPU is running.") from None
