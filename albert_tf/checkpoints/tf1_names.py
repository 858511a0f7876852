"""The original TF1 checkpoint name of every variable of an AlbertEncoder or AlbertPretrainer.

Names follow google-research/albert modeling.py. A shared half (index 1) sits exactly where the
original puts it; its LayerNorm is the inner group's `LayerNorm` (attention) or `LayerNorm_1`
(feed-forward). Partial sharing has no original names: an unshared half of layer l is
`attention_{l+1}` / `ffn_{l+1}` under its group, with its LayerNorm nested inside that scope.

Besides the maps from names to variables, this module parses block names (for layout checks and
the original's `init_from_group0` rewrites) and translates the object paths of this project's
own tf.train checkpoints into TF1 names.
"""

import re
from typing import Dict, List, NamedTuple, Optional

HALF_KINDS = ("attention", "ffn")
_HALF_LAYER_NORM = {"attention": "LayerNorm", "ffn": "LayerNorm_1"}
PRETRAINING_HEAD_SCOPES = ("cls/predictions/", "cls/seq_relationship/")


def _dense(prefix, layer):
    return {prefix + "/kernel": layer.kernel, prefix + "/bias": layer.bias}


def _layer_norm(prefix, layer):
    return {prefix + "/gamma": layer.gamma, prefix + "/beta": layer.beta}


def half_variable_name(kind, group, inner, index, suffix, scope="bert") -> str:
    """The TF1 name of one variable of a block half.

    `suffix` is relative to the half (`self/query/kernel`, `intermediate/output/dense/bias`) or
    is its LayerNorm (`LayerNorm/gamma` for attention, `LayerNorm_1/beta` for feed-forward),
    which sits beside the half at index 1 and inside it otherwise.

    Example:
    >>> half_variable_name("ffn", 0, 1, 3, "LayerNorm_1/gamma")
    'bert/encoder/transformer/group_0/inner_group_1/ffn_3/LayerNorm_1/gamma'
    """
    base = f"{scope}/encoder/transformer/group_{group}/inner_group_{inner}"
    if suffix.startswith(_HALF_LAYER_NORM[kind] + "/") and index == 1:
        return f"{base}/{suffix}"
    return f"{base}/{kind}_{index}/{suffix}"


def encoder_variable_map(encoder, scope="bert") -> Dict[str, object]:
    """TF1 name -> tf.Variable for every encoder variable (shared variables appear once)."""
    names = {}
    embeddings = encoder.embeddings
    names[f"{scope}/embeddings/word_embeddings"] = embeddings.word_embeddings
    names[f"{scope}/embeddings/token_type_embeddings"] = embeddings.token_type_embeddings
    names[f"{scope}/embeddings/position_embeddings"] = embeddings.position_embeddings
    names.update(_layer_norm(f"{scope}/embeddings/LayerNorm", embeddings.layer_norm))
    if encoder.embedding_projection is not None:
        names.update(_dense(f"{scope}/encoder/embedding_hidden_mapping_in", encoder.embedding_projection))

    plan = encoder.sharing_plan
    for (group, inner, index), attention in zip(plan.attention_keys, encoder.attention_layers):
        def name(suffix):
            return half_variable_name("attention", group, inner, index, suffix, scope)
        for projection in ("query", "key", "value"):
            names[name(f"self/{projection}/kernel")] = getattr(attention, projection).kernel
            names[name(f"self/{projection}/bias")] = getattr(attention, projection).bias
        names[name("output/dense/kernel")] = attention.output_dense.kernel
        names[name("output/dense/bias")] = attention.output_dense.bias
        names[name("LayerNorm/gamma")] = attention.layer_norm.gamma
        names[name("LayerNorm/beta")] = attention.layer_norm.beta
    for (group, inner, index), ffn in zip(plan.ffn_keys, encoder.feed_forward_layers):
        def name(suffix):
            return half_variable_name("ffn", group, inner, index, suffix, scope)
        names[name("intermediate/dense/kernel")] = ffn.intermediate.kernel
        names[name("intermediate/dense/bias")] = ffn.intermediate.bias
        names[name("intermediate/output/dense/kernel")] = ffn.output_dense.kernel
        names[name("intermediate/output/dense/bias")] = ffn.output_dense.bias
        names[name("LayerNorm_1/gamma")] = ffn.layer_norm.gamma
        names[name("LayerNorm_1/beta")] = ffn.layer_norm.beta
    names.update(_dense(f"{scope}/pooler/dense", encoder.pooler))
    return names


