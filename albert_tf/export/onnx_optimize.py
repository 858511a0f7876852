"""A fused ONNX model of our ONNX export for CPU serving, and its dynamic int8 variant (the optional `onnx` extra).

onnxruntime's transformer optimizer (`onnxruntime.transformers.optimizer`, model type "bert") fuses the subgraphs
of a PyTorch BERT export into its CPU kernels: Attention, SkipLayerNormalization, EmbedLayerNormalization,
FastGelu. tf2onnx writes the same math in other shapes, which those patterns miss, so `optimize_onnx` first
rewrites five of them into the PyTorch shapes, each the same computation:
- a Keras Dense on [batch, seq, width], tf.tensordot (Reshape to 2-D, MatMul, Reshape back), becomes one MatMul of
  the 3-D input: the attention fusion looks for the Q, K and V MatMuls on the block's input itself;
- Keras's LayerNormalization, `x · γ/σ + (β − μ · γ/σ)` with its means as GlobalAveragePool, becomes a
  LayerNormalization node;
- the scores' scale `· 1/sqrt(head size)` becomes `/ sqrt(head size)`, which the fusion tells from the mask's Mul;
- the mask's bias `(1 − mask[:, None, None, :]) · −10000` inserts its two axes one Unsqueeze at a time;
- the position embeddings `table[:seq][None]` are gathered by position ids `[[0, ..., seq − 1]]`, as BERT's are.
Fused, the attention reads the 2-D mask as is (0 masks a key with −10000, as the encoder), not as BERT's
sequence lengths, so a mask with holes keeps its meaning; the GELU is the tanh approximation, onnxruntime's
FastGelu (its Gelu is erf's). Each fused Attention node gets its own copy of the shared block's merged QKV
weights; identical initializers are then kept once. The last block of a classifier stays unfused (it queries
position 0 only) and keeps its own Q, K and V weights and biases, the same bytes as the thirds of the merged ones:
they become Slices of the merged weights. So the file holds the shared weights once, as the export does.
"""

import hashlib
import logging
import os
from typing import Dict, List, Optional, Tuple

import numpy as np

logger = logging.getLogger(__name__)

# What the fusions produce, as onnxruntime's BertOnnxModel counts them; Gelu (erf) would be a wrong GELU here.
FUSED_OP_TYPES = ("Attention", "MultiHeadAttention", "EmbedLayerNormalization", "SkipLayerNormalization",
                  "LayerNormalization", "FastGelu", "BiasGelu", "Gelu")
# The Unsqueeze inputs the rewrites write take their axes as an input from opset 13.
MINIMUM_OPSET = 13
# tf2onnx writes a TensorFlow end mask (slice to the end of an axis) as this end.
_TF2ONNX_OPEN_END = 1_000_000_000


def optimized_onnx_path(onnx_path: str) -> str:
    """Where `optimize_onnx` writes the fused model of `onnx_path`: beside it, `<name>_optimized.onnx`."""
    return f"{os.path.splitext(onnx_path)[0]}_optimized.onnx"


def int8_onnx_path(onnx_path: str) -> str:
    """Where `quantize_onnx_dynamic` writes the int8 model of `onnx_path`: beside it, `<name>_int8.onnx`."""
    return f"{os.path.splitext(onnx_path)[0]}_int8.onnx"


def require_onnxruntime():
    """onnxruntime, imported; a ValueError saying how to install it when it or onnx is absent."""
    try:
        import onnx  # noqa: F401 (the optimizer and the quantizer read and write ModelProtos)
        import onnxruntime
    except ImportError as error:
        raise ValueError("Optimizing an ONNX model needs onnx and onnxruntime, the `onnx` extra: run `make onnx` "
                         "and put .venv/onnx on PYTHONPATH, or pip install -r requirements-onnx.txt.") from error
    return onnxruntime


class _ProducerWarningFilter(logging.Filter):
    """Drops onnxruntime's warning that a "bert" model was not exported from PyTorch: ours never is, and the
    rewrites give it PyTorch's patterns."""

    def filter(self, record):
        return "Model producer not matched" not in record.getMessage()


