"""SquadV2Head: the original's XLNet-style SQuAD 2.0 head (start, start-conditioned end, answerability)."""

import keras
import tensorflow as tf

from albert_tf.layers.initializers import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.layers.masked_lm_head import gather_positions
from albert_tf.layers.replica_dropout import ReplicaDropout

_MASKED_LOGIT = 1e30


def _mask_logits(logits, p_mask):
    return logits * (1.0 - p_mask) - _MASKED_LOGIT * p_mask


class SquadV2Head(keras.layers.Layer):
    """squad_utils.create_v2_model's head.

    - start logits: a dense to 1 at every position, positions with p_mask = 1 pushed to -1e30.
    - end logits: conditioned on the start's hidden state, `dense_1(LN(tanh(dense_0([h; h_start]))))`.
      In training the gold start is used; at inference a beam of `start_n_top` starts, each with its
      `end_n_top` best ends.
    - answerability: `dense_1(dropout(tanh(dense_0([start-weighted state; CLS state]))))`, no bias in dense_1.

    Call with the sequence output [B, S, H] and p_mask [B, S] (1 = cannot be part of the answer),
    plus `start_positions` [B] for training. Training returns start_log_probs, end_log_probs [B, S] and
    cls_logits [B]; inference returns start_top_log_probs / start_top_index [B, start_n_top],
    end_top_log_probs / end_top_index [B, start_n_top * end_n_top] and cls_logits.

    Example:
    >>> head = SquadV2Head(hidden_size=8, start_n_top=2, end_n_top=3)
    >>> outputs = head(tf.random.normal([1, 6, 8]), tf.zeros([1, 6]))
    >>> outputs["end_top_index"].shape
    TensorShape([1, 6])
    """

    def __init__(self, hidden_size, start_n_top=5, end_n_top=5, dropout_rate=0.1, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self._convert_input_args = False

        def dense(units, name, activation=None, use_bias=True):
            return keras.layers.Dense(
                units, activation=activation, use_bias=use_bias, name=name, dtype=self.dtype_policy,
                kernel_initializer=truncated_normal(initializer_range))

        self.start_dense = dense(1, "start_logits")
        self.end_dense_0 = dense(hidden_size, "end_logits_dense_0", activation="tanh")
        self.end_layer_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="end_logits_LayerNorm",
                                                              dtype=self.dtype_policy)
        self.end_dense_1 = dense(1, "end_logits_dense_1")
        self.answer_dense_0 = dense(hidden_size, "answer_class_dense_0", activation="tanh")
        self.answer_dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy)
        self.answer_dense_1 = dense(1, "answer_class_dense_1", use_bias=False)

    def build(self, input_shape=None):
        self.start_dense.build((None, self.hidden_size))
        self.end_dense_0.build((None, 2 * self.hidden_size))
        self.end_layer_norm.build((None, self.hidden_size))
        self.end_dense_1.build((None, self.hidden_size))
        self.answer_dense_0.build((None, 2 * self.hidden_size))
        self.answer_dense_1.build((None, self.hidden_size))
        self.built = True

    def _end_logits(self, sequence_output, start_features):
        """sequence_output [B, S, H] and start_features [B, K, H] -> end logits [B, K, S]."""
        seq_length = tf.shape(sequence_output)[1]
        num_starts = tf.shape(start_features)[1]
        per_start = tf.tile(sequence_output[:, tf.newaxis], [1, num_starts, 1, 1])
        start_tiled = tf.tile(start_features[:, :, tf.newaxis], [1, 1, seq_length, 1])
        hidden = self.end_dense_0(tf.concat([per_start, start_tiled], axis=-1))
        logits = self.end_dense_1(self.end_layer_norm(hidden))
        return tf.cast(tf.squeeze(logits, -1), tf.float32)

    def call(self, sequence_output, p_mask, start_positions=None, training=False):
        sequence_output = tf.cast(sequence_output, self.compute_dtype)
        p_mask = tf.cast(p_mask, tf.float32)
        start_logits = _mask_logits(tf.cast(tf.squeeze(self.start_dense(sequence_output), -1), tf.float32), p_mask)
        start_log_probs = tf.nn.log_softmax(start_logits, -1)
        outputs = {}
        if start_positions is not None:
            start_features = gather_positions(sequence_output, tf.reshape(start_positions, [-1, 1]))
            end_logits = _mask_logits(self._end_logits(sequence_output, start_features)[:, 0], p_mask)
            outputs.update(start_log_probs=start_log_probs, end_log_probs=tf.nn.log_softmax(end_logits, -1))
        else:
            start_top_log_probs, start_top_index = tf.nn.top_k(start_log_probs, k=self.start_n_top)
            start_features = gather_positions(sequence_output, start_top_index)
            end_logits = _mask_logits(self._end_logits(sequence_output, start_features), p_mask[:, tf.newaxis])
            end_top_log_probs, end_top_index = tf.nn.top_k(tf.nn.log_softmax(end_logits, -1), k=self.end_n_top)
            flat = [-1, self.start_n_top * self.end_n_top]
            outputs.update(start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                           end_top_log_probs=tf.reshape(end_top_log_probs, flat),
                           end_top_index=tf.reshape(end_top_index, flat))

        start_probs = tf.cast(tf.nn.softmax(start_logits, -1), sequence_output.dtype)
        start_feature = tf.einsum("bsh,bs->bh", sequence_output, start_probs)
        answer_feature = tf.concat([start_feature, sequence_output[:, 0]], axis=-1)
        answer_hidden = self.answer_dropout(self.answer_dense_0(answer_feature), training=training)
        outputs["cls_logits"] = tf.cast(tf.squeeze(self.answer_dense_1(answer_hidden), -1), tf.float32)
        return outputs

    def variable_map(self):
        """TF1 names, as create_v2_model's variable scopes produce them."""
        return {
            "start_logits/dense/kernel": self.start_dense.kernel, "start_logits/dense/bias": self.start_dense.bias,
            "end_logits/dense_0/kernel": self.end_dense_0.kernel, "end_logits/dense_0/bias": self.end_dense_0.bias,
            "end_logits/LayerNorm/gamma": self.end_layer_norm.gamma,
            "end_logits/LayerNorm/beta": self.end_layer_norm.beta,
            "end_logits/dense_1/kernel": self.end_dense_1.kernel, "end_logits/dense_1/bias": self.end_dense_1.bias,
            "answer_class/dense_0/kernel": self.answer_dense_0.kernel,
            "answer_class/dense_0/bias": self.answer_dense_0.bias,
            "answer_class/dense_1/kernel": self.answer_dense_1.kernel,
        }

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                      dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config