def pretrainer_variable_map(pretrainer, scope="bert") -> Dict[str, object]:
    """The encoder's names plus the `cls/predictions` and `cls/seq_relationship` heads."""
    names = encoder_variable_map(pretrainer.encoder, scope)
    mlm = pretrainer.masked_lm_head
    names.update(_dense("cls/predictions/transform/dense", mlm.dense))
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm))
    names["cls/predictions/output_bias"] = mlm.output_bias
    sop = pretrainer.sentence_order_head
    names["cls/seq_relationship/output_weights"] = sop.output_weights
    names["cls/seq_relationship/output_bias"] = sop.output_bias
    return names


def model_variable_map(model) -> Dict[str, object]:
    """TF1 name -> variable for an AlbertEncoder, an AlbertPretrainer, or any model with an
    `.encoder` (an AlbertEncoder) and optionally `head_variable_map()` for its own heads.

    Raises ValueError when the model has no encoder, when a head name collides with another
    name, or when some model variable has no name (it would be silently skipped otherwise).
    """
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models.pretrainer import AlbertPretrainer

    if isinstance(model, AlbertPretrainer):
        names = pretrainer_variable_map(model)
    elif isinstance(model, AlbertEncoder):
        names = encoder_variable_map(model)
    elif isinstance(getattr(model, "encoder", None), AlbertEncoder):
        names = encoder_variable_map(model.encoder)
    else:
        raise ValueError(f"{type(model).__name__} is not an AlbertEncoder or AlbertPretrainer and has no "
                         f"`.encoder` attribute holding an AlbertEncoder, so its weights have no TF1 names.")
    if hasattr(model, "head_variable_map"):
        heads = model.head_variable_map()
        clashes = sorted(set(heads) & set(names))
        if clashes:
            raise ValueError(f"{type(model).__name__}.head_variable_map() reuses names of the encoder or "
                             f"pretraining heads: {clashes}.")
        names.update(heads)
    named = {id(variable) for variable in names.values()}
    unnamed = [variable.path for variable in model.weights if id(variable) not in named]
    if unnamed:
        raise ValueError(f"{type(model).__name__} has variables without a TF1 name: {unnamed}; return them "
                         f"from its head_variable_map().")
    return names


# ---- block names -------------------------------------------------------------------------------

class HalfName(NamedTuple):
    """A parsed block-half variable name: which half instance it belongs to, and the rest."""

    kind: str
    group: int
    inner: int
    index: int
    suffix: str


_BLOCK_NAME = re.compile(r"^(?P<scope>.+?)/encoder/transformer/group_(?P<group>\d+)/inner_group_(?P<inner>\d+)/"
                         r"(?P<rest>.+)$")
_HALF_SCOPE = re.compile(r"^(?P<kind>attention|ffn)_(?P<index>\d+)/(?P<suffix>.+)$")


def parse_half_name(name) -> Optional[HalfName]:
    """Parses `.../group_g/inner_group_i/...` names; None for any other name.

    Example:
    >>> parse_half_name("bert/encoder/transformer/group_1/inner_group_0/LayerNorm/gamma")
    HalfName(kind='attention', group=1, inner=0, index=1, suffix='LayerNorm/gamma')
    """
    match = _BLOCK_NAME.match(name)
    if not match:
        return None
    group, inner, rest = int(match["group"]), int(match["inner"]), match["rest"]
    for kind, layer_norm in _HALF_LAYER_NORM.items():
        if rest.startswith(layer_norm + "/"):
            return HalfName(kind, group, inner, 1, rest)
    half = _HALF_SCOPE.match(rest)
    if not half:
        return None
    return HalfName(half["kind"], group, inner, int(half["index"]), half["suffix"])


