"""AlbertFeedForward: the feed-forward half of a block, with its post-LN (the original's LayerNorm_1)."""

import keras
import tensorflow as tf

from albert_tf.layers.activations import activation_with_derivative, get_activation
from albert_tf.layers.fused_elementwise import xla_fused
from albert_tf.layers.initializers import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.layers.layer_normalization import AlbertLayerNormalization
from albert_tf.layers.recomputation import ordered_input_for_recomputation
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.layers.shared_weight_copies import dense_variables, dense_weight


# An XLA-compiled function's output is a tensor of its own: Grappler folds a plain tf.transpose back into the
# matmul that consumes it.
_transposed_copy = xla_fused(tf.transpose)


def _kernel_and_bias_gradients(projected, kernel, upstream_rows):
    """A projection's kernel and bias gradients from what it multiplied and its upstream gradient as rows."""
    kernel_grad = tf.matmul(tf.reshape(projected, [-1, kernel.shape[0]]), upstream_rows, transpose_a=True)
    return kernel_grad, tf.reduce_sum(upstream_rows, axis=0)


def input_projection(inputs, kernel, bias):
    """`inputs · kernel + bias` over the last axis, the feed-forward's W1 in training, as Keras's Dense computes it.

    In float32 the input gradient multiplies by a transposed copy of the kernel: oneDNN's `upstream · kernelᵀ`
    with the transpose folded into the product ran 27% slower than the product with the kernel transposed in
    memory at ALBERT-base's [1024, 3072] x [3072, 768] (BUILD_NOTES.md, "Speed and memory"), which outweighs the
    copy. In bfloat16 both forms cost the same and the product transposes in place.

    Example:
    >>> x = tf.constant([[1.0, 2.0]])
    >>> input_projection(x, tf.constant([[1.0], [0.5]]), tf.constant([0.25])).numpy().tolist()
    [[2.25]]
    """

    @tf.custom_gradient
    def project(inputs, kernel, bias):
        output = tf.tensordot(inputs, kernel, axes=1) + bias

        def gradient(upstream):
            upstream_rows = tf.reshape(upstream, [-1, kernel.shape[-1]])
            if kernel.dtype == tf.float32:
                # Made only once the upstream gradient exists: it depends on the kernel alone, so TensorFlow's
                # executor would otherwise copy it at the step's start and hold every depth's copy through the
                # forward pass (12 x 9 MiB at ALBERT-base).
                with tf.control_dependencies([upstream]):
                    transposed_kernel = _transposed_copy(kernel)
                input_grad = tf.matmul(upstream_rows, transposed_kernel)
            else:
                input_grad = tf.matmul(upstream_rows, kernel, transpose_b=True)
            return (tf.reshape(input_grad, tf.shape(inputs)),
                    *_kernel_and_bias_gradients(inputs, kernel, upstream_rows))

        return output, gradient

    return project(inputs, kernel, bias)