def optimize_onnx(onnx_path: str, overwrite: bool = False) -> Tuple[str, Dict[str, int]]:
    """Writes the fused model of `onnx_path` (an ALBERT export of `convert_to_onnx`) as `<name>_optimized.onnx`
    beside it; returns its path and {fused op type: count}.

    The head count and width come from the graph (the split into heads), so any of our exports can be given, the
    encoder's or a fine-tuned model's. Every self-attention layer fuses, with two exceptions, both logged: the last
    block of a model that reads the pooled output alone (a classifier's) queries position 0 only (the encoder's
    `output_positions`), which onnxruntime's self-attention fusion does not match, and which runs its queries,
    output projection and feed-forward half on one row unfused (its Q, K and V projections read Slices of the
    fused layers' merged weights, which a session folds into constants when it loads the model, so the file keeps
    one copy of the shared block); and a layer whose biases or LayerNorm weights are exact zeros or ones (a model
    at its initialisation), which tf2onnx folds away. An existing file is refused unless `overwrite`.

    Example:
    >>> optimize_onnx("/tmp/albert_hub/encoder.onnx")  # doctest: +SKIP
    ('/tmp/albert_hub/encoder_optimized.onnx', {'Attention': 12, 'EmbedLayerNormalization': 1,
     'SkipLayerNormalization': 24, 'FastGelu': 12})
    """
    require_onnxruntime()
    import onnx
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
    from onnxruntime.transformers.onnx_model import OnnxModel
    from onnxruntime.transformers.optimizer import optimize_model

    path = optimized_onnx_path(onnx_path)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; remove it or pass overwrite (--overwrite) to replace it.")
    graph = OnnxModel(onnx.load(onnx_path))
    if graph.get_opset_version() < MINIMUM_OPSET:
        raise ValueError(f"{onnx_path} is ONNX opset {graph.get_opset_version()}; optimize_onnx needs opset "
                         f"{MINIMUM_OPSET} or later (convert_to_onnx's default opset is).")
    num_heads, hidden_size = _attention_shape(graph, onnx_path)
    _rewrite_for_fusion(graph, hidden_size // num_heads)
    self_attention_layers, restricted_layers = _attention_layers(graph)

    options = FusionOptions("bert")
    # The 2-D mask, not the sequence lengths BERT's default derives from it, which assume right padding.
    options.attention_mask_format = AttentionMaskFormat.AttentionMask
    producer_warning, optimizer_logger = _ProducerWarningFilter(), logging.getLogger(optimize_model.__module__)
    optimizer_logger.addFilter(producer_warning)
    try:
        # Python fusions only (opt_level 0): onnxruntime's own pass (level 1) imports torch in onnxruntime 1.32,
        # and a session applies those optimizations anyway when it loads the model.
        optimizer = optimize_model(graph.model, model_type="bert", num_heads=num_heads, hidden_size=hidden_size,
                                   optimization_options=options, opt_level=0)
    finally:
        optimizer_logger.removeFilter(producer_warning)
    removed = _deduplicate_initializers(optimizer.model.graph)
    removed += _slices_of_merged_weights(optimizer.model.graph)
    optimizer.save_model_to_file(path + ".partial")
    os.replace(path + ".partial", path)

    counts = {op_type: count for op_type in FUSED_OP_TYPES
              if (count := len(optimizer.get_nodes_by_op_type(op_type)))}
    logger.info("Wrote the fused ONNX model (%.1f MB, %d duplicate initializers removed) to %s; fused ops: %s",
                os.path.getsize(path) / 1e6, removed, path, counts)
    if restricted_layers:
        logger.info("%d attention layer(s) of %s query some positions only (the last block of a model that reads "
                    "the pooled output): onnxruntime fuses self-attention only, so they stay unfused.",
                    restricted_layers, onnx_path)
    fused_attention = counts.get("Attention", 0) + counts.get("MultiHeadAttention", 0)
    if fused_attention < self_attention_layers:
        logger.warning("%s fuses %d of its %d self-attention layers; a layer whose biases or LayerNorm weights are "
                       "exactly 0 or 1 (a model at its initialisation) is not fused, as tf2onnx folds them away.",
                       path, fused_attention, self_attention_layers)
    return path, counts


def quantize_onnx_dynamic(onnx_path: str, overwrite: bool = False, per_channel: bool = True) -> str:
    """Writes `onnx_path` with its weights in int8 (onnxruntime's dynamic quantization: activations are quantized
    on the fly, no calibration data) as `<name>_int8.onnx` beside it, and returns that path.

    `per_channel` gives each output column of a weight its own scale (else one scale per weight): a column of
    outsized weights then no longer coarsens the rest, which matters more where one shared weight serves every
    layer. It costs no measurable latency (docs/export.md).

    A fused model (`optimize_onnx`) holds onnxruntime's own operators, whose output types its quantizer cannot
    infer: they are taken as float32. The quantizer quantizes a MatMul only when its weight is an initializer, so a
    product by a Slice of a weight (a classifier's unfused last block, `optimize_onnx`) is first written as the
    Slice of the product by the whole weight, which then reads the fused layers' int8 weight. An existing file is
    refused unless `overwrite`.

    Example:
    >>> quantize_onnx_dynamic("/tmp/albert_hub/encoder_optimized.onnx")  # doctest: +SKIP
    '/tmp/albert_hub/encoder_optimized_int8.onnx'
    """
    require_onnxruntime()
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = int8_onnx_path(onnx_path)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; remove it or pass overwrite (--overwrite) to replace it.")
    model = onnx.load(onnx_path)
    products = _products_of_whole_weights(model.graph)
    if products:
        logger.info("%d MatMul(s) of %s by a Slice of a weight now slice the product by the whole weight, which "
                    "the quantizer quantizes once.", products, onnx_path)
    quantize_dynamic(model, path + ".partial", weight_type=QuantType.QInt8, per_channel=per_channel,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    os.replace(path + ".partial", path)
    logger.info("Wrote the int8 ONNX model (%.1f MB) to %s", os.path.getsize(path) / 1e6, path)
    return path


def _attention_shape(graph, onnx_path: str) -> Tuple[int, int]:
    """(heads, hidden size) of the attention layers, from the reshape that splits the values into heads: its
    shape is Concat(batch, seq, heads, head size), behind tf2onnx's casts."""
    producers = graph.output_name_to_node()
    shapes = set()
    for context in _attention_contexts(graph):
        split = graph.match_parent_path(context, ["Transpose", "Reshape"], [1, 0], producers)
        concat = _skip_casts(split[1].input[1], producers) if split else None
        if concat is not None and concat.op_type == "Concat" and len(concat.input) == 4:
            heads, head_size = (_constant_list(graph, name) for name in concat.input[2:])
            if heads and head_size and len(heads) == len(head_size) == 1:
                shapes.add((int(heads[0]), int(heads[0] * head_size[0])))
    if len(shapes) != 1:
        raise ValueError(f"optimize_onnx found the head counts and widths {sorted(shapes)} in {onnx_path}; it needs "
                         "one, as an ALBERT export of convert_to_onnx (export_mobile --onnx) has.")
    return shapes.pop()


def _attention_contexts(graph) -> List:
    """The MatMul of the probabilities and the values of every attention layer: a Softmax's only consumer (a
    classifier's probabilities are a Softmax too)."""
    consumers = graph.input_name_to_nodes()
    return [children[0] for softmax in graph.get_nodes_by_op_type("Softmax")
            if len(children := consumers.get(softmax.output[0], [])) == 1 and children[0].op_type == "MatMul"]


def _attention_layers(graph) -> Tuple[int, int]:
    """(layers whose queries are every position, layers whose queries are some positions): the Q and K
    projections read the same tensor, or the Q projection reads rows of the K projection's input."""
    producers = graph.output_name_to_node()
    layers = [0, 0]
    for context in _attention_contexts(graph):
        _, scores, _ = graph.match_parent_paths(context, [(["Softmax", "Add", scale, "MatMul"], [0, 0, None, 0])
                                                          for scale in ("Div", "Mul")], producers)
        if not scores:
            continue
        query, key = (_projected_input(graph, scores[-1], side, producers) for side in (0, 1))
        if query and key:
            layers[query != key] += 1
    return layers[0], layers[1]


def _projected_input(graph, scores, side: int, producers) -> Optional[str]:
    """What the projection behind input `side` of the scores' MatMul (0: the queries, 1: the keys) multiplies;
    None where there is no such projection. A bias of exact zeros leaves no Add (tf2onnx folds it away)."""
    _, path, _ = graph.match_parent_paths(scores, [(["Transpose", "Reshape", "Add", "MatMul"], [side, 0, 0, None]),
                                                   (["Transpose", "Reshape", "MatMul"], [side, 0, 0])], producers)
    return path[-1].input[0] if path else None


def _rewrite_for_fusion(graph, head_size: int) -> None:
    """Rewrites tf2onnx's patterns into the ones onnxruntime fuses (see the module docstring), then drops the
    nodes they leave unused."""
    rewritten = {"3-D MatMul": _projections_as_matmuls(graph), "LayerNormalization": _layer_normalizations(graph),
                 "scale Div": _scales_as_divisions(graph, head_size),
                 "mask Unsqueeze": _mask_axes_one_at_a_time(graph), "position Gather": _positions_gathered(graph)}
    graph.prune_graph()
    logger.info("Rewrote for onnxruntime's fusions: %s", rewritten)


def _skip_casts(name: str, producers):
    """The node that makes `name`, looking through Cast nodes (tf2onnx casts shapes between int32 and int64)."""
    node = producers.get(name)
    while node is not None and node.op_type == "Cast":
        node = producers.get(node.input[0])
    return node


def _constant_list(graph, name: str) -> Optional[List]:
    """The constant `name` as a flat list; None when it is not a constant."""
    value = graph.get_constant_value(name)
    return None if value is None else np.ravel(value).tolist()


def _other_input(node, name: str) -> str:
    """The input of the two-input `node` that is not `name`."""
    return node.input[1] if node.input[0] == name else node.input[0]


def _steps_by_one(graph, node) -> bool:
    """Whether the Slice `node` steps by 1 (its default) on every axis."""
    return len(node.input) < 5 or set(_constant_list(graph, node.input[4]) or []) == {1}


def _is_whole_slice(graph, node) -> bool:
    """Whether the Slice `node` keeps every element: from 0 by steps of 1 to tf2onnx's open end."""
    starts, ends = _constant_list(graph, node.input[1]), _constant_list(graph, node.input[2])
    return (starts is not None and ends is not None and set(starts) == {0}
            and all(end >= _TF2ONNX_OPEN_END for end in ends) and _steps_by_one(graph, node))


def _shape_gather(graph, name: str, producers) -> Tuple[Optional[str], Optional[List]]:
    """(tensor, axes) when `name` is Gather(Shape(tensor), axes), those axes' sizes; else (None, None)."""
    gather = _skip_casts(name, producers)
    if gather is None or gather.op_type != "Gather" or graph.get_node_attribute(gather, "axis") not in (None, 0):
        return None, None
    shape = _skip_casts(gather.input[0], producers)
    if shape is None or shape.op_type != "Shape" or len(shape.attribute):
        return None, None
    return shape.input[0], _constant_list(graph, gather.input[1])


def _projections_as_matmuls(graph) -> int:
    """`Reshape(MatMul(Reshape(x, [∏ free, last]), W), free + [out])`, tf.tensordot(x, W, axes=1), as MatMul(x, W).

    Both shapes must be tf.tensordot's of x, the free axes 0..n−1 and the contracted axis n: x then has rank
    n + 1, and the 3-D MatMul multiplies its last axis as the flattened one did.
    """
    producers, consumers = graph.output_name_to_node(), graph.input_name_to_nodes()
    rewritten = 0
    for matmul in graph.get_nodes_by_op_type("MatMul"):
        weight = graph.get_initializer(matmul.input[1])
        flatten = producers.get(matmul.input[0])
        children = consumers.get(matmul.output[0], [])
        if (weight is None or len(weight.dims) != 2 or flatten is None or flatten.op_type != "Reshape"
                or len(children) != 1 or children[0].op_type != "Reshape"):
            continue
        unflatten, source = children[0], flatten.input[0]
        output_shape, flat_shape = (_skip_casts(reshape.input[1], producers) for reshape in (unflatten, flatten))
        if any(shape is None or shape.op_type != "Concat" or len(shape.input) != 2
               for shape in (output_shape, flat_shape)):
            continue
        contracted = graph.match_parent_path(flat_shape, ["Unsqueeze", "ReduceProd"], [1, 0], producers)
        if not contracted:
            continue
        free_source, free_axes = _shape_gather(graph, output_shape.input[0], producers)
        contracted_source, contracted_axes = _shape_gather(graph, contracted[1].input[0], producers)
        if (free_source != source or contracted_source != source or not free_axes
                or free_axes != list(range(len(free_axes))) or contracted_axes != [len(free_axes)]
                or _constant_list(graph, output_shape.input[1]) != [weight.dims[1]]):
            continue
        matmul.input[0] = source
        matmul.output[0] = unflatten.output[0]
        graph.remove_node(unflatten)
        rewritten += 1
    return rewritten


def _layer_normalizations(graph) -> int:
    """Keras's LayerNormalization over the last axis as a LayerNormalization node.

    tf2onnx writes it as μ = GlobalAveragePool(x) (of a [batch, seq, width] tensor: the mean over the last axis),
    σ² = GlobalAveragePool((x − μ)²), s = Reciprocal(Sqrt(σ² + ε)) · γ and `Add(Mul(x, s), Add(Mul(Neg(μ), s), β))`.
    """
    from onnx import helper, numpy_helper

    producers, consumers = graph.output_name_to_node(), graph.input_name_to_nodes()
    flattened = {}

    def flat(name):
        # LayerNormalization takes γ and β of shape [width]; Keras broadcasts them as [1, 1, width].
        if name not in flattened:
            flattened[name] = f"{name}/flat"
            graph.add_initializer(numpy_helper.from_array(np.ravel(graph.get_constant_value(name)),
                                                          flattened[name]))
        return flattened[name]

    rewritten = 0
    for reciprocal in graph.get_nodes_by_op_type("Reciprocal"):
        variance_path = graph.match_parent_path(
            reciprocal, ["Sqrt", "Add", "GlobalAveragePool", "Mul", "Sub", "GlobalAveragePool"],
            [0, 0, None, 0, 0, 1], producers)
        scale = consumers.get(reciprocal.output[0], [])
        if variance_path is None or len(scale) != 1 or scale[0].op_type != "Mul":
            continue
        _, add_epsilon, variance, square, centred, mean = variance_path
        scale, source = scale[0], mean.input[0]
        epsilon = _constant_list(graph, _other_input(add_epsilon, variance.output[0]))
        gamma = _other_input(scale, reciprocal.output[0])
        negated_mean = [node for node in consumers.get(mean.output[0], []) if node.op_type == "Neg"]
        scaled = {tuple(sorted(node.input)): node for node in consumers.get(scale.output[0], [])
                  if node.op_type == "Mul"}
        if (square.input[0] != square.input[1] or centred.input[0] != source or epsilon is None or len(epsilon) != 1
                or graph.get_constant_value(gamma) is None or len(negated_mean) != 1 or len(scaled) != 2):
            continue
        scaled_input = scaled.get(tuple(sorted([source, scale.output[0]])))
        scaled_mean = scaled.get(tuple(sorted([negated_mean[0].output[0], scale.output[0]])))
        shift = consumers.get(scaled_mean.output[0], []) if scaled_mean is not None else []
        if scaled_input is None or len(shift) != 1 or shift[0].op_type != "Add":
            continue
        beta = _other_input(shift[0], scaled_mean.output[0])
        output = consumers.get(shift[0].output[0], [])
        if (graph.get_constant_value(beta) is None or len(output) != 1 or output[0].op_type != "Add"
                or sorted(output[0].input) != sorted([scaled_input.output[0], shift[0].output[0]])):
            continue
        graph.add_node(helper.make_node("LayerNormalization", [source, flat(gamma), flat(beta)],
                                        [output[0].output[0]], name=f"{reciprocal.name}/LayerNormalization",
                                        axis=-1, epsilon=float(epsilon[0])))
        graph.remove_node(output[0])
        rewritten += 1
    return rewritten


def _scales_as_divisions(graph, head_size: int) -> int:
    """The attention scores' `Mul(QKᵀ, 1/sqrt(head size))` as `Div(QKᵀ, sqrt(head size))`.

    The attention fusion takes the first Mul among the inputs of the Add before the softmax for the mask's bias,
    so with the scale also a Mul it may pick the scale; it reads a Div as the scale. The fused Attention scales by
    1/sqrt(head size) itself, so only that scale is rewritten.
    """
    from onnx import helper, numpy_helper

    producers = graph.output_name_to_node()
    rewritten = 0
    for softmax in graph.get_nodes_by_op_type("Softmax"):
        path = graph.match_parent_path(softmax, ["Add", "Mul", "MatMul"], [0, None, 0], producers)
        if not path or _constant_list(graph, path[1].input[1]) != [np.float32(1 / np.sqrt(head_size))]:
            continue
        scale, scores = path[1:]
        divisor = f"{scale.name}/sqrt_head_size"
        graph.add_initializer(numpy_helper.from_array(np.array(np.sqrt(head_size), np.float32), divisor))
        graph.add_node(helper.make_node("Div", [scores.output[0], divisor], [scale.output[0]],
                                        name=f"{scale.name}/Div"))
        graph.remove_node(scale)
        rewritten += 1
    return rewritten


def _mask_axes_one_at_a_time(graph) -> int:
    """The mask bias's `Unsqueeze(mask, axes=[1, 2])` (behind tf2onnx's Slice of every element) as two single-axis
    Unsqueezes: the attention fusion matches `Mul(Sub(1, Unsqueeze(Unsqueeze(mask))), −10000)`."""
    from onnx import helper, numpy_helper

    producers = graph.output_name_to_node()
    rewritten = 0
    for mask_bias in graph.get_nodes_by_op_type("Mul"):
        inverted = graph.match_parent_path(mask_bias, ["Sub"], [0], producers)
        if not inverted or _constant_list(graph, mask_bias.input[1]) != [-10000.0]:
            continue
        inverted = inverted[0]
        expanded = producers.get(inverted.input[1])
        if expanded is not None and expanded.op_type == "Slice" and _is_whole_slice(graph, expanded):
            expanded = producers.get(expanded.input[0])
        if (_constant_list(graph, inverted.input[0]) != [1.0] or expanded is None
                or expanded.op_type != "Unsqueeze" or _constant_list(graph, expanded.input[1]) != [1, 2]):
            continue
        previous = expanded.input[0]
        for axis in (1, 2):
            name = f"{expanded.name}/axis_{axis}"
            graph.add_initializer(numpy_helper.from_array(np.array([axis], np.int64), f"{name}/axes"))
            graph.add_node(helper.make_node("Unsqueeze", [previous, f"{name}/axes"], [name], name=name))
            previous = name
        inverted.input[1] = previous
        rewritten += 1
    return rewritten


def _positions_gathered(graph) -> int:
    """The embeddings' position rows `table[:seq][None]` as BERT's `Gather(table, position_ids)`, position_ids =
    `arange(max_positions)[None][:, :seq]` with seq = Shape(input ids)[1]: the position path that the
    EmbedLayerNormalization fusion matches."""
    from onnx import helper, numpy_helper

    producers = graph.output_name_to_node()
    rewritten = 0
    for layer_norm in graph.get_nodes_by_op_type("LayerNormalization"):
        embedding_sum = graph.match_parent_path(layer_norm, ["Add", "Add", "Gather"], [0, 0, 0], producers)
        table = _position_table(graph, embedding_sum[0].input[1], embedding_sum[2].input[1],
                                producers) if embedding_sum else None
        if table is None:
            continue
        input_ids, ids = embedding_sum[2].input[1], f"{table}/position_ids"
        constants = {"range": np.arange(graph.get_initializer(table).dims[0], dtype=np.int64)[None],
                     "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
                     "sequence_axis": np.array(1, np.int64)}
        for name, value in constants.items():
            graph.add_initializer(numpy_helper.from_array(value, f"{ids}/{name}"))
        graph.add_nodes([
            helper.make_node("Shape", [input_ids], [f"{ids}/shape"], name=f"{ids}/Shape"),
            helper.make_node("Gather", [f"{ids}/shape", f"{ids}/sequence_axis"], [f"{ids}/length"],
                             name=f"{ids}/Gather"),
            helper.make_node("Unsqueeze", [f"{ids}/length", f"{ids}/zero"], [f"{ids}/end"], name=f"{ids}/Unsqueeze"),
            helper.make_node("Slice", [f"{ids}/range", f"{ids}/zero", f"{ids}/end", f"{ids}/one", f"{ids}/one"],
                             [ids], name=f"{ids}/Slice"),
            helper.make_node("Gather", [table, ids], [f"{table}/positions"], name=f"{table}/Gather")])
        embedding_sum[0].input[1] = f"{table}/positions"
        rewritten += 1
    return rewritten


def _position_table(graph, positions: str, input_ids: str, producers) -> Optional[str]:
    """The [max_positions, width] initializer whose first seq rows `positions` ([1, seq, width]) are, or None.

    With a dynamic sequence axis tf2onnx writes `Unsqueeze(Slice(table, 0, Shape(input_ids)[1]), 0)` (behind a
    Slice of every element); with a fixed one it folds that into a constant, which is then the table itself.
    """
    from onnx import numpy_helper

    folded = graph.get_constant_value(positions)
    if folded is not None:
        if folded.ndim != 3 or folded.shape[0] != 1:
            return None
        graph.add_initializer(numpy_helper.from_array(folded[0], f"{positions}/table"))
        return f"{positions}/table"
    expanded = producers.get(positions)
    if expanded is not None and expanded.op_type == "Slice" and _is_whole_slice(graph, expanded):
        expanded = producers.get(expanded.input[0])
    if expanded is None or expanded.op_type != "Unsqueeze" or _constant_list(graph, expanded.input[1]) != [0]:
        return None
    rows = producers.get(expanded.input[0])
    if rows is None or rows.op_type != "Slice" or len(rows.input) < 4:
        return None
    table = graph.get_initializer(rows.input[0])
    if (table is None or len(table.dims) != 2 or _constant_list(graph, rows.input[1]) != [0]
            or _constant_list(graph, rows.input[3]) != [0] or not _steps_by_one(graph, rows)
            or _sequence_length_of(graph, rows.input[2], producers) != input_ids):
        return None
    return table.name


def _sequence_length_of(graph, name: str, producers) -> Optional[str]:
    """The tensor whose axis 1 `name` is, when it is `Shape(tensor)[1:2]` (behind casts); else None."""
    length = _skip_casts(name, producers)
    if length is None or length.op_type != "Slice" or len(length.input) < 4:
        return None
    shape = _skip_casts(length.input[0], producers)
    if (shape is None or shape.op_type != "Shape" or len(shape.attribute)
            or [_constant_list(graph, name) for name in length.input[1:4]] != [[1], [2], [0]]
            or not _steps_by_one(graph, length)):
        return None
    return shape.input[0]


def _deduplicate_initializers(graph) -> int:
    """Keeps one of the initializers of the same dtype, shape and bytes and points every consumer at it; returns
    how many it removed. The fused Attention nodes of a shared block each hold its merged QKV weights."""
    from onnx import numpy_helper

    kept = {}
    replacements = {}
    graph_outputs = {output.name for output in graph.output}
    for initializer in graph.initializer:
        content = np.ascontiguousarray(numpy_helper.to_array(initializer))
        key = (initializer.data_type, tuple(initializer.dims), hashlib.sha256(content).digest())
        if key not in kept:
            kept[key] = (initializer.name, content)
        elif initializer.name not in graph_outputs and kept[key][1].tobytes() == content.tobytes():
            replacements[initializer.name] = kept[key][0]
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in replacements:
                node.input[index] = replacements[name]
    duplicates = [initializer for initializer in graph.initializer if initializer.name in replacements]
    for initializer in duplicates:
        graph.initializer.remove(initializer)
    return len(duplicates)


def _slices_of_merged_weights(graph) -> int:
    """Points the consumers of every initializer that holds the same bytes as a third of a fused Attention node's
    merged QKV weight (its columns) or bias at a Slice of that merged initializer, and removes it; returns how many
    it removed.

    onnxruntime's attention fusion stacks a layer's [width, width] Q, K and V weights into one [width, 3 · width]
    weight, Q's columns then K's then V's, and its biases likewise; a classifier's last block, unfused, keeps the
    three of its own. Only an initializer that MatMuls multiply by (their input 1) or Adds add is replaced, so a
    fused operator never reads a Slice; a session folds the Slices into constants when it loads the model.
    """
    from onnx import helper, numpy_helper

    initializers = {initializer.name: initializer for initializer in graph.initializer}
    thirds = {}
    for node in graph.node:
        if node.op_type != "Attention":
            continue
        for position, axis in ((1, 1), (2, 0)):  # the weight's columns, the bias
            merged = initializers.get(node.input[position]) if len(node.input) > position else None
            if merged is None or len(merged.dims) != axis + 1 or merged.dims[axis] % 3:
                continue
            for index, third in enumerate(np.split(numpy_helper.to_array(merged), 3, axis=axis)):
                third = np.ascontiguousarray(third)
                thirds.setdefault((merged.data_type, third.shape, hashlib.sha256(third).digest()),
                                  (merged.name, index, axis, third))
    merged_names = {name for name, _, _, _ in thirds.values()}
    consumers = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node.op_type, position))
    graph_outputs = {output.name for output in graph.output}
    replacements, slices = {}, {}
    for initializer in list(graph.initializer):  # the Slices' bounds are added as it goes
        uses = consumers.get(initializer.name, [])
        if (initializer.name in merged_names or initializer.name in graph_outputs or not uses
                or not all(op_type == "Add" or (op_type == "MatMul" and position == 1) for op_type, position in uses)):
            continue
        content = np.ascontiguousarray(numpy_helper.to_array(initializer))
        match = thirds.get((initializer.data_type, content.shape, hashlib.sha256(content).digest()))
        if match is None or match[3].tobytes() != content.tobytes():
            continue
        merged, index, axis, third = match
        name = f"{merged}/{('query', 'key', 'value')[index]}"
        if name not in slices:
            width = third.shape[axis]
            bounds = {"starts": [index * width], "ends": [(index + 1) * width], "axes": [axis]}
            for bound, value in bounds.items():
                graph.initializer.append(numpy_helper.from_array(np.array(value, np.int64), f"{name}/{bound}"))
            slices[name] = helper.make_node("Slice", [merged] + [f"{name}/{bound}" for bound in bounds], [name],
                                            name=f"{name}/Slice")
        replacements[initializer.name] = name
    for node in graph.node:
        for position, name in enumerate(node.input):
            if name in replacements:
                node.input[position] = replacements[name]
    # Slices of initializers only: first in the node list, which stays in topological order.
    for node in reversed(list(slices.values())):
        graph.node.insert(0, node)
    for initializer in [initializer for initializer in graph.initializer if initializer.name in replacements]:
        graph.initializer.remove(initializer)
    if replacements:
        logger.info("%d initializer(s) equal to thirds of the fused layers' merged QKV weights now read them "
                    "through a Slice.", len(replacements))
    return len(replacements)


