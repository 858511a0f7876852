import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.checkpoints.tf1_names import encoder_variable_map, pretrainer_variable_map
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.masked_lm_head import AlbertMaskedLMHead
from albert_tf.models import param_count
from albert_tf.models.encoder import no_output_positions
from albert_tf.training.pretraining_losses import pretraining_loss
from tests import numpy_albert
from tests.helpers import random_inputs, tiny_config


def randomize_layer_norms(model, seed=1):
    """LayerNorms start at gamma=1, beta=0; perturb them so the tests see every weight."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "LayerNorm" in variable.path:
            variable.assign(variable.numpy() + rng.normal(0, 0.3, variable.shape).astype(np.float32))


# ---- numbers against the original's equations ---------------------------------------------------

@pytest.mark.parametrize("overrides", [
    dict(),
    dict(num_hidden_groups=2, inner_group_num=2),
    dict(embedding_size=16, hidden_act="relu"),
])
def test_pretrainer_matches_numpy_transcription_of_original(overrides):
    config = tiny_config(**overrides)
    model = AlbertPretrainer(config)
    randomize_layer_norms(model)
    weights = {name: variable.numpy() for name, variable in pretrainer_variable_map(model).items()}
    encoder_outputs = numpy_albert.assert_pretrainer_matches(model, weights, config, random_inputs(), atol=2e-5,
                                                             mlm_atol=5e-5)
    expected_blocks = config.num_hidden_layers * config.inner_group_num
    assert len(encoder_outputs["encoder_outputs"]) == expected_blocks


def test_mlm_decoder_is_the_word_embedding_variable():
    model = AlbertPretrainer(tiny_config())
    inputs = random_inputs()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(inputs)["mlm_logits"])
    table = model.encoder.embeddings.word_embeddings
    gradient = tape.gradient(loss, table)
    assert gradient is not None
    dense_gradient = tf.convert_to_tensor(gradient)
    # Every row gets a decoder gradient, not just the looked-up ones.
    assert np.all(np.abs(dense_gradient.numpy()).sum(-1) > 0)
    assert sum(1 for v in model.weights if v is table or v.path == table.path) == 1


# ---- sharing ----------------------------------------------------------------------------------

LAYOUTS = list(itertools.product(["all", "attention", "ffn", "none"], [(1, 1), (2, 1), (2, 2)]))


@pytest.mark.parametrize("share_type, groups", LAYOUTS)
def test_variable_counts_equal_the_formulas(share_type, groups):
    config = tiny_config(share_type=share_type, num_hidden_groups=groups[0], inner_group_num=groups[1])
    encoder = AlbertEncoder(config)
    assert param_count.model_parameters(encoder) == param_count.encoder_parameters(config)
    layers, num_groups, inner = config.num_hidden_layers, groups[0], groups[1]
    expected_attention = num_groups * inner if share_type in ("all", "attention") else layers * inner
    expected_ffn = num_groups * inner if share_type in ("all", "ffn") else layers * inner
    assert len(encoder.attention_layers) == expected_attention
    assert len(encoder.feed_forward_layers) == expected_ffn
    assert len(encoder_variable_map(encoder)) == len(encoder.weights)


def _unrolled_copy(shared):
    """A not-shared encoder whose every depth holds the all-shared encoder's weights."""
    unrolled = AlbertEncoder(shared.config.replace(share_type="none"))
    shared_names = encoder_variable_map(shared)
    for name, variable in encoder_variable_map(unrolled).items():
        source = name
        for index in range(1, shared.config.num_hidden_layers + 1):
            source = source.replace(f"/attention_{index}/LayerNorm", "/LayerNorm")
            source = source.replace(f"/ffn_{index}/LayerNorm_1", "/LayerNorm_1")
            source = source.replace(f"/attention_{index}/", "/attention_1/").replace(f"/ffn_{index}/", "/ffn_1/")
        variable.assign(shared_names[source])
    return unrolled


