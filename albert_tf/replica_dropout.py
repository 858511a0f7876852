"""ReplicaDropout: dropout that draws an independent mask on every replica of a tf.distribute strategy."""

import keras
import tensorflow as tf


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
        replica_context = tf.distribute.get_replica_context()
        if (not training or self.rate == 0.0 or replica_context is None
                or replica_context.num_replicas_in_sync == 1):
            return super().call(inputs, training=training)
        seed = tf.random.experimental.stateless_fold_in(
            tf.cast(self.seed_generator.next(), tf.int64),
            tf.cast(replica_context.replica_id_in_sync_group, tf.int64))
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed,
                                                    noise_shape=self._concrete_noise_shape(inputs))

    def _concrete_noise_shape(self, inputs):
        if self.noise_shape is None:
            return None
        shape = tf.shape(inputs)
        return tf.stack([shape[axis] if size is None else size for axis, size in enumerate(self.noise_shape)])
