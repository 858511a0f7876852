"""A shared half's weights in the compute dtype, read (and cast) once a step for every depth that applies it.

Under mixed precision each Keras read of a variable casts it again, so an all-shared ALBERT-base cast every
kernel of its block 12 times a step, and on TensorFlow's kernels the backward pass held all 12 bfloat16 copies
(166 MiB at ALBERT-base; BUILD_NOTES.md, "Speed and memory"). One cast serves every use here; its gradient
adds each use's gradient to a running total in the variable's dtype as the backward pass produces them. In
float32 that total is the point: autodiff sums a variable's per-read gradients in one AddN once all exist, so
it held 11 depths' kernel gradients (27 MiB each) until the first depth's arrived.
"""

from typing import Dict, List, Mapping, Optional

import keras
import tensorflow as tf
from keras.src.backend.common.variables import AutocastScope

from albert_tf.layers.fused_elementwise import xla_fused


def stored_value(variable: keras.Variable) -> tf.Tensor:
    """`variable` read in its own dtype: inside a mixed-precision layer's call Keras reads it in the compute dtype.

    Example:
    >>> float(stored_value(keras.Variable(1.5)))
    1.5
    """
    with AutocastScope(None):
        return tf.convert_to_tensor(variable.value)


# One fused loop a use, chained: separate casts would all run at once, each a float32 copy of its use's gradient
# (at ALBERT-base, 12 x 27 MiB alive together at the end of the backward pass). In float32 too: Grappler
# rewrites a chain of TensorFlow's adds into one AddN, which waits for every use's gradient.
_add_in_dtype_of = xla_fused(lambda total, addend: total + tf.cast(addend, total.dtype))


def dense_variables(*denses: keras.layers.Dense) -> Dict[str, keras.Variable]:
    """`{"query/kernel": variable, "query/bias": variable, ...}`: the Dense layers' weights by the names that
    `dense_weight` looks them up under.

    Example:
    >>> dense = keras.layers.Dense(2, name="query")
    >>> dense.build((None, 3))
    >>> sorted(dense_variables(dense))
    ['query/bias', 'query/kernel']
    """
    return {f"{dense.name}/{part}": getattr(dense, part) for dense in denses for part in ("kernel", "bias")}


def dense_weight(dense: keras.layers.Dense, part: str, dtype, compute_copies: Optional[Mapping[str, tf.Tensor]]):
    """`dense`'s "kernel" or "bias" in `dtype`: from `compute_copies` (one use's `per_use_compute_copies` of
    `dense_variables`) where given, else read and cast for this use alone.

    Example:
    >>> dense = keras.layers.Dense(2, name="query")
    >>> dense.build((None, 3))
    >>> dense_weight(dense, "bias", "bfloat16", None).dtype.name
    'bfloat16'
    """
    if compute_copies is not None:
        return compute_copies[f"{dense.name}/{part}"]
    return keras.ops.cast(getattr(dense, part), dtype)


def _cast_for_uses(value: tf.Tensor, dtype: tf.DType, uses: int) -> List[tf.Tensor]:
    @tf.custom_gradient
    def cast(value):
        compute_copy = tf.cast(value, dtype)

        def gradient(*use_gradients):
            # Last use first: the backward pass produces the uses' gradients in that order, and each joins the
            # total as it appears instead of waiting, held, for the first use's.
            total = None
            for use_gradient in reversed(use_gradients):
                if use_gradient is not None:
                    total = (tf.cast(use_gradient, value.dtype) if total is None
                             else _add_in_dtype_of(total, use_gradient))
            return tf.zeros_like(value) if total is None else total

        # One tensor per use, so that each use's gradient reaches the gradient function on its own.
        return [tf.identity(compute_copy) for _ in range(uses)], gradient

    return cast(value)


def per_use_compute_copies(variables: Mapping[str, keras.Variable], dtype, uses: int) -> List[Dict[str, tf.Tensor]]:
    """For each of `uses` applications, `{name: variable in dtype}`, every variable cast once for them all.

    The gradient to each variable is the sum, in the variable's dtype, of the gradients of its uses.

    Example:
    >>> kernel = keras.Variable([2.0, 3.0])
    >>> with tf.GradientTape() as tape:
    ...     copies = per_use_compute_copies({"kernel": kernel}, "bfloat16", uses=2)
    ...     loss = tf.reduce_sum(tf.cast(copies[0]["kernel"] * copies[1]["kernel"], tf.float32))
    >>> copies[0]["kernel"].dtype.name, tape.gradient(loss, kernel.value).numpy().tolist()
    ('bfloat16', [4.0, 6.0])
    """
    if uses < 1:
        raise ValueError(f"uses={uses} must be at least 1: the number of applications the copies are for.")
    dtype = tf.as_dtype(dtype)
    per_variable = {name: _cast_for_uses(stored_value(variable), dtype, uses) for name, variable in variables.items()}
    return [{name: copies[use] for name, copies in per_variable.items()} for use in range(uses)]