def test_share_type_all_gradient_is_sum_over_depths():
    """One shared kernel collects the sum of the per-depth gradients of a hand-unrolled stack."""
    shared_config = tiny_config(share_type="all")
    shared = AlbertEncoder(shared_config)
    randomize_layer_norms(shared)
    unrolled = _unrolled_copy(shared)
    inputs = random_inputs()
    probe = tf.constant(np.random.default_rng(3).normal(size=(2, 7, 16)), tf.float32)

    def loss(model):
        return tf.reduce_sum(model(inputs)["sequence_output"] * probe)

    with tf.GradientTape() as tape:
        shared_loss = loss(shared)
    shared_kernel = shared.attention_layers[0].query.kernel
    shared_gradient = tape.gradient(shared_loss, shared_kernel)
    with tf.GradientTape() as tape:
        unrolled_loss = loss(unrolled)
    per_depth = tape.gradient(unrolled_loss, [layer.query.kernel for layer in unrolled.attention_layers])
    np.testing.assert_allclose(shared_loss, unrolled_loss, rtol=1e-6)
    assert len(per_depth) == shared_config.num_hidden_layers
    assert all(float(tf.norm(g)) > 0 for g in per_depth)
    np.testing.assert_allclose(shared_gradient, tf.add_n(per_depth), rtol=1e-5, atol=1e-6)
    assert sum(1 for v in shared.trainable_variables if v is shared_kernel) == 1


def _projection_kernels_by_role(encoder):
    """{"query": [each attention layer's query kernel], ..., "intermediate": [...], "output": [...]}."""
    kernels = {role: [getattr(layer, attribute).kernel for layer in encoder.attention_layers]
               for role, attribute in (("query", "query"), ("key", "key"), ("value", "value"),
                                       ("attention_output", "output_dense"))}
    kernels.update({role: [getattr(layer, attribute).kernel for layer in encoder.feed_forward_layers]
                    for role, attribute in (("intermediate", "intermediate"), ("output", "output_dense"))})
    return kernels


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_training_sums_the_shared_kernels_depth_gradients_in_float32(mode, policy):
    """In training a shared half's weights are read (and cast) once a step for all depths
    (albert_tf/layers/shared_weight_copies.py); each kernel's gradient is still the float32 sum of the depths'
    gradients, as in a not-shared stack holding the same weights. Eagerly the two are the same sum; in a graph Grappler
    rewrites each graph's bfloat16 backward ops its own way, so there they agree to bfloat16's rounding."""
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(5)
    shared = AlbertEncoder(tiny_config(share_type="all"))
    randomize_layer_norms(shared)
    unrolled = _unrolled_copy(shared)
    inputs = random_inputs()
    probe = tf.constant(np.random.default_rng(3).normal(size=(2, 7, 16)), tf.float32)

    def kernel_gradients(model):
        kernels = _projection_kernels_by_role(model)

        def gradients(inputs):
            with tf.GradientTape() as tape:
                output = tf.cast(model(inputs, training=True)["sequence_output"], tf.float32)
                loss = tf.reduce_sum(output * probe)
            return loss, tape.gradient(loss, kernels)

        return gradients(inputs) if mode == "eager" else tf.function(gradients, jit_compile=mode == "xla")(inputs)

    shared_loss, shared_gradients = kernel_gradients(shared)
    unrolled_loss, unrolled_gradients = kernel_gradients(unrolled)
    np.testing.assert_allclose(shared_loss, unrolled_loss, rtol=1e-6)
    for role, (shared_gradient,) in shared_gradients.items():
        depth_sum = tf.add_n(unrolled_gradients[role])
        assert shared_gradient.dtype == tf.float32 and len(unrolled_gradients[role]) == shared.config.num_hidden_layers
        tolerance = (1e-6 if mode == "eager" or policy == "float32"
                     else 2 ** -7 * float(tf.reduce_max(tf.abs(depth_sum))))
        np.testing.assert_allclose(shared_gradient, depth_sum, rtol=1e-6, atol=tolerance, err_msg=role)


@pytest.mark.parametrize("layer", [AlbertAttention(hidden_size=16, num_attention_heads=2),
                                   AlbertFeedForward(hidden_size=16, intermediate_size=32)],
                         ids=["attention", "feed_forward"])