def group0_candidates(name, scope="bert") -> List[str]:
    """The names the original's `init_from_group0` assignment map tries for `name`, in its order.

    The original rewrites `group_g` -> `group_0`, then `ffn_k` -> `ffn_1`, then `attention_k` ->
    `attention_1`, one rewrite at a time. This also rewrites group and index together (so a
    grouped, partially shared model can start from an all-shared checkpoint) and moves the
    LayerNorm of a rewritten half to where index 1 keeps it.

    Example:
    >>> group0_candidates("bert/encoder/transformer/group_1/inner_group_0/ffn_3/LayerNorm_1/beta")[-1]
    'bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/beta'
    """
    half = parse_half_name(name)
    if half is None:
        return []
    candidates = []
    for group, index in ((0, half.index), (half.group, 1), (0, 1)):
        candidate = half_variable_name(half.kind, group, half.inner, index, half.suffix, scope)
        if candidate != name and candidate not in candidates:
            candidates.append(candidate)
    return candidates


# ---- object paths of this project's tf.train checkpoints ---------------------------------------

_NATIVE_EMBEDDINGS = {
    "embeddings/word_embeddings": "bert/embeddings/word_embeddings",
    "embeddings/token_type_embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings/position_embeddings": "bert/embeddings/position_embeddings",
    "embeddings/layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
    "embeddings/layer_norm/beta": "bert/embeddings/LayerNorm/beta",
}
_NATIVE_DENSE = {
    "embedding_projection": "bert/encoder/embedding_hidden_mapping_in",
    "pooler": "bert/pooler/dense",
}
_NATIVE_HALF = re.compile(r"^group_(?P<group>\d+)_inner_group_(?P<inner>\d+)_(?P<kind>attention|ffn)_(?P<index>\d+)/"
                          r"(?P<layer>\w+)/(?P<variable>\w+)$")
_NATIVE_HALF_LAYERS = {
    "attention": {"query": "self/query", "key": "self/key", "value": "self/value", "output_dense": "output/dense",
                  "layer_norm": "LayerNorm"},
    "ffn": {"intermediate": "intermediate/dense", "output_dense": "intermediate/output/dense",
            "layer_norm": "LayerNorm_1"},
}
_NATIVE_HEADS = {
    "masked_lm_head/dense": "cls/predictions/transform/dense",
    "masked_lm_head/layer_norm": "cls/predictions/transform/LayerNorm",
    "masked_lm_head/output_bias": "cls/predictions/output_bias",
    "sentence_order_head/output_weights": "cls/seq_relationship/output_weights",
    "sentence_order_head/output_bias": "cls/seq_relationship/output_bias",
}
_VARIABLE_NAMES = {"_kernel": "kernel", "kernel": "kernel", "bias": "bias", "gamma": "gamma", "beta": "beta"}


def native_path_to_tf1_name(path) -> Optional[str]:
    """The TF1 name of a variable at an object path of a tf.train.Checkpoint of this project's
    models, given relative to the pretrainer (`encoder/...`, `masked_lm_head/...`,
    `sentence_order_head/...`); None for any other path.

    Example:
    >>> native_path_to_tf1_name("encoder/group_0_inner_group_0_attention_1/query/_kernel")
    'bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel'
    """
    if path in _NATIVE_HEADS:
        return _NATIVE_HEADS[path]
    head, _, variable = path.rpartition("/")
    if head in _NATIVE_HEADS and variable in _VARIABLE_NAMES:
        return f"{_NATIVE_HEADS[head]}/{_VARIABLE_NAMES[variable]}"
    if not path.startswith("encoder/"):
        return None
    path = path[len("encoder/"):]
    if path in _NATIVE_EMBEDDINGS:
        return _NATIVE_EMBEDDINGS[path]
    head, _, variable = path.rpartition("/")
    if head in _NATIVE_DENSE and variable in ("_kernel", "kernel", "bias"):
        return f"{_NATIVE_DENSE[head]}/{_VARIABLE_NAMES[variable]}"
    match = _NATIVE_HALF.match(path)
    if not match or match["variable"] not in _VARIABLE_NAMES:
        return None
    layer = _NATIVE_HALF_LAYERS[match["kind"]].get(match["layer"])
    if layer is None:
        return None
    return half_variable_name(match["kind"], int(match["group"]), int(match["inner"]), int(match["index"]),
                              f"{layer}/{_VARIABLE_NAMES[match['variable']]}")
