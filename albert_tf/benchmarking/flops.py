"""Analytic FLOPs: the matmuls of the encoder and of each model workload's heads, counted from the config.

Units: GFLOP is decimal (1e9 FLOP).
"""

from typing import Optional

from albert_tf.config import AlbertConfig

MODEL_WORKLOADS = ("pretrain_step", "finetune_step", "encode")
# Both halves of each step are counted: a backward pass computes two matmuls (the gradients of both
# operands) for each forward one, so a training step costs exactly 3x the forward matmul FLOPs.
TRAINING_FLOPS_FACTOR = 3
FINETUNE_NUM_LABELS = 2


def encoder_forward_flops(config: AlbertConfig, seq_length: int, last_block_rows: Optional[int] = None) -> int:
    """Matmul FLOPs (2 per multiply-add) of one sequence through the encoder, pooler included.

    With S = seq_length, E, H, I = embedding, hidden and intermediate sizes:
    - the E -> H projection (only when E != H): 2·S·E·H;
    - per applied block (num_hidden_layers x inner_group_num): query, key, value and output projections
      4 · 2·S·H², attention scores and the probability-weighted values 2 · 2·S²·H, feed-forward 2 · 2·S·H·I;
    - the pooler: 2·H².
    With `last_block_rows` R (the encoder's `output_positions` and position 0), the last block computes
    only those rows: key and value projections 2 · 2·S·H², the query and output projections 2 · 2·R·H²,
    attention 2 · 2·R·S·H, feed-forward 2 · 2·R·H·I.
    Sharing changes none of it: the shared block still runs at every depth. Embedding lookups, LayerNorm,
    softmax, activations and the optimizer are not matmuls and are not counted.

    Example:
    >>> config = AlbertConfig.from_preset("albert-base")
    >>> round(encoder_forward_flops(config, 128) / 1e9, 2), round(encoder_forward_flops(config, 128, 21) / 1e9, 2)
    (22.37, 21.07)
    """
    s, e, h, i = seq_length, config.embedding_size, config.hidden_size, config.intermediate_size

    def block(rows):
        return 2 * 2 * s * h * h + 2 * 2 * rows * h * h + 2 * 2 * rows * s * h + 2 * 2 * rows * h * i

    projection = 2 * s * e * h if e != h else 0
    num_blocks = config.num_hidden_layers * config.inner_group_num
    last_block = block(s if last_block_rows is None else last_block_rows)
    return projection + (num_blocks - 1) * block(s) + last_block + 2 * h * h


def workload_flops(workload: str, config: AlbertConfig, batch_size: int, seq_length: int,
                   max_predictions_per_seq: int = 20, last_block_on_every_position: bool = False) -> int:
    """Matmul FLOPs of one step of `workload` over a batch.

    pretrain_step adds the heads to the encoder: the MLM transform and the tied V x E decoder on the P
    gathered positions, 2·P·(H·E + E·V), and SOP, 2·H·2; its encoder's last block runs on the P positions
    and position 0 only, as AlbertPretrainer's does (`last_block_on_every_position` counts it on all S, as
    the peers compute it). finetune_step adds the classifier, 2·H·labels, and its last block runs on position
    0 alone (AlbertClassifier). Training steps count 3x their forward FLOPs (TRAINING_FLOPS_FACTOR).

    Example:
    >>> config = AlbertConfig.from_preset("albert-base")
    >>> round(workload_flops("pretrain_step", config, 8, 128) / 1e9)
    509
    >>> round(workload_flops("pretrain_step", config, 8, 128, last_block_on_every_position=True) / 1e9)
    541
    """
    h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
    if workload == "encode":
        return batch_size * encoder_forward_flops(config, seq_length)
    if workload == "pretrain_step":
        rows_read = 1 + max_predictions_per_seq
        heads = 2 * max_predictions_per_seq * (h * e + e * v) + 2 * h * 2
    elif workload == "finetune_step":
        rows_read = 1
        heads = 2 * h * FINETUNE_NUM_LABELS
    else:
        raise ValueError(f"No FLOP formula for workload {workload!r}; allowed: {', '.join(MODEL_WORKLOADS)}.")
    forward = encoder_forward_flops(config, seq_length, None if last_block_on_every_position else rows_read)
    return TRAINING_FLOPS_FACTOR * batch_size * (forward + heads)
