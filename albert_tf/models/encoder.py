"""AlbertEncoder: factorized embeddings, the shared transformer stack and the pooler."""

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.initializers import truncated_normal
from albert_tf.layers.recomputation import num_recomputed_blocks
from albert_tf.models.block_stack import apply_blocks
from albert_tf.models.sharing import build_sharing_plan

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
ATTENTION_MASK_VALUE = -10000.0


def no_output_positions(word_ids):
    """`output_positions` that ask for no sequence output, [batch, 0]: for heads that read the pooled output alone.

    Example:
    >>> no_output_positions(tf.ones([3, 7], tf.int32)).shape
    TensorShape([3, 0])
    """
    return tf.zeros([tf.shape(word_ids)[0], 0], tf.int32)


def as_config(config) -> AlbertConfig:
    """Accepts an AlbertConfig or its dict form (what get_config stores)."""
    if isinstance(config, AlbertConfig):
        return config
    if isinstance(config, dict):
        return AlbertConfig.from_dict(config)
    raise TypeError(f"Expected an AlbertConfig or a dict, got {type(config).__name__}.")


class AlbertEncoder(keras.Model):
    """The ALBERT encoder.

    Called on a dict of int32 [batch, seq] tensors `input_word_ids`, `input_mask` and
    `input_type_ids`, it returns `sequence_output` [B, S, H], `pooled_output` [B, H] (tanh dense
    on position 0) and `encoder_outputs`, one [B, S, H] tensor per applied block.

    `output_positions`, int [B, P], ask for the sequence output at those positions only, for heads
    that read no others (pretraining's masked positions; P = 0 for the pooled output alone):
    `sequence_output` and the last entry of `encoder_outputs` are then [B, P, H], the full
    output's rows at those positions, and the last block runs its queries, output projection,
    LayerNorms and feed-forward half on those rows and position 0 (the pooler's) alone. The values
    are the same; at ALBERT-base, sequence 128 and 20 positions that is 6% of the encoder's FLOPs
    not spent, 7% with the pooled output alone (BUILD_NOTES.md, "Speed and memory").

    Sharing is by instance: the plan from `build_sharing_plan` lists the unique attention and
    feed-forward halves, and every depth that shares a half calls the same Python layer, so a
    shared kernel is one tf.Variable that collects a gradient from every depth.

    With `recompute_blocks=True`, training keeps only each block's output for the backward
    pass and re-runs the block there (albert_tf/layers/recomputation.py): about a third more compute
    for the activations of one block instead of all of them. A number N recomputes only the
    first N applied blocks, whose backward passes come last, after the other blocks' stored
    activations are freed: each recomputed block saves about its activations for a ninth of
    its compute. Outputs and gradients are the same; inference is unaffected.

    In training, a half that several stored blocks apply has its weights read (and under mixed precision
    cast) once for all of them, and their gradients summed as the backward pass produces them
    (albert_tf/layers/shared_weight_copies.py), not once a depth.

    Example:
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> encoder = AlbertEncoder(config)
    >>> inputs = {"input_word_ids": tf.constant([[2, 10, 3]]), "input_mask": tf.ones([1, 3], tf.int32),
    ...           "input_type_ids": tf.zeros([1, 3], tf.int32)}
    >>> encoder(inputs)["sequence_output"].shape
    TensorShape([1, 3, 32])
    >>> encoder(inputs, output_positions=tf.constant([[2]]))["sequence_output"].shape
    TensorShape([1, 1, 32])
    """

    def __init__(self, config, recompute_blocks=False, **kwargs):
        kwargs.setdefault("name", "albert_encoder")
        super().__init__(**kwargs)
        self.config = as_config(config)
        self.recompute_blocks = recompute_blocks
        config = self.config
        self.sharing_plan = build_sharing_plan(config)
        num_recomputed_blocks(recompute_blocks, len(self.sharing_plan.blocks))
        self.embeddings = AlbertEmbeddings(
            vocab_size=config.vocab_size, embedding_size=config.embedding_size,
            max_position_embeddings=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
            dropout_rate=config.hidden_dropout_prob, initializer_range=config.initializer_range,
            name="embeddings", dtype=self.dtype_policy)
        self.embedding_projection = None
        if config.embedding_size != config.hidden_size:
            self.embedding_projection = keras.layers.Dense(
                config.hidden_size, name="embedding_hidden_mapping_in", dtype=self.dtype_policy,
                kernel_initializer=truncated_normal(config.initializer_range))
        self.attention_layers = [
            AlbertAttention(hidden_size=config.hidden_size, num_attention_heads=config.num_attention_heads,
                            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                            hidden_dropout_prob=config.hidden_dropout_prob,
                            initializer_range=config.initializer_range,
                            name="group_{}_inner_group_{}_attention_{}".format(*key), dtype=self.dtype_policy)
            for key in self.sharing_plan.attention_keys]
        self.feed_forward_layers = [
            AlbertFeedForward(hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
                              hidden_act=config.hidden_act, hidden_dropout_prob=config.hidden_dropout_prob,
                              initializer_range=config.initializer_range,
                              name="group_{}_inner_group_{}_ffn_{}".format(*key), dtype=self.dtype_policy)
            for key in self.sharing_plan.ffn_keys]
        # tf.train.Checkpoint does not follow Keras's tracked lists, so each half is also an
        # attribute under its TF1-style name; the checkpoint then holds every variable once.
        for layer in self.attention_layers + self.feed_forward_layers:
            setattr(self, layer.name, layer)
        self.pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh", name="pooler", dtype=self.dtype_policy,
            kernel_initializer=truncated_normal(config.initializer_range))
        self.build()

    def build(self, input_shape=None):
        config = self.config
        self.embeddings.build()
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, None, config.embedding_size))
        for layer in self.attention_layers + self.feed_forward_layers:
            layer.build()
        self.pooler.build((None, config.hidden_size))
        self.built = True

    def _check_inputs(self, inputs):
        if not isinstance(inputs, dict) or set(INPUT_NAMES) - set(inputs):
            given = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"AlbertEncoder expects a dict with keys {list(INPUT_NAMES)}, got {given}.")
        seq_length = inputs["input_word_ids"].shape[-1]
        if seq_length is not None and seq_length > self.config.max_position_embeddings:
            raise ValueError(f"Input sequence length {seq_length} exceeds max_position_embeddings="
                             f"{self.config.max_position_embeddings}.")

    def call(self, inputs, training=False, output_positions=None):
        self._check_inputs(inputs)
        word_ids = tf.cast(inputs["input_word_ids"], tf.int32)
        input_mask = tf.cast(inputs["input_mask"], tf.float32)
        type_ids = tf.cast(inputs["input_type_ids"], tf.int32)
        if word_ids.shape[-1] is None:
            tf.debugging.assert_less_equal(
                tf.shape(word_ids)[1], self.config.max_position_embeddings,
                message=f"Input sequence length exceeds max_position_embeddings="
                        f"{self.config.max_position_embeddings}.")

        hidden = self.embeddings(word_ids, type_ids, training=training)
        if self.embedding_projection is not None:
            hidden = self.embedding_projection(hidden)
        # Computed once, reused at every depth of the shared stack.
        attention_bias = (1.0 - input_mask[:, tf.newaxis, tf.newaxis, :]) * ATTENTION_MASK_VALUE

        stack = apply_blocks(self.sharing_plan, self.attention_layers, self.feed_forward_layers, hidden,
                             attention_bias, training=training, recompute_blocks=self.recompute_blocks,
                             compute_dtype=self.compute_dtype, output_positions=output_positions)
        return {"sequence_output": stack.block_outputs[-1], "pooled_output": self.pooler(stack.first_position),
                "encoder_outputs": stack.block_outputs}

    def get_config(self):
        return {"config": self.config.to_dict(), "recompute_blocks": self.recompute_blocks, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
