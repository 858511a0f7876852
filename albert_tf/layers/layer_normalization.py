"""AlbertLayerNormalization: Keras's LayerNormalization over the last axis, fused in training, with a lean gradient."""

import keras
import tensorflow as tf

from albert_tf.layers.fused_elementwise import traced_for_xla, xla_fused


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


def _gradients_of_normalized(normalized, gamma, reciprocal_std, upstream, input_dtype):
    upstream_float32 = tf.cast(upstream, tf.float32)
    scaled_upstream = upstream_float32 * gamma
    input_gradient = reciprocal_std * (
        scaled_upstream - tf.reduce_mean(scaled_upstream, axis=-1, keepdims=True)
        - normalized * tf.reduce_mean(scaled_upstream * normalized, axis=-1, keepdims=True))
    return (tf.cast(input_gradient, input_dtype), _column_sums(upstream_float32 * normalized),
            _column_sums(upstream_float32))


def _column_sums(tensor):
    """The sums over every axis but the last, as a product with ones: XLA:CPU turns a reduction over the rows
    into strided partial sums (reduce-window) that took twice the time of the whole product. Two rows of ones,
    since XLA takes a single row for a vector product and leaves the GEMM path."""
    channels = tensor.shape[-1] if tensor.shape.rank is not None else None
    rows = tf.reshape(tensor, [-1, channels if channels is not None else tf.shape(tensor)[-1]])
    return tf.matmul(tf.ones([2, tf.shape(rows)[0]], rows.dtype), rows)[0]


@xla_fused
def _gradients_from_inputs(inputs, gamma, mean, reciprocal_std, upstream):
    normalized = (tf.cast(inputs, tf.float32) - mean) * reciprocal_std
    return _gradients_of_normalized(normalized, gamma, reciprocal_std, upstream, inputs.dtype)


@xla_fused
def _gradients_from_outputs(outputs, gamma, beta, reciprocal_std, upstream):
    return _gradients_of_normalized((outputs - beta) / gamma, gamma, reciprocal_std, upstream, outputs.dtype)


@xla_fused
def _gradients_from_normalized(normalized, gamma, reciprocal_std, upstream):
    return _gradients_of_normalized(normalized, gamma, reciprocal_std, upstream, tf.float32)


# A channel's normalized input is recovered from the output as (y - beta) / gamma within a few float32 roundings
# where |gamma| >= |beta| / 16: the output's rounding error, about eps * (|gamma * x_hat| + |beta|), divided by
# gamma. Channels below that (gamma 0 among them) keep their inputs.
_RECOVERABLE_BETA_TO_GAMMA = 16.0
_SMALLEST_RECOVERABLE_GAMMA = 1e-30


def _unrecoverable_channels(gamma, beta):
    magnitude = tf.abs(gamma)
    recoverable = (magnitude * _RECOVERABLE_BETA_TO_GAMMA >= tf.abs(beta)) & (magnitude >= _SMALLEST_RECOVERABLE_GAMMA)
    return tf.reshape(tf.where(tf.logical_not(recoverable)), [-1])


def _gradients_from_outputs_and_kept_channels(outputs, kept_inputs, kept_channels, gamma, beta, mean,
                                              reciprocal_std, upstream):
    def with_kept_channels():
        recovered = (outputs - beta) / gamma
        exact = (kept_inputs - mean) * reciprocal_std
        # Channel c of [recovered, exact] side by side: c itself, or the kept channel's place after the others.
        channels = tf.size(gamma, out_type=tf.int64)
        positions = tf.tensor_scatter_nd_update(tf.range(channels), kept_channels[:, tf.newaxis],
                                                channels + tf.range(tf.size(kept_channels, out_type=tf.int64)))
        normalized = tf.gather(tf.concat([recovered, exact], axis=-1), positions, axis=-1)
        return _gradients_from_normalized(normalized, gamma, reciprocal_std, upstream)

    return tf.cond(tf.size(kept_channels) > 0, with_kept_channels,
                   lambda: _gradients_from_outputs(outputs, gamma, beta, reciprocal_std, upstream))


def layer_normalization(inputs, gamma, beta, epsilon):
    """LayerNorm over the last axis in float32, returned in the inputs' dtype; one fused loop each way.

    The gradient keeps two numbers a row and, in float32 on TensorFlow's kernels, the outputs, which the next
    layer keeps anyway: it recovers the normalized inputs as `(outputs - beta) / gamma`, within a few float32
    roundings of computing them from the inputs, and keeps the inputs of the rare channels where that is not
    so (|gamma| below |beta| / 16, or 0). That frees the inputs, 3 MiB a LayerNorm at ALBERT-base, batch
    8 x 128, 24 of them. In bfloat16 (the outputs' rounding is too coarse to divide) and under XLA (no
    dynamic shapes) it keeps the inputs. Autodiff through Keras's formula would also keep
    `rsqrt(var + eps) * gamma` broadcast to the inputs' shape and the inputs cast to float32 (BUILD_NOTES.md,
    "Speed and memory").

    Example:
    >>> outputs = layer_normalization(tf.constant([[1.0, 3.0]]), tf.ones([2]), tf.zeros([2]), 1e-12)
    >>> [round(value, 4) for value in outputs.numpy()[0].tolist()]
    [-1.0, 1.0]
    """
    epsilon = float(epsilon)

    @tf.custom_gradient
    def normalize(inputs, gamma, beta):
        outputs, mean, reciprocal_std = _normalized_and_statistics(inputs, gamma, beta, epsilon)
        if inputs.dtype != tf.float32 or traced_for_xla():
            def gradient(upstream):
                return _gradients_from_inputs(inputs, gamma, mean, reciprocal_std, upstream)

            return outputs, gradient

        kept_channels = _unrecoverable_channels(gamma, beta)
        kept_inputs = tf.gather(inputs, kept_channels, axis=-1)

        def gradient_from_outputs(upstream):
            return _gradients_from_outputs_and_kept_channels(outputs, kept_inputs, kept_channels, gamma, beta, mean,
                                                             reciprocal_std, upstream)

        return outputs, gradient_from_outputs

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