def test_training_adds_the_projection_biases_without_bias_add(layer):
    """tf.nn.bias_add's gradient (BiasAddGrad) sums a bfloat16 upstream in bfloat16: at [1024, 768] rows of
    unit normals it is 3% off where a broadcast add's gradient (a float32 sum, rounded once) is 0.14%."""
    hidden = tf.constant(np.random.default_rng(0).normal(size=(2, 5, 16)), tf.float32)
    arguments = (hidden, tf.zeros([2, 1, 1, 5])) if isinstance(layer, AlbertAttention) else (hidden,)

    def gradients(*arguments):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(layer(*arguments, training=True), tf.float32))
        return tape.gradient(loss, layer.trainable_variables)

    op_types = {op.type for op in tf.function(gradients).get_concrete_function(*arguments).graph.get_operations()}
    assert not op_types & {"BiasAdd", "BiasAddGrad"}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_training_reads_and_casts_each_shared_kernel_once(policy):
    keras.mixed_precision.set_global_policy(policy)
    encoder = AlbertEncoder(tiny_config(share_type="all"))
    inputs = random_inputs()
    hidden, intermediate = encoder.config.hidden_size, encoder.config.intermediate_size
    block_and_pooler_shapes = {(hidden, hidden), (hidden, intermediate), (intermediate, hidden)}

    def kernel_reads(training):
        """The kernels' reads in float32, their casts to bfloat16 under mixed precision."""
        graph = tf.function(lambda x: encoder(x, training=training)).get_concrete_function(inputs).graph
        reads = [op for op in graph.get_operations()
                 if op.type == "ReadVariableOp" and tuple(op.outputs[0].shape) in block_and_pooler_shapes]
        if policy == "float32":
            return reads
        return [consumer for read in reads for consumer in read.outputs[0].consumers()
                if consumer.type == "Cast" and consumer.get_attr("DstT") == tf.bfloat16]

    # Six projection kernels (Q, K, V, the attention output, W1, W2): each read once in training, at every
    # depth in inference (Keras's own reads).
    pooler = 1
    assert len(kernel_reads(training=True)) == 6 + pooler
    assert len(kernel_reads(training=False)) == 6 * encoder.config.num_hidden_layers + pooler


def test_shared_halves_are_called_at_every_depth_not_copied():
    encoder = AlbertEncoder(tiny_config(share_type="attention", num_hidden_groups=2))
    blocks = encoder.sharing_plan.blocks
    assert [b.attention_index for b in blocks] == [0, 0, 1, 1]
    assert [b.ffn_index for b in blocks] == [0, 1, 2, 3]
    assert encoder.sharing_plan.attention_keys == [(0, 0, 1), (1, 0, 1)]
    assert encoder.sharing_plan.ffn_keys == [(0, 0, 1), (0, 0, 2), (1, 0, 3), (1, 0, 4)]


# ---- inputs -----------------------------------------------------------------------------------

def test_padding_invariance():
    encoder = AlbertEncoder(tiny_config())
    inputs = random_inputs(batch=2, seq=6)
    padded = {name: tf.concat([tensor, tf.zeros([2, 5], tf.int32)], axis=1)
              for name, tensor in inputs.items() if name != "masked_lm_positions"}
    padded["input_word_ids"] = tf.concat([inputs["input_word_ids"], tf.fill([2, 5], 17)], axis=1)
    short = encoder(inputs)
    long = encoder(padded)
    real = inputs["input_mask"].numpy().astype(bool)
    np.testing.assert_allclose(long["sequence_output"][:, :6].numpy()[real],
                               short["sequence_output"].numpy()[real], atol=1e-5)
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


@pytest.mark.parametrize("seq_length", [1, 5, 24])
def test_variable_sequence_lengths(seq_length):
    encoder = AlbertEncoder(tiny_config())
    outputs = encoder(random_inputs(seq=seq_length) if seq_length > 2 else {
        "input_word_ids": tf.ones([2, seq_length], tf.int32), "input_mask": tf.ones([2, seq_length], tf.int32),
        "input_type_ids": tf.zeros([2, seq_length], tf.int32)})
    assert outputs["sequence_output"].shape == (2, seq_length, 16)


