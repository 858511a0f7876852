"""per_use_compute_copies: a shared half's weights cast once for all its uses, their gradients summed in float32."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.shared_weight_copies import per_use_compute_copies, stored_value


def test_copies_are_the_cast_and_the_gradient_is_the_float32_sum_of_the_uses():
    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(8, 6)).astype(np.float32))
    uses = 12
    inputs = tf.constant(rng.normal(size=(uses, 5, 8)), tf.bfloat16)

    def gradient(kernels_in_bfloat16):
        with tf.GradientTape() as tape:
            kernels = kernels_in_bfloat16()
            loss = tf.reduce_sum(tf.add_n([tf.cast(tf.tanh(use_inputs @ kernel_copy), tf.float32)
                                           for use_inputs, kernel_copy in zip(inputs, kernels)]))
        return kernels, tape.gradient(loss, kernel.value)

    copies, summed_once = gradient(lambda: [copy["kernel"] for copy in
                                            per_use_compute_copies({"kernel": kernel}, "bfloat16", uses)])
    # Each use casting for itself: the tape sums the casts' float32 gradients.
    _, cast_per_use = gradient(lambda: [tf.cast(kernel, tf.bfloat16) for _ in range(uses)])
    for copy in copies:
        assert copy.dtype == tf.bfloat16
        np.testing.assert_array_equal(copy, tf.cast(kernel, tf.bfloat16))
    assert summed_once.dtype == tf.float32
    np.testing.assert_allclose(summed_once, cast_per_use, rtol=1e-7)


def test_the_uses_gradients_join_the_total_last_use_first():
    """The backward pass produces the last use's gradient first; summing in that order lets each gradient join
    the total as it appears. The order shows in float32 rounding: (1e8 - 1e8) + 1 is 1, (1 - 1e8) + 1e8 is 0."""
    kernel = keras.Variable([0.0])
    use_gradients = [1.0, -1e8, 1e8]
    with tf.GradientTape() as tape:
        copies = per_use_compute_copies({"kernel": kernel}, "float32", uses=3)
        loss = tf.add_n([tf.reduce_sum(copy["kernel"] * weight) for copy, weight in zip(copies, use_gradients)])
    assert tape.gradient(loss, kernel.value).numpy().tolist() == [1.0]


def test_stored_value_reads_the_variable_dtype_inside_a_mixed_precision_call():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")

    class Probe(keras.layers.Layer):
        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(2,), initializer="ones")

        def call(self, inputs):
            return inputs, keras.ops.convert_to_tensor(self.kernel).dtype, stored_value(self.kernel).dtype

    _, autocast_dtype, stored_dtype = Probe()(tf.zeros([2]))
    assert (autocast_dtype, stored_dtype) == (tf.bfloat16, tf.float32)


def test_no_use_is_refused():
    with pytest.raises(ValueError, match="uses=0 must be at least 1"):
        per_use_compute_copies({"kernel": keras.Variable([1.0])}, "bfloat16", uses=0)
