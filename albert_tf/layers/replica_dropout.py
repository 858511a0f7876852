"""ReplicaDropout: dropout that draws an independent mask on every replica of a tf.distribute strategy."""

import contextlib
import threading
from typing import Iterator, List

import keras
import tensorflow as tf


class _SeedLog:
    """The dropout seeds of one recorded forward pass, and how many a replay has used."""

    def __init__(self, seeds: List[tf.Tensor], replaying: bool):
        self.seeds = seeds
        self.replaying = replaying
        self.used = 0


_active_log = threading.local()


@contextlib.contextmanager
def _logging(log: _SeedLog) -> Iterator[List[tf.Tensor]]:
    if getattr(_active_log, "log", None) is not None:
        raise RuntimeError("Dropout seeds are already being recorded or replayed; the contexts do not nest.")
    _active_log.log = log
    try:
        yield log.seeds
    finally:
        _active_log.log = None
    if log.replaying and log.used != len(log.seeds):
        raise RuntimeError(f"The replayed pass used {log.used} dropout seeds; the recorded pass drew "
                           f"{len(log.seeds)}.")


def recording_dropout_seeds() -> "contextlib.AbstractContextManager[List[tf.Tensor]]":
    """Within it, every ReplicaDropout that drops appends the seed it drew to the yielded list."""
    return _logging(_SeedLog([], replaying=False))


def replaying_dropout_seeds(seeds: List[tf.Tensor]) -> "contextlib.AbstractContextManager[List[tf.Tensor]]":
    """Within it, ReplicaDropout layers take `seeds` in order instead of drawing, so they repeat a recorded pass."""
    return _logging(_SeedLog(list(seeds), replaying=True))


class ReplicaDropout(keras.layers.Dropout):
    """keras.layers.Dropout, with the replica id folded into the seed when there are several replicas.

    Keras keeps a Dropout's seed generator in a mirrored variable, so under MirroredStrategy,
    MultiWorkerMirroredStrategy or TPUStrategy every replica would draw the same mask for its
    part of the global batch. The original drew independent masks on each TPU core; so does this
    layer. With a single replica (or outside a strategy) it is exactly keras.layers.Dropout.

    Example:
    >>> layer = ReplicaDropout(0.5, seed=1)
    >>> layer(tf.ones([2, 4]), training=False).numpy().tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """

    def call(self, inputs, training=False):
        if not training or self.rate == 0.0:
            return inputs
        log = getattr(_active_log, "log", None)
        replica_context = tf.distribute.get_replica_context()
        several_replicas = replica_context is not None and replica_context.num_replicas_in_sync > 1
        if log is None and not several_replicas:
            return super().call(inputs, training=training)
        if log is not None and log.replaying:
            if log.used == len(log.seeds):
                raise RuntimeError(f"The replayed pass wants more dropout seeds than the {len(log.seeds)} "
                                   f"recorded (at layer {self.name}).")
            seed = log.seeds[log.used]
            log.used += 1
        else:
            seed = tf.cast(self.seed_generator.next(), tf.int64)
            if several_replicas:
                seed = tf.random.experimental.stateless_fold_in(
                    seed, tf.cast(replica_context.replica_id_in_sync_group, tf.int64))
            # As Keras casts its seeds: int32, which XLA's stateless random ops want.
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
            if log is not None:
                log.seeds.append(seed)
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed,
                                                    noise_shape=self._concrete_noise_shape(inputs))

    def _concrete_noise_shape(self, inputs):
        if self.noise_shape is None:
            return None
        shape = tf.shape(inputs)
        return tf.stack([shape[axis] if size is None else size for axis, size in enumerate(self.noise_shape)])