def _products_of_whole_weights(graph) -> int:
    """Each `MatMul(x, Slice(W, columns))` of a 2-D initializer W as `Slice(MatMul(x, W), columns)` on the last
    axis, one MatMul of each x by each W; returns how many MatMuls it rewrote.

    onnxruntime's dynamic quantizer quantizes a MatMul only when its weight is an initializer (MatMulConstBOnly),
    and each initializer once: the rewritten MatMuls read the int8 weight of the fused layers' Attention, and the
    float W is not kept beside it. It costs the MatMul the columns it slices away (a classifier's last block: the
    queries of every position beside the keys and values, under 1% of ALBERT-base's products).
    """
    from onnx import helper, numpy_helper

    initializers = {initializer.name: initializer for initializer in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}

    def constant(name):
        return numpy_helper.to_array(initializers[name]).tolist() if name in initializers else None

    nodes, products, rewritten = [], {}, 0
    for node in graph.node:
        columns = producers.get(node.input[1]) if node.op_type == "MatMul" else None
        weight = initializers.get(columns.input[0]) if columns is not None and columns.op_type == "Slice" else None
        if (weight is None or len(weight.dims) != 2 or len(columns.input) < 4
                or constant(columns.input[3]) not in ([1], [-1])
                or (len(columns.input) > 4 and set(constant(columns.input[4]) or [0]) != {1})
                or constant(columns.input[1]) is None or constant(columns.input[2]) is None):
            nodes.append(node)
            continue
        key, name = (node.input[0], weight.name), node.name or node.output[0]
        if key not in products:
            products[key] = f"{name}/product"
            nodes.append(helper.make_node("MatMul", list(key), [products[key]], name=products[key]))
        graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), f"{name}/last_axis"))
        nodes.append(helper.make_node("Slice", [products[key], *columns.input[1:3], f"{name}/last_axis"],
                                      list(node.output), name=f"{name}/columns"))
        rewritten += 1
    if rewritten:
        # The Slices of the weights that no MatMul reads any more go, and so do their bounds.
        graph_outputs = {output.name for output in graph.output}
        used = {name for node in nodes for name in node.input} | graph_outputs
        nodes = [node for node in nodes if node.op_type != "Slice" or any(name in used for name in node.output)]
        del graph.node[:]
        graph.node.extend(nodes)
        used = {name for node in nodes for name in node.input} | graph_outputs
        for initializer in [initializer for initializer in graph.initializer if initializer.name not in used]:
            graph.initializer.remove(initializer)
    return rewritten