def activated_projection(pre_activation, kernel, bias, activation, fused=True):
    """`activation(pre_activation) · kernel + bias`, over the last axis; the gradient recomputes the activation.

    Only `pre_activation` is kept for the backward pass: the activated [batch, seq, intermediate] tensor
    that W2's kernel gradient needs is recomputed there (one elementwise pass), not held from the forward
    pass. At ALBERT-base, batch 8 x 128, that is 151 MB less for XLA to hold across the 12 depths
    (BUILD_NOTES.md, "Speed and memory"). For the activations of `activation_with_derivative`, the
    recomputation gives the activation and its derivative from one pass (one tanh for GELU), and with `fused`
    the forward activation runs in the same XLA-fused form (left out for inference: exporters such as tf2onnx
    cannot convert an XLA-compiled function call).

    Example:
    >>> x = tf.constant([[-1.0, 2.0]])
    >>> kernel, bias = tf.constant([[1.0], [0.5]]), tf.constant([0.25])
    >>> activated_projection(x, kernel, bias, tf.nn.relu).numpy().tolist()
    [[1.25]]
    """

    with_derivative = activation_with_derivative(activation)
    forward_activation = with_derivative.value if fused and with_derivative is not None else activation

    def activated_and_input_gradient(recomputed_input, activated_grad):
        if with_derivative is not None:
            return with_derivative.value_and_input_gradient(recomputed_input, activated_grad)
        with tf.GradientTape() as tape:
            tape.watch(recomputed_input)
            activated = activation(recomputed_input)
        return activated, tape.gradient(activated, recomputed_input, output_gradients=activated_grad)

    @tf.custom_gradient
    def project(pre_activation, kernel, bias):
        output = tf.tensordot(forward_activation(pre_activation), kernel, axes=1) + bias

        def gradient(upstream):
            recomputed_input = ordered_input_for_recomputation(pre_activation, upstream)
            # Matmuls on [tokens, features] with transposed operands, where tensordot would first transpose
            # W2 and the recomputed activation (a [tokens, intermediate] copy per depth).
            upstream_rows = tf.reshape(upstream, [-1, upstream.shape[-1]])
            activated_grad = tf.reshape(tf.matmul(upstream_rows, kernel, transpose_b=True),
                                        tf.shape(pre_activation))
            activated, input_grad = activated_and_input_gradient(recomputed_input, activated_grad)
            return (input_grad, *_kernel_and_bias_gradients(activated, kernel, upstream_rows))

        return output, gradient

    return project(pre_activation, kernel, bias)


class AlbertFeedForward(keras.layers.Layer):
    """`LN(x + dropout(W2 · act(W1 · x)))`.

    Sublayer names follow the original's nesting: `intermediate` (W1) and `output` (W2, which the
    TF1 checkpoint stores under `ffn_1/intermediate/output/dense`).

    Example:
    >>> layer = AlbertFeedForward(hidden_size=16, intermediate_size=64)
    >>> layer(keras.ops.zeros([1, 3, 16])).shape
    TensorShape([1, 3, 16])
    """

    def __init__(self, hidden_size, intermediate_size, hidden_act="gelu", hidden_dropout_prob=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        initializer = truncated_normal(initializer_range)
        self.activation = get_activation(hidden_act)
        # W1 without its activation: the activation runs inside `activated_projection` with W2.
        self.intermediate = keras.layers.Dense(intermediate_size, kernel_initializer=initializer, name="intermediate",
                                               dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=initializer, name="output",
                                               dtype=self.dtype_policy)
        self.layer_norm = AlbertLayerNormalization(epsilon=LAYER_NORM_EPSILON, name="LayerNorm_1",
                                                   dtype=self.dtype_policy)
        self.dropout = ReplicaDropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def projection_variables(self):
        """W1's and W2's kernels and biases, by the names `projection_weights` takes them under."""
        return dense_variables(self.intermediate, self.output_dense)

    def call(self, hidden_states, training=False, projection_weights=None):
        """`projection_weights`, W1's and W2's weights in the compute dtype by their `projection_variables`
        names (the encoder's once-a-step copies of a shared half), replace the layers' own reads."""
        compute_dtype = self.output_dense.compute_dtype

        def weight(dense, part):
            return dense_weight(dense, part, compute_dtype, projection_weights)

        if training or projection_weights is not None:
            pre_activation = input_projection(tf.cast(hidden_states, compute_dtype),
                                              weight(self.intermediate, "kernel"), weight(self.intermediate, "bias"))
        else:
            pre_activation = self.intermediate(hidden_states)
        projected = activated_projection(pre_activation, weight(self.output_dense, "kernel"),
                                         weight(self.output_dense, "bias"), self.activation, fused=bool(training))
        ffn_output = self.dropout(projected, training=training)
        return self.layer_norm(ffn_output + hidden_states, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                      hidden_act=self.hidden_act, hidden_dropout_prob=self.hidden_dropout_prob,
                      initializer_range=self.initializer_range)
        return config