OUTPUT_POSITIONS = tf.constant([[3, 0, 6, 3], [1, 2, 0, 0]])


def _projection_rows(encoder, inputs, output_positions, training=False):
    """`encoder`'s graph and the rows of its products as wide as the hidden or intermediate size, sorted: the
    embedding projection, every block's six projections and the pooler."""
    graph = tf.function(lambda inputs: encoder(inputs, training=training, output_positions=output_positions(inputs))
                        ).get_concrete_function(inputs).graph
    widths = (encoder.config.hidden_size, encoder.config.intermediate_size)
    return graph, sorted(op.outputs[0].shape[0] for op in graph.get_operations()
                         if op.type == "MatMul" and op.outputs[0].shape[-1] in widths)


@pytest.mark.parametrize("mode, share_type, recompute_blocks", [
    *itertools.product(["eager"], ["all", "none"], [False, 1, True]), ("xla", "all", 1), ("xla", "none", True)])
def test_output_positions_give_the_full_outputs_rows_and_its_gradients(share_type, recompute_blocks, mode):
    """The last block on the asked rows only (duplicates included) gives the full output's rows, the same pooled
    output and the same gradients for every variable."""
    encoder = AlbertEncoder(tiny_config(share_type=share_type), recompute_blocks=recompute_blocks)
    randomize_layer_norms(encoder)
    inputs = random_inputs(with_predictions=False)
    probe = tf.constant(np.random.default_rng(5).normal(size=(2, 4, 16)), tf.float32)

    def losses_and_gradients(inputs):
        with tf.GradientTape(persistent=True) as tape:
            full = encoder(inputs, training=True)
            rows = encoder(inputs, training=True, output_positions=OUTPUT_POSITIONS)
            full_loss = (tf.reduce_sum(tf.gather(full["sequence_output"], OUTPUT_POSITIONS, batch_dims=1) * probe)
                         + tf.reduce_sum(full["pooled_output"]))
            rows_loss = tf.reduce_sum(rows["sequence_output"] * probe) + tf.reduce_sum(rows["pooled_output"])
        gradients = [[tf.convert_to_tensor(gradient) for gradient in tape.gradient(loss, encoder.trainable_variables)]
                     for loss in (full_loss, rows_loss)]
        return full, rows, gradients

    run = losses_and_gradients if mode == "eager" else tf.function(losses_and_gradients, jit_compile=True)
    full, rows, (full_gradients, rows_gradients) = run(inputs)
    expected = tf.gather(full["sequence_output"], OUTPUT_POSITIONS, batch_dims=1)
    np.testing.assert_allclose(rows["sequence_output"], expected, atol=2e-5)
    np.testing.assert_allclose(rows["encoder_outputs"][-1], expected, atol=2e-5)
    np.testing.assert_allclose(rows["encoder_outputs"][0], full["encoder_outputs"][0], atol=2e-5)
    np.testing.assert_allclose(rows["pooled_output"], full["pooled_output"], atol=2e-5)
    # The key bias's gradient is zero but for rounding (softmax ignores a shift shared by a query's scores), so
    # the tolerance is relative to the largest gradient of all.
    scale = max(float(tf.reduce_max(tf.abs(gradient))) for gradient in full_gradients)
    for variable, full_gradient, rows_gradient in zip(encoder.trainable_variables, full_gradients, rows_gradients):
        np.testing.assert_allclose(rows_gradient, full_gradient, atol=2e-6 * scale, err_msg=variable.path)


def test_output_positions_run_the_last_blocks_projections_on_those_rows_only():
    """Per block: query, key, value and output projections and the two feed-forward ones. With 4 positions asked
    (and position 0 for the pooler) at batch 2, the last block's query, output and feed-forward products have
    2 x 5 rows; its key and value products, every other block's and the embedding projection all 2 x 7."""
    encoder = AlbertEncoder(tiny_config())
    _, rows = _projection_rows(encoder, random_inputs(with_predictions=False), lambda inputs: OUTPUT_POSITIONS,
                               training=True)
    # The pooler on 2 rows, then the products above.
    assert rows == [2] + [10] * 4 + [14] * (6 * len(encoder.sharing_plan.blocks) - 4 + 1)


