"""AlbertLayerNormalization: Keras's LayerNormalization over the last axis, fused in training, with a lean gradient."""

import keras
import tensorflow as tf

from albert_tf.layers.fused import xla_fused


@xla_fused
def _normalized_and_statistics(inputs, gamma, beta, epsilon):
    # Keras's (and the original's tf.contrib layer_norm) order of operations: inv = rsqrt(var + eps) * gamma,
    # x * inv + (beta - mean * inv), in float32.
    inputs_float32 = tf.cast(inputs, tf.float32)
    mean, variance = tf.nn.moments(inputs_float32, axes=[-1], keepdims=True)
    reciprocal_std = tf.math.rsqrt(variance + epsilon)
    inverse = reciprocal_std * gamma
    outputs = inputs_float32 * inverse + (-mean * inverse + beta)
    return tf.cast(outputs, inputs.dtype), mean, reciprocal_std


@xla_fused
def _input_and_parameter_gradients(inputs, gamma, mean, reciprocal_std, upstream):
    normalized = (tf.cast(inputs, tf.float32) - mean) * reciprocal_std
    upstream_float32 = tf.cast(upstream, tf.float32)
    scaled_upstream = upstream_float32 * gamma
    input_gradient = reciprocal_std * (
        scaled_upstream - tf.reduce_mean(scaled_upstream, axis=-1, keepdims=True)
        - normalized * tf.reduce_mean(scaled_upstream * normalized, axis=-1, keepdims=True))
    row_axes = list(range(len(inputs.shape) - 1))
    return (tf.cast(input_gradient, inputs.dtype), tf.reduce_sum(upstream_float32 * normalized, axis=row_axes),
            tf.reduce_sum(upstream_float32, axis=row_axes))


def layer_normalization(inputs, gamma, beta, epsilon):
    """LayerNorm over the last axis in float32, returned in the inputs' dtype; one fused loop each way.

    The gradient keeps only `inputs` and two numbers a row. Autodiff through Keras's formula also keeps
    `rsqrt(var + eps) * gamma` broadcast to the inputs' shape and the inputs cast to float32: on TensorFlow's
    kernels at ALBERT-base, batch 8 x 128, 3 MiB more per LayerNorm, 24 of them (BUILD_NOTES.md, "Speed and
    memory").

    Example:
    >>> outputs = layer_normalization(tf.constant([[1.0, 3.0]]), tf.ones([2]), tf.zeros([2]), 1e-12)
    >>> [round(value, 4) for value in outputs.numpy()[0].tolist()]
    [-1.0, 1.0]
    """
    epsilon = float(epsilon)

    @tf.custom_gradient
    def normalize(inputs, gamma, beta):
        outputs, mean, reciprocal_std = _normalized_and_statistics(inputs, gamma, beta, epsilon)

        def gradient(upstream):
            return _input_and_parameter_gradients(inputs, gamma, mean, reciprocal_std, upstream)

        return outputs, gradient

    return normalize(inputs, tf.convert_to_tensor(gamma, tf.float32), tf.convert_to_tensor(beta, tf.float32))


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertLayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis (its variables, names and config), which in training
    runs `layer_normalization`: the same numbers, in one XLA-fused loop forward and one backward.

    Inference keeps Keras's own ops: exporters (tf2onnx, TFLite) cannot convert an XLA-compiled function call.

    Example:
    >>> layer = AlbertLayerNormalization(epsilon=1e-12, name="LayerNorm")
    >>> outputs = layer(tf.constant([[1.0, 3.0]]), training=True)
    >>> [round(value, 4) for value in outputs.numpy()[0].tolist()], [v.name for v in layer.weights]
    ([-1.0, 1.0], ['gamma', 'beta'])
    """

    def __init__(self, epsilon=1e-3, **kwargs):
        super().__init__(epsilon=epsilon, **kwargs)
        if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
            raise ValueError(f"AlbertLayerNormalization normalizes the last axis with gamma and beta; got "
                             f"axis={self.axis}, center={self.center}, scale={self.scale}, "
                             f"rms_scaling={self.rms_scaling}.")

    def call(self, inputs, training=False):
        if not training:
            return super().call(inputs)
        return tf.cast(layer_normalization(inputs, self.gamma, self.beta, self.epsilon), self.compute_dtype)
