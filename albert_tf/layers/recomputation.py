"""Block-wise recomputation: the backward pass re-runs each transformer block instead of storing its activations."""

from typing import Callable, List, Optional, Sequence, Union

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla

from albert_tf.layers.fused_elementwise import traced_for_xla
from albert_tf.layers.replica_dropout import recording_dropout_seeds, replaying_dropout_seeds

BlockFn = Callable[[int, tf.Tensor, tf.Tensor], tf.Tensor]


def run_blocks_recomputed(run_block: BlockFn, num_blocks: int, hidden: tf.Tensor,
                          attention_bias: tf.Tensor) -> List[tf.Tensor]:
    """Applies blocks 0..num_blocks-1 to `hidden`; returns every block's output.

    Only the block outputs are kept for the backward pass. The gradient re-runs block i from
    its stored input (one extra forward pass in all), takes that block's gradients, and adds
    them to running totals before it moves to block i-1. So at most one block's activations
    and one set of variable gradients are alive at a time: a shared kernel's 12 per-depth
    gradients are summed as they appear, not held until the end.

    The re-run must not be merged with the first run (common subexpressions), or the
    activations are kept after all. Without XLA, an optimization barrier on (block input,
    upstream gradient, running totals) keeps Grappler from merging them. XLA:CPU drops such
    barriers before its own CSE, so the re-run's input also adds a zero computed from the
    upstream gradient and the totals: XLA cannot fold it (x * 0 is not 0 for inf or NaN), and
    it also orders the re-runs strictly one after the other. A non-finite upstream gradient
    makes the block's gradients NaN instead of inf, which a loss-scale optimizer skips alike.

    Dropout inside a block (ReplicaDropout) draws its masks in the forward pass; the re-run
    replays the same seeds, so the gradient is that of the masks the forward pass used.

    Example:
    >>> kernel = tf.Variable([[0.5, 0.1], [-0.2, 0.4]])
    >>> step = lambda i, h, bias: tf.tanh(h @ kernel) + bias
    >>> with tf.GradientTape() as tape:
    ...     outputs = run_blocks_recomputed(step, 3, tf.ones([1, 2]), tf.zeros([1, 2]))
    ...     loss = tf.reduce_sum(outputs[-1])
    >>> recomputed = tape.gradient(loss, kernel)
    >>> with tf.GradientTape() as tape:
    ...     hidden = tf.ones([1, 2])
    ...     for index in range(3):
    ...         hidden = step(index, hidden, tf.zeros([1, 2]))
    ...     loss = tf.reduce_sum(hidden)
    >>> bool(tf.reduce_all(tf.abs(recomputed - tape.gradient(loss, kernel)) < 1e-6))
    True
    """

    @tf.custom_gradient
    def stack(hidden, attention_bias):
        outputs, dropout_seeds = [], []
        block_output = hidden
        for index in range(num_blocks):
            with recording_dropout_seeds() as seeds:
                block_output = run_block(index, block_output, attention_bias)
            outputs.append(block_output)
            dropout_seeds.append(seeds)

        def grad(*output_grads, variables: Optional[Sequence[tf.Variable]] = None):
            variables = list(variables or [])
            totals: List[Optional[tf.Tensor]] = [None] * len(variables)
            upstream = output_grads[-1]
            for index in reversed(range(num_blocks)):
                block_input = outputs[index - 1] if index else hidden
                live = [position for position, total in enumerate(totals) if total is not None]
                block_input, upstream, bias, *carried = xla.optimization_barrier(
                    block_input, upstream, attention_bias, *[totals[position] for position in live])
                for position, total in zip(live, carried):
                    totals[position] = total
                block_input = block_input + _zero_depending_on([upstream] + carried, block_input.dtype)
                with tf.GradientTape() as tape, replaying_dropout_seeds(dropout_seeds[index]):
                    tape.watch(block_input)
                    block_output = run_block(index, block_input, bias)
                input_grad, *variable_grads = tape.gradient(
                    block_output, [block_input] + variables, output_gradients=upstream)
                for position, variable_grad in enumerate(variable_grads):
                    if variable_grad is not None:
                        variable_grad = tf.convert_to_tensor(variable_grad)
                        previous = totals[position]
                        totals[position] = variable_grad if previous is None else previous + variable_grad
                upstream = input_grad if index == 0 else input_grad + output_grads[index - 1]
            return (upstream, None), totals

        return outputs, grad

    return stack(hidden, attention_bias)


def num_recomputed_blocks(recompute_blocks: Union[bool, int], num_blocks: int) -> int:
    """How many leading blocks `recompute_blocks` recomputes: all for True, none for False, else that many.

    Example:
    >>> num_recomputed_blocks(True, 12), num_recomputed_blocks(False, 12), num_recomputed_blocks(8, 12)
    (12, 0, 8)
    """
    if isinstance(recompute_blocks, bool):
        return num_blocks if recompute_blocks else 0
    if not isinstance(recompute_blocks, int) or not 0 <= recompute_blocks <= num_blocks:
        raise ValueError(f"recompute_blocks={recompute_blocks!r} must be True, False or a number of blocks from 0 to "
                         f"{num_blocks}, the blocks this model applies.")
    return recompute_blocks


def recompute_setting(recompute_blocks: bool, num_recomputed_blocks: int) -> Union[bool, int]:
    """The models' `recompute_blocks` from the --recompute_blocks and --num_recomputed_blocks flags.

    A positive count recomputes that many leading blocks (with or without --recompute_blocks); 0 leaves
    the choice to --recompute_blocks (all blocks, or none).

    Example:
    >>> recompute_setting(True, 0), recompute_setting(False, 8), recompute_setting(False, 0)
    (True, 8, False)
    """
    if num_recomputed_blocks < 0:
        raise ValueError(f"--num_recomputed_blocks={num_recomputed_blocks} must be 0 (all blocks with "
                         f"--recompute_blocks) or a positive number of blocks.")
    return num_recomputed_blocks or recompute_blocks


def input_for_recomputation(saved_input: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    """`saved_input`, for a backward pass to recompute from: neither Grappler nor XLA can merge the
    recomputation with the forward pass's, nor schedule it before `upstream` exists.

    Example:
    >>> float(input_for_recomputation(tf.constant(2.0), tf.constant(5.0)))
    2.0
    """
    saved_input, upstream = xla.optimization_barrier(saved_input, upstream)
    return saved_input + _zero_depending_on([upstream], saved_input.dtype)


def ordered_input_for_recomputation(saved_input: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
    """`saved_input`, for a backward pass to recompute from once `upstream` exists, where the recomputation
    cannot be merged with the forward pass's by construction (it calls another function).

    Traced for XLA, that is `input_for_recomputation` (XLA's CSE merges equal computations across functions it
    inlines). For TensorFlow's kernels a control dependency is enough, and costs nothing, where the barrier
    and the added zero are two passes over the tensor.

    Example:
    >>> float(ordered_input_for_recomputation(tf.constant(2.0), tf.constant(5.0)))
    2.0
    """
    if traced_for_xla():
        return input_for_recomputation(saved_input, upstream)
    with tf.control_dependencies([upstream]):
        return tf.identity(saved_input)


def _zero_depending_on(tensors: Sequence[tf.Tensor], dtype) -> tf.Tensor:
    """A scalar 0 that XLA cannot compute before `tensors` exist, nor fold away (x * 0 is not 0 for inf)."""
    firsts = [tf.cast(tf.reshape(tensor, [-1])[0], tf.float32) for tensor in tensors]
    return tf.cast(tf.add_n(firsts) * 0.0, dtype)
