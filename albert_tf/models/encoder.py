"""AlbertEncoder: factorized embeddings, the shared transformer stack and the pooler."""

import collections

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.shared_weight_copies import per_use_compute_copies
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.initializers import truncated_normal
from albert_tf.layers.masked_lm_head import gather_positions
from albert_tf.layers.recomputation import num_recomputed_blocks, run_blocks_recomputed
from albert_tf.models.sharing import build_sharing_plan

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
ATTENTION_MASK_VALUE = -10000.0


def _next_copy(copies, layer_index):
    """The next unused per-use copy of layer `layer_index`'s weights, or None where it has none."""
    uses = copies.get(layer_index)
    return uses.pop(0) if uses else None


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

        num_blocks = len(self.sharing_plan.blocks)

        def last_block_rows(hidden):
            """Position 0, the pooler's, then the output positions."""
            if output_positions.shape[-1] == 0:
                return hidden[:, :1]
            return tf.concat([hidden[:, :1], gather_positions(hidden, output_positions)], axis=1)

        def run_block(index, hidden, attention_bias, attention_weights=None, ffn_weights=None):
            block = self.sharing_plan.blocks[index]
            query_states = None
            if index == num_blocks - 1 and output_positions is not None:
                query_states = last_block_rows(hidden)
            hidden = self.attention_layers[block.attention_index](hidden, attention_bias, training=training,
                                                                  projection_weights=attention_weights,
                                                                  query_states=query_states)
            return self.feed_forward_layers[block.ffn_index](hidden, training=training,
                                                             projection_weights=ffn_weights)

        recomputed = num_recomputed_blocks(self.recompute_blocks, num_blocks) if training else 0
        encoder_outputs = []
        if recomputed:
            encoder_outputs = run_blocks_recomputed(run_block, recomputed, hidden, attention_bias)
            hidden = encoder_outputs[-1]
        stored_blocks = self.sharing_plan.blocks[recomputed:]
        attention_copies = self._shared_compute_copies(
            self.attention_layers, [block.attention_index for block in stored_blocks], training)
        ffn_copies = self._shared_compute_copies(
            self.feed_forward_layers, [block.ffn_index for block in stored_blocks], training)
        for index in range(recomputed, num_blocks):
            block = self.sharing_plan.blocks[index]
            hidden = run_block(index, hidden, attention_bias, _next_copy(attention_copies, block.attention_index),
                               _next_copy(ffn_copies, block.ffn_index))
            encoder_outputs.append(hidden)
        pooled_output = self.pooler(hidden[:, 0])
        if output_positions is not None:
            hidden = encoder_outputs[-1] = hidden[:, 1:]
        return {"sequence_output": hidden, "pooled_output": pooled_output, "encoder_outputs": encoder_outputs}

    def _shared_compute_copies(self, layers, layer_indices, training):
        """{layer index: [projection weights per use]} for the halves that `layer_indices` applies more than once.

        Only in training, and only for the blocks whose activations are stored: a recomputed block must read
        the variables itself, since its backward pass takes their gradients afresh.
        """
        if not training:
            return {}
        return {index: per_use_compute_copies(layers[index].projection_variables(), self.compute_dtype, uses)
                for index, uses in sorted(collections.Counter(layer_indices).items()) if uses > 1}

    def get_config(self):
        return {"config": self.config.to_dict(), "recompute_blocks": self.recompute_blocks, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