def test_no_output_positions_leave_the_pooled_output_and_run_the_last_block_on_position_0():
    encoder = AlbertEncoder(tiny_config())
    inputs = random_inputs(with_predictions=False)
    outputs = encoder(inputs, output_positions=no_output_positions(inputs["input_word_ids"]))
    np.testing.assert_allclose(outputs["pooled_output"], encoder(inputs)["pooled_output"], atol=2e-5)
    assert outputs["sequence_output"].shape == (2, 0, 16)
    graph, rows = _projection_rows(encoder, inputs, lambda inputs: no_output_positions(inputs["input_word_ids"]))
    assert not [op for op in graph.get_operations() if op.type in ("GatherV2", "ResourceGather")
                and "embeddings" not in op.name]
    # The last block's query, output and feed-forward products and the pooler on 2 rows; the rest as before.
    assert rows == [2] * 5 + [14] * (6 * len(encoder.sharing_plan.blocks) - 4 + 1)


def test_over_long_input_names_both_numbers():
    encoder = AlbertEncoder(tiny_config())
    inputs = {"input_word_ids": tf.ones([1, 25], tf.int32), "input_mask": tf.ones([1, 25], tf.int32),
              "input_type_ids": tf.zeros([1, 25], tf.int32)}
    with pytest.raises(ValueError, match="length 25 exceeds max_position_embeddings=24"):
        encoder(inputs)


def test_missing_input_key_is_named():
    encoder = AlbertEncoder(tiny_config())
    with pytest.raises(ValueError, match="input_type_ids"):
        encoder({"input_word_ids": tf.ones([1, 3], tf.int32), "input_mask": tf.ones([1, 3], tf.int32)})


# ---- compilation and precision -------------------------------------------------------------------

def test_jit_compile_matches_eager():
    model = AlbertPretrainer(tiny_config(num_hidden_groups=2))
    inputs = random_inputs()
    eager = model(inputs)
    compiled = tf.function(lambda x: model(x), jit_compile=True)(inputs)
    for name in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(compiled[name], eager[name], atol=1e-5)


def test_mixed_bfloat16_keeps_layer_norm_softmax_losses_and_gradients_in_float32():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = AlbertPretrainer(tiny_config())
    batch = dict(random_inputs(), masked_lm_ids=tf.zeros([2, 3], tf.int32), masked_lm_weights=tf.ones([2, 3]),
                 next_sentence_labels=tf.zeros([2], tf.int32))

    def loss_and_gradients(batch):
        with tf.GradientTape() as tape:
            loss, _ = pretraining_loss(model(batch, training=True), batch)
        return loss, tape.gradient(loss, model.trainable_variables)

    concrete = tf.function(loss_and_gradients).get_concrete_function(batch)
    graph_def = concrete.graph.as_graph_def()
    # The outer graph's forward ops, and those of the XLA-fused functions it calls
    # (albert_tf/layers/fused_elementwise.py), leaving out their gradients.
    forward_nodes = [node for node in graph_def.node if "gradient_tape" not in node.name]
    forward_nodes += [node for function in graph_def.library.function
                      if "backward" not in function.signature.name for node in function.node_def]
    forward_types = {}
    for node in forward_nodes:
        if "T" in node.attr and node.attr["T"].HasField("type"):
            forward_types.setdefault(node.op, set()).add(tf.dtypes.as_dtype(node.attr["T"].type).name)
    # LayerNorm's moments and normalisation, the attention softmax and both losses.
    for op_type in ("Mean", "SquaredDifference", "Rsqrt", "Softmax", "SparseSoftmaxCrossEntropyWithLogits"):
        assert forward_types[op_type] == {"float32"}, op_type
    assert "bfloat16" in forward_types["MatMul"] | forward_types.get("BatchMatMulV2", set())
    loss, gradients = concrete.structured_outputs
    assert loss.dtype == tf.float32
    assert {gradient.dtype for gradient in gradients} == {tf.float32}


