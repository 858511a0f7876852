"""The transformer blocks of a sharing plan, applied in order: AlbertEncoder's stack, with the mechanics that leave
its values as they are and save compute or memory.

- Recomputation (`recompute_blocks`): in training, the first N applied blocks keep only their outputs for the
  backward pass and are re-run there (albert_tf/layers/recomputation.py).
- Per-use copies of shared weights: in training, a half that several stored blocks apply has its weights read
  (and under mixed precision cast) once for all of them, and their gradients summed as the backward pass produces
  them (albert_tf/layers/shared_weight_copies.py), not once a depth. A recomputed block reads the variables
  itself, since its backward pass takes their gradients afresh.
- The last block's rows (`output_positions`): the last block runs its queries, output projection, LayerNorms and
  feed-forward half on position 0 (the pooler's) and the output positions alone; the other rows of its output
  are never read.
"""

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Union

import tensorflow as tf

from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.masked_lm_head import gather_positions
from albert_tf.layers.recomputation import num_recomputed_blocks, run_blocks_recomputed
from albert_tf.layers.shared_weight_copies import per_use_compute_copies
from albert_tf.models.sharing import SharingPlan


@dataclasses.dataclass(frozen=True)
class BlockStackOutputs:
    """`block_outputs`: one [B, S, H] tensor per applied block, the last one [B, P, H] (its rows at the output
    positions) when output positions were asked for; `first_position`: the last block's output at position 0,
    [B, H], what the pooler reads."""

    block_outputs: List[tf.Tensor]
    first_position: tf.Tensor


def apply_blocks(sharing_plan: SharingPlan, attention_layers: Sequence[AlbertAttention],
                 feed_forward_layers: Sequence[AlbertFeedForward], hidden: tf.Tensor, attention_bias: tf.Tensor, *,
                 training: bool, recompute_blocks: Union[bool, int], compute_dtype,
                 output_positions: Optional[tf.Tensor] = None) -> BlockStackOutputs:
    """Applies the blocks of `sharing_plan` to `hidden` ([B, S, H]), each block the attention half then the
    feed-forward half that the plan names (by index into `attention_layers` and `feed_forward_layers`).

    `attention_bias` is the input mask's additive bias, the same at every depth; `output_positions`, int [B, P],
    restricts the last block's output to those rows (P = 0: the pooler's position alone); `compute_dtype` is the
    dtype the layers compute in.
    """
    num_blocks = len(sharing_plan.blocks)

    def run_block(index, hidden, attention_bias, attention_weights=None, ffn_weights=None):
        block = sharing_plan.blocks[index]
        query_states = None
        if index == num_blocks - 1 and output_positions is not None:
            query_states = _last_block_rows(hidden, output_positions)
        hidden = attention_layers[block.attention_index](hidden, attention_bias, training=training,
                                                         projection_weights=attention_weights,
                                                         query_states=query_states)
        return feed_forward_layers[block.ffn_index](hidden, training=training, projection_weights=ffn_weights)

    recomputed = num_recomputed_blocks(recompute_blocks, num_blocks) if training else 0
    block_outputs = []
    if recomputed:
        block_outputs = run_blocks_recomputed(run_block, recomputed, hidden, attention_bias)
        hidden = block_outputs[-1]
    stored_blocks = sharing_plan.blocks[recomputed:]
    attention_copies = _shared_compute_copies(
        attention_layers, [block.attention_index for block in stored_blocks], compute_dtype, training)
    ffn_copies = _shared_compute_copies(
        feed_forward_layers, [block.ffn_index for block in stored_blocks], compute_dtype, training)
    for index in range(recomputed, num_blocks):
        block = sharing_plan.blocks[index]
        hidden = run_block(index, hidden, attention_bias, _next_copy(attention_copies, block.attention_index),
                           _next_copy(ffn_copies, block.ffn_index))
        block_outputs.append(hidden)
    first_position = hidden[:, 0]
    if output_positions is not None:
        block_outputs[-1] = hidden[:, 1:]
    return BlockStackOutputs(block_outputs, first_position)


def _last_block_rows(hidden, output_positions):
    """Position 0, the pooler's, then the output positions."""
    if output_positions.shape[-1] == 0:
        return hidden[:, :1]
    return tf.concat([hidden[:, :1], gather_positions(hidden, output_positions)], axis=1)


def _shared_compute_copies(layers, layer_indices, compute_dtype, training) -> Dict[int, List[Dict[str, tf.Tensor]]]:
    """{layer index: [projection weights per use]} for the halves that `layer_indices` applies more than once.

    Only in training, and only for the blocks whose activations are stored: a recomputed block must read
    the variables itself, since its backward pass takes their gradients afresh.
    """
    if not training:
        return {}
    return {index: per_use_compute_copies(layers[index].projection_variables(), compute_dtype, uses)
            for index, uses in sorted(collections.Counter(layer_indices).items()) if uses > 1}


def _next_copy(copies, layer_index):
    """The next unused per-use copy of layer `layer_index`'s weights, or None where it has none."""
    uses = copies.get(layer_index)
    return uses.pop(0) if uses else None
