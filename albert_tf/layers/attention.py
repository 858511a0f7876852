"""AlbertAttention: the attention half of a block, multi-head self-attention with its post-LN."""

import math

import keras
import tensorflow as tf

from albert_tf.layers.fused_elementwise import attention_probabilities
from albert_tf.layers.initializers import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.layers.layer_normalization import AlbertLayerNormalization
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.layers.shared_weight_copies import dense_variables, dense_weight


class AlbertAttention(keras.layers.Layer):
    """`LN(x + dropout(Wo · softmax(QKᵀ/sqrt(d) + bias) V))`, as the original's attention_ffn_block.

    The post-attention LayerNorm belongs to this half, so sharing attention shares it too
    (paper Table 4 counts it that way). Softmax runs in float32 under mixed precision, with the scale
    and the mask's bias, in training as one XLA-fused loop (albert_tf/layers/fused_elementwise.py).
    `attention_bias` is [B, 1, 1, S] float32, 0 for real tokens and -10000 for padding; the
    encoder computes it once and passes it to every depth. `query_states`, rows of `hidden_states`
    ([B, P, H]), limit the output to those rows: only they are queried, projected and normalized,
    while keys and values still come from every position (the encoder's last block, where the
    heads read only some positions).

    Example:
    >>> layer = AlbertAttention(hidden_size=16, num_attention_heads=2)
    >>> layer(tf.zeros([1, 3, 16]), tf.zeros([1, 1, 1, 3])).shape
    TensorShape([1, 3, 16])
    >>> layer(tf.zeros([1, 3, 16]), tf.zeros([1, 1, 1, 3]), query_states=tf.zeros([1, 2, 16])).shape
    TensorShape([1, 2, 16])
    """

    def __init__(self, hidden_size, num_attention_heads, attention_probs_dropout_prob=0.0,
                 hidden_dropout_prob=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size={hidden_size} must be divisible by "
                             f"num_attention_heads={num_attention_heads}.")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_attention_heads
        # Keras would autocast attention_bias to bfloat16 under mixed precision; the -10000
        # padding bias is added in float32, as in the original.
        self._convert_input_args = False

        def dense(name):
            return keras.layers.Dense(
                hidden_size, name=name, dtype=self.dtype_policy,
                kernel_initializer=truncated_normal(initializer_range))

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("dense")
        self.layer_norm = AlbertLayerNormalization(epsilon=LAYER_NORM_EPSILON, name="LayerNorm",
                                                   dtype=self.dtype_policy)
        self.attention_dropout = ReplicaDropout(attention_probs_dropout_prob, dtype=self.dtype_policy)
        self.output_dropout = ReplicaDropout(hidden_dropout_prob, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        hidden_shape = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.output_dense, self.layer_norm):
            layer.build(hidden_shape)
        self.built = True

    def _split_heads(self, tensor):
        """[batch, seq, hidden] -> [batch, heads, seq, head_size], each head's rows contiguous.

        The attention's two products then run as batched matmuls over contiguous heads: with the heads left
        in place as einsum operands, oneDNN's einsum took 22.4 against 15.9 ms CPU for the forward and
        backward at ALBERT-base, batch 8 x 128, in bfloat16, 30.5 against 18.7 in float32, the transposes
        included (BUILD_NOTES.md, "Speed and memory").
        """
        shape = tf.shape(tensor)
        heads = tf.reshape(tensor, [shape[0], shape[1], self.num_attention_heads, self.head_size])
        return tf.transpose(heads, [0, 2, 1, 3])

    def projection_variables(self):
        """The four projections' kernels and biases, by the names `projection_weights` takes them under."""
        return dense_variables(self.query, self.key, self.value, self.output_dense)

    def call(self, hidden_states, attention_bias, training=False, projection_weights=None, query_states=None):
        """`projection_weights`, the projections' weights in the compute dtype by their `projection_variables`
        names (the encoder's once-a-step copies of a shared half), replace the layers' own reads."""
        hidden_states = tf.cast(hidden_states, self.compute_dtype)
        query_states = hidden_states if query_states is None else tf.cast(query_states, self.compute_dtype)
        attention_bias = tf.cast(attention_bias, tf.float32)

        def weight(dense, part):
            return dense_weight(dense, part, self.compute_dtype, projection_weights)

        def project(dense, inputs):
            if not training and projection_weights is None:
                return dense(inputs)
            # Keras's Dense adds its bias with tf.nn.bias_add, whose gradient in bfloat16 (BiasAddGrad) sums the
            # rows in bfloat16: 3% off at [1024, 768] (BUILD_NOTES.md, "Speed and memory"). A broadcast add's
            # gradient sums them in float32 and rounds once.
            return tf.tensordot(inputs, weight(dense, "kernel"), axes=1) + weight(dense, "bias")

        query = self._split_heads(project(self.query, query_states))
        key = self._split_heads(project(self.key, hidden_states))
        value = self._split_heads(project(self.value, hidden_states))
        scores = tf.matmul(query, key, transpose_b=True)
        scale = 1.0 / math.sqrt(self.head_size)
        if training:
            probs = attention_probabilities(scores, attention_bias, scale)
        else:
            # Unfused for inference: exporters (tf2onnx) cannot convert an XLA-compiled function call.
            probs = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32) * scale + attention_bias, axis=-1),
                            self.compute_dtype)
        probs = self.attention_dropout(probs, training=training)
        context = tf.reshape(tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3]), tf.shape(query_states))
        attention_output = self.output_dropout(project(self.output_dense, context), training=training)
        return self.layer_norm(attention_output + query_states, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                      attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                      hidden_dropout_prob=self.hidden_dropout_prob, initializer_range=self.initializer_range)
        return config