def test_mixed_bfloat16_is_close_to_float32():
    # Seeded weights: with unseeded ones a near-tie in the top MLM logit can flip under bfloat16 rounding.
    keras.utils.set_random_seed(7)
    config = tiny_config()
    reference = AlbertPretrainer(config)
    inputs = random_inputs()
    expected = reference(inputs)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = AlbertPretrainer(config)
    model.set_weights(reference.get_weights())
    outputs = tf.function(lambda x: model(x), jit_compile=True)(inputs)
    encoded = model.encoder(inputs)
    assert encoded["sequence_output"].dtype == tf.bfloat16
    assert all(v.dtype == "float32" for v in model.weights)
    assert outputs["mlm_logits"].dtype == tf.float32
    np.testing.assert_allclose(outputs["mlm_logits"], expected["mlm_logits"], atol=0.1)
    np.testing.assert_allclose(outputs["sop_logits"], expected["sop_logits"], atol=0.05)
    assert np.argmax(outputs["mlm_logits"], -1).tolist() == np.argmax(expected["mlm_logits"], -1).tolist()


def test_dropout_only_in_training():
    encoder = AlbertEncoder(tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3))
    inputs = random_inputs()
    first, second = encoder(inputs)["sequence_output"], encoder(inputs)["sequence_output"]
    np.testing.assert_array_equal(first, second)
    trained = encoder(inputs, training=True)["sequence_output"]
    assert float(tf.reduce_max(tf.abs(trained - first))) > 1e-3


# ---- config and saving round trips ----------------------------------------------------------------

@pytest.mark.parametrize("layer", [
    AlbertEmbeddings(vocab_size=10, embedding_size=4, max_position_embeddings=8, type_vocab_size=3,
                     dropout_rate=0.1, initializer_range=0.05),
    AlbertAttention(hidden_size=8, num_attention_heads=2, attention_probs_dropout_prob=0.1,
                    hidden_dropout_prob=0.2, initializer_range=0.05),
    AlbertFeedForward(hidden_size=8, intermediate_size=16, hidden_act="relu", hidden_dropout_prob=0.1),
    AlbertMaskedLMHead(vocab_size=10, embedding_size=4, hidden_act="tanh"),
    ClassificationHead(hidden_size=8, num_classes=3),
], ids=lambda layer: type(layer).__name__)
def test_layer_config_round_trip(layer):
    config = layer.get_config()
    restored = type(layer).from_config(config)
    assert restored.get_config() == config


@pytest.mark.parametrize("model_class", [AlbertEncoder, AlbertPretrainer])
def test_model_config_round_trip(model_class):
    model = model_class(tiny_config(share_type="ffn", num_hidden_groups=2))
    restored = model_class.from_config(model.get_config())
    assert restored.config == model.config
    assert restored.get_config() == model.get_config()
    serialized = keras.saving.serialize_keras_object(model)
    assert keras.saving.deserialize_keras_object(
        serialized, custom_objects={model_class.__name__: model_class}).config == model.config


def test_checkpoint_round_trip(tmp_path):
    config = tiny_config(share_type="attention")
    model = AlbertPretrainer(config)
    inputs = random_inputs()
    expected = model(inputs)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    restored = AlbertPretrainer(config)
    tf.train.Checkpoint(model=restored).read(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(restored(inputs)["mlm_logits"], expected["mlm_logits"])


def test_keras_weights_file_round_trip(tmp_path):
    config = tiny_config(num_hidden_groups=2, inner_group_num=2)
    model = AlbertPretrainer(config)
    inputs = random_inputs()
    expected = model(inputs)
    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    restored = AlbertPretrainer(config)
    restored.load_weights(path)
    np.testing.assert_array_equal(restored(inputs)["sop_logits"], expected["sop_logits"])
    np.testing.assert_array_equal(restored(inputs)["mlm_logits"], expected["mlm_logits"])
