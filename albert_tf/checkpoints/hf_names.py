"""Hugging Face `AlbertForPreTraining` names and config.json, to and from the original TF1 names.

Every function here works on plain dicts of numpy arrays keyed by name, so the table is the
whole story: reading.py and writing.py read and write the files.

- torch `Linear` weights are stored [out, in]: every dense kernel is transposed; the SOP
  classifier (`cls/seq_relationship/output_weights`, already [2, H]) is not.
- HF always has `albert.encoder.embedding_hidden_mapping_in`, even when E == H where the
  original has none: it is written as an identity kernel with a zero bias, and read back only
  when it is exactly that.
- The MLM decoder is tied: `predictions.decoder.weight` is the word-embedding table and
  `predictions.decoder.bias` is `predictions.bias`. They are not written (HF re-ties them); when a
  file carries them they must equal what they are tied to.
- HF shares whole blocks per group and picks layer i's group as int(i / (L / G)), where the
  original uses int(i / L * G). A share_type=all config is written with its own groups when the
  two formulas agree at every layer and every group is used. Otherwise (partial sharing, or a
  config where the float formulas disagree) it is written "expanded": one HF group per layer
  holding exactly the halves that layer runs, a shared half copied into every layer that uses
  it, and `albert_tf_share_type` / `albert_tf_num_hidden_groups` recorded in config.json. HF
  then runs it as an unshared model with identical outputs; reading it back folds the copies
  into one variable and requires them to be bit-identical.
- Task heads map by the architecture config.json names: `classifier.*` of
  AlbertForSequenceClassification and AlbertForMultipleChoice is run_classifier's and run_race's
  `output_weights` / `output_bias`, and `qa_outputs.*` of AlbertForQuestionAnswering is the SQuAD
  v1 head `cls/squad/output_weights` / `output_bias`. Both sides store them [outputs, H] (torch's
  [out, in] is the original's layout here), so nothing is transposed. AlbertForTokenClassification
  also names its per-token head `classifier`, which is why the names alone do not decide: its head is
  AlbertTokenClassifier's `cls/token_classification/output_weights` / `output_bias`.
- Other names outside ALBERT's own (the SQuAD v2 head, unknown keys) keep their TF1 name as the HF key.
"""

import re
from typing import Dict, Tuple

import numpy as np

from albert_tf.checkpoints.tf1_names import half_variable_name, parse_half_name
from albert_tf.config import PASSTHROUGH_KEYS, AlbertConfig
from albert_tf.layers.initializers import LAYER_NORM_EPSILON
from albert_tf.models.sharing import build_sharing_plan

SHARE_TYPE_KEY = "albert_tf_share_type"
NUM_HIDDEN_GROUPS_KEY = "albert_tf_num_hidden_groups"
HF_CLASSIFIER_DROPOUT = 0.1

# HF name -> (TF1 name, transposed).
_GLOBAL_NAMES = {
    "albert.embeddings.word_embeddings.weight": ("bert/embeddings/word_embeddings", False),
    "albert.embeddings.token_type_embeddings.weight": ("bert/embeddings/token_type_embeddings", False),
    "albert.embeddings.position_embeddings.weight": ("bert/embeddings/position_embeddings", False),
    "albert.embeddings.LayerNorm.weight": ("bert/embeddings/LayerNorm/gamma", False),
    "albert.embeddings.LayerNorm.bias": ("bert/embeddings/LayerNorm/beta", False),
    "albert.encoder.embedding_hidden_mapping_in.weight": ("bert/encoder/embedding_hidden_mapping_in/kernel", True),
    "albert.encoder.embedding_hidden_mapping_in.bias": ("bert/encoder/embedding_hidden_mapping_in/bias", False),
    "albert.pooler.weight": ("bert/pooler/dense/kernel", True),
    "albert.pooler.bias": ("bert/pooler/dense/bias", False),
    "predictions.dense.weight": ("cls/predictions/transform/dense/kernel", True),
    "predictions.dense.bias": ("cls/predictions/transform/dense/bias", False),
    "predictions.LayerNorm.weight": ("cls/predictions/transform/LayerNorm/gamma", False),
    "predictions.LayerNorm.bias": ("cls/predictions/transform/LayerNorm/beta", False),
    "predictions.bias": ("cls/predictions/output_bias", False),
    "sop_classifier.classifier.weight": ("cls/seq_relationship/output_weights", False),
    "sop_classifier.classifier.bias": ("cls/seq_relationship/output_bias", False),
}
_TF1_GLOBAL_NAMES = {tf1: (hf, transposed) for hf, (tf1, transposed) in _GLOBAL_NAMES.items()}

# Suffix under `albert.encoder.albert_layer_groups.{g}.albert_layers.{i}.` -> (half, TF1 suffix, transposed).
_BLOCK_PARTS = {
    "attention.query.weight": ("attention", "self/query/kernel", True),
    "attention.query.bias": ("attention", "self/query/bias", False),
    "attention.key.weight": ("attention", "self/key/kernel", True),
    "attention.key.bias": ("attention", "self/key/bias", False),
    "attention.value.weight": ("attention", "self/value/kernel", True),
    "attention.value.bias": ("attention", "self/value/bias", False),
    "attention.dense.weight": ("attention", "output/dense/kernel", True),
    "attention.dense.bias": ("attention", "output/dense/bias", False),
    "attention.LayerNorm.weight": ("attention", "LayerNorm/gamma", False),
    "attention.LayerNorm.bias": ("attention", "LayerNorm/beta", False),
    "ffn.weight": ("ffn", "intermediate/dense/kernel", True),
    "ffn.bias": ("ffn", "intermediate/dense/bias", False),
    "ffn_output.weight": ("ffn", "intermediate/output/dense/kernel", True),
    "ffn_output.bias": ("ffn", "intermediate/output/dense/bias", False),
    "full_layer_layer_norm.weight": ("ffn", "LayerNorm_1/gamma", False),
    "full_layer_layer_norm.bias": ("ffn", "LayerNorm_1/beta", False),
}
# HF architecture -> {HF head name: TF1 head name}.
_TASK_HEADS = {
    "AlbertForSequenceClassification": {"classifier.weight": "output_weights", "classifier.bias": "output_bias"},
    "AlbertForMultipleChoice": {"classifier.weight": "output_weights", "classifier.bias": "output_bias"},
    "AlbertForQuestionAnswering": {"qa_outputs.weight": "cls/squad/output_weights",
                                   "qa_outputs.bias": "cls/squad/output_bias"},
    "AlbertForTokenClassification": {"classifier.weight": "cls/token_classification/output_weights",
                                     "classifier.bias": "cls/token_classification/output_bias"},
}
_BLOCK_NAME = re.compile(r"^albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)$")
_MAPPING_IN = "albert.encoder.embedding_hidden_mapping_in"
_TIED = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
         "predictions.decoder.bias": "predictions.bias"}
_BUFFERS = ("albert.embeddings.position_ids", "albert.embeddings.token_type_ids")
_BASE_MODEL_PREFIXES = ("embeddings.", "encoder.", "pooler.")

# What transformers' AlbertConfig assumes for a key that config.json leaves out.
HF_CONFIG_DEFAULTS = dict(
    vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_layers=12, num_hidden_groups=1,
    num_attention_heads=64, intermediate_size=16384, inner_group_num=1, hidden_act="gelu_new",
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=512, type_vocab_size=2,
    initializer_range=0.02, layer_norm_eps=LAYER_NORM_EPSILON,
)
_COPIED_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "inner_group_num", "hidden_dropout_prob", "attention_probs_dropout_prob",
                  "max_position_embeddings", "type_vocab_size", "initializer_range")
# HF's activation names -> ours. HF's "gelu" is the exact erf GELU, which ALBERT never used.
_HF_ACTIVATIONS = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh",
                   "linear": "linear"}


class HfConversionError(ValueError):
    """A Hugging Face file or config that has no exact ALBERT equivalent."""


# ---- group layout ------------------------------------------------------------------------------

def hf_group_of_layer(layer_index, num_hidden_layers, num_hidden_groups) -> int:
    """transformers' AlbertTransformer formula."""
    return int(layer_index / (num_hidden_layers / num_hidden_groups))


def formula_disagreements(num_hidden_layers, num_hidden_groups):
    """Layers whose group differs between the original's int(i / L * G) and HF's int(i / (L / G)).

    Example:
    >>> formula_disagreements(22, 22)
    [15]
    """
    return [layer for layer in range(num_hidden_layers)
            if int(layer / num_hidden_layers * num_hidden_groups)
            != hf_group_of_layer(layer, num_hidden_layers, num_hidden_groups)]


def uses_plain_layout(config) -> bool:
    """Whether HF can run this config with its own groups (else the expanded layout is written)."""
    used_groups = {config.group_of_layer(layer) for layer in range(config.num_hidden_layers)}
    return (config.share_type == "all" and used_groups == set(range(config.num_hidden_groups))
            and not formula_disagreements(config.num_hidden_layers, config.num_hidden_groups))


# ---- config.json -------------------------------------------------------------------------------

def albert_config_from_hf(values: dict, source="config.json") -> AlbertConfig:
    """An AlbertConfig from a Hugging Face ALBERT config.json dict (HF defaults fill gaps)."""
    model_type = values.get("model_type", "albert")
    if model_type != "albert":
        raise HfConversionError(f"{source} has model_type={model_type!r}; only 'albert' can be converted.")
    merged = dict(HF_CONFIG_DEFAULTS, **values)
    hidden_act = merged["hidden_act"]
    if hidden_act not in _HF_ACTIVATIONS:
        raise HfConversionError(
            f"{source} has hidden_act={hidden_act!r}; allowed: {', '.join(_HF_ACTIVATIONS)} (HF's 'gelu' is the "
            f"exact erf GELU, while ALBERT's gelu is HF's 'gelu_new').")
    if merged["layer_norm_eps"] != LAYER_NORM_EPSILON:
        raise HfConversionError(f"{source} has layer_norm_eps={merged['layer_norm_eps']!r}; ALBERT uses "
                                f"{LAYER_NORM_EPSILON}.")
    if merged.get("tie_word_embeddings", True) is not True:
        raise HfConversionError(f"{source} has tie_word_embeddings={merged['tie_word_embeddings']!r}; ALBERT's "
                                f"MLM decoder is the word-embedding table.")
    fields = {name: merged[name] for name in _COPIED_FIELDS}
    fields["hidden_act"] = _HF_ACTIVATIONS[hidden_act]
    fields["num_hidden_groups"] = merged.get(NUM_HIDDEN_GROUPS_KEY, merged["num_hidden_groups"])
    fields["share_type"] = merged.get(SHARE_TYPE_KEY, "all")
    for name in ("down_scale_factor",) + PASSTHROUGH_KEYS:
        if name in values:
            fields[name] = values[name]
    return AlbertConfig.from_dict(fields, source=source)


def hf_config_from_albert(config: AlbertConfig, architectures, num_labels=None,
                          classifier_dropout_prob=HF_CLASSIFIER_DROPOUT) -> dict:
    """The config.json dict for `config`, in the layout `uses_plain_layout` picks.

    `num_labels` writes transformers' label maps, from which it sizes AlbertForSequenceClassification's
    head (without them it assumes two labels).
    """
    values = {name: getattr(config, name) for name in _COPIED_FIELDS}
    values.update(
        architectures=list(architectures), model_type="albert",
        hidden_act="gelu_new" if config.hidden_act in ("gelu", "gelu_new") else config.hidden_act,
        num_hidden_groups=config.num_hidden_groups, layer_norm_eps=LAYER_NORM_EPSILON,
        classifier_dropout_prob=classifier_dropout_prob, pad_token_id=0, bos_token_id=2, eos_token_id=3,
        tie_word_embeddings=True, down_scale_factor=config.down_scale_factor)
    if num_labels is not None:
        values.update(id2label={str(label): f"LABEL_{label}" for label in range(num_labels)},
                      label2id={f"LABEL_{label}": label for label in range(num_labels)})
    values.update(config.extra_keys)
    if not uses_plain_layout(config):
        values.update({"num_hidden_groups": config.num_hidden_layers, SHARE_TYPE_KEY: config.share_type,
                       NUM_HIDDEN_GROUPS_KEY: config.num_hidden_groups})
    return values


# ---- weights -----------------------------------------------------------------------------------

def task_head_names(architectures) -> Dict[str, str]:
    """HF head name -> TF1 name, for the task heads of the architectures a config.json lists.

    Example:
    >>> task_head_names(["AlbertForQuestionAnswering"])["qa_outputs.weight"]
    'cls/squad/output_weights'
    >>> task_head_names(["AlbertForTokenClassification"])["classifier.weight"]
    'cls/token_classification/output_weights'
    """
    names = {}
    for architecture in architectures:
        names.update(_TASK_HEADS.get(architecture, {}))
    return names


def _hf_block_name(group, inner, part):
    return f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}.{part}"


def _convert(array, transposed):
    return np.ascontiguousarray(array.T) if transposed else array


def _block_halves(config):
    """(HF group, inner) -> {"attention": (group, inner, index), "ffn": ...} for the layout written."""
    if uses_plain_layout(config):
        return {(group, inner): {kind: (group, inner, 1) for kind in ("attention", "ffn")}
                for group in range(config.num_hidden_groups) for inner in range(config.inner_group_num)}
    plan = build_sharing_plan(config)
    return {(block.layer_index, block.inner_index): {"attention": plan.attention_keys[block.attention_index],
                                                     "ffn": plan.ffn_keys[block.ffn_index]}
            for block in plan.blocks}


def tf1_to_hf(arrays: Dict[str, np.ndarray], config: AlbertConfig, architecture=None) -> Dict[str, np.ndarray]:
    """TF1-named arrays of a model with `config` -> the HF state dict (tied decoder left out).

    `architecture` (e.g. "AlbertForSequenceClassification") gives the task head's HF names.

    Example:
    >>> config = AlbertConfig(vocab_size=10, hidden_size=4, embedding_size=4, num_hidden_layers=1,
    ...                       num_attention_heads=1, intermediate_size=8)
    >>> state = tf1_to_hf({"bert/pooler/dense/kernel": np.eye(4, dtype=np.float32)}, config)
    >>> sorted(state)[:2]
    ['albert.encoder.embedding_hidden_mapping_in.bias', 'albert.encoder.embedding_hidden_mapping_in.weight']
    """
    head_names = {tf1_name: hf_name for hf_name, tf1_name in _TASK_HEADS.get(architecture, {}).items()}
    state = {}
    block_names = set()
    for (hf_group, inner), halves in _block_halves(config).items():
        for part, (kind, suffix, transposed) in _BLOCK_PARTS.items():
            tf1_name = half_variable_name(kind, *halves[kind], suffix)
            if tf1_name in arrays:
                state[_hf_block_name(hf_group, inner, part)] = _convert(arrays[tf1_name], transposed)
                block_names.add(tf1_name)
    for name, array in arrays.items():
        if name in block_names:
            continue
        if name in _TF1_GLOBAL_NAMES:
            hf_name, transposed = _TF1_GLOBAL_NAMES[name]
            state[hf_name] = _convert(array, transposed)
        elif name.startswith("bert/encoder/transformer/"):
            raise HfConversionError(f"{name} is not part of the block layout of {config}; it cannot be written "
                                    f"to Hugging Face names.")
        else:
            state[head_names.get(name, name)] = array
    if config.embedding_size == config.hidden_size:
        state[f"{_MAPPING_IN}.weight"] = np.eye(config.hidden_size, dtype=np.float32)
        state[f"{_MAPPING_IN}.bias"] = np.zeros(config.hidden_size, np.float32)
    return state


def _add_base_model_prefix(state):
    """AlbertModel.save_pretrained writes `embeddings.*` without the `albert.` prefix."""
    if any(name.startswith("albert.") for name in state):
        return state
    return {("albert." + name if name.startswith(_BASE_MODEL_PREFIXES) else name): array
            for name, array in state.items()}


def _check_tied_and_buffers(state, source):
    for tied, target in _TIED.items():
        if tied in state and not (target in state and np.array_equal(state[tied], state[target])):
            raise HfConversionError(f"{source}: {tied} differs from {target}; ALBERT ties the MLM decoder to "
                                    f"it, so an untied decoder has no equivalent.")
    for buffer in _BUFFERS:
        if buffer not in state:
            continue
        values = state[buffer]
        expected = np.arange(values.shape[-1]) if buffer.endswith("position_ids") else np.zeros(values.shape[-1])
        if not np.array_equal(values.reshape(-1), expected):
            raise HfConversionError(f"{source}: the buffer {buffer} is not {buffer.rsplit('.', 1)[1]}'s default "
                                    f"({'0..n-1' if buffer.endswith('position_ids') else 'zeros'}).")


def _check_identity_mapping(state, config, source):
    weight, bias = state.get(f"{_MAPPING_IN}.weight"), state.get(f"{_MAPPING_IN}.bias")
    if weight is None or bias is None:
        return
    hidden = config.hidden_size
    if not (weight.shape == (hidden, hidden) and np.array_equal(weight, np.eye(hidden))
            and np.array_equal(bias, np.zeros(hidden))):
        raise HfConversionError(
            f"{source}: embedding_size == hidden_size == {hidden}, where ALBERT has no embedding projection, but "
            f"{_MAPPING_IN} is not an identity kernel with a zero bias, so it cannot be dropped.")


def hf_to_tf1(state: Dict[str, np.ndarray], hf_config: dict, source="model.safetensors"
              ) -> Tuple[Dict[str, np.ndarray], Dict[str, str], AlbertConfig]:
    """An HF state dict and its config.json dict -> (TF1-named arrays, TF1 name -> HF name, config).

    The task heads of the architecture config.json names are renamed; other names that are not
    ALBERT's (unknown heads and keys) pass through under their HF name, for the caller to match
    or report.
    """
    config = albert_config_from_hf(hf_config, source=f"the config.json of {source}")
    state = _add_base_model_prefix(state)
    _check_tied_and_buffers(state, source)
    hf_groups = hf_config.get("num_hidden_groups", HF_CONFIG_DEFAULTS["num_hidden_groups"])
    expanded = SHARE_TYPE_KEY in hf_config
    layers = config.num_hidden_layers
    if expanded and hf_groups != layers:
        raise HfConversionError(f"{source}: an expanded albert_tf export has one group per layer, but "
                                f"num_hidden_groups={hf_groups} and num_hidden_layers={layers}.")
    if not expanded and formula_disagreements(layers, hf_groups):
        raise HfConversionError(
            f"{source}: with num_hidden_layers={layers} and num_hidden_groups={hf_groups}, HF's int(i / (L / G)) "
            f"and the original's int(i / L * G) give different groups at layers "
            f"{formula_disagreements(layers, hf_groups)}, so this model has no exact ALBERT equivalent.")
    halves = _block_halves(config) if expanded else None
    head_names = task_head_names(hf_config.get("architectures") or ())

    arrays, hf_names = {}, {}
    for hf_name, array in state.items():
        if hf_name in _TIED or hf_name in _BUFFERS:
            continue
        if hf_name.startswith(_MAPPING_IN + ".") and config.embedding_size == config.hidden_size:
            continue
        block = _BLOCK_NAME.match(hf_name)
        if hf_name in _GLOBAL_NAMES:
            tf1_name, transposed = _GLOBAL_NAMES[hf_name]
        elif block and block[3] in _BLOCK_PARTS:
            hf_group, inner = int(block[1]), int(block[2])
            kind, suffix, transposed = _BLOCK_PARTS[block[3]]
            if expanded and (hf_group, inner) not in halves:
                tf1_name, transposed = hf_name, False
            else:
                key = halves[(hf_group, inner)][kind] if expanded else (hf_group, inner, 1)
                tf1_name = half_variable_name(kind, *key, suffix)
        elif hf_name in head_names:
            tf1_name, transposed = head_names[hf_name], False
        else:
            tf1_name, transposed = hf_name, False
        value = _convert(array, transposed)
        if tf1_name in arrays:
            if not np.array_equal(arrays[tf1_name], value):
                raise HfConversionError(
                    f"{source}: {hf_name} and {hf_names[tf1_name]} are copies of the shared {tf1_name} "
                    f"(share_type={config.share_type}) but differ.")
            continue
        arrays[tf1_name], hf_names[tf1_name] = value, hf_name

    if config.embedding_size == config.hidden_size:
        _check_identity_mapping(state, config, source)
    if expanded:
        absent = [_hf_block_name(group, inner, part) for (group, inner) in sorted(halves) for part in _BLOCK_PARTS
                  if _hf_block_name(group, inner, part) not in state]
        if absent:
            raise HfConversionError(f"{source}: the expanded layout needs every layer's block, but these are "
                                    f"missing: {absent}.")
    return arrays, hf_names, config


def hf_name_of(tf1_name):
    """The HF name a TF1 name is written under in the plain layout (for error messages), or None."""
    if tf1_name in _TF1_GLOBAL_NAMES:
        return _TF1_GLOBAL_NAMES[tf1_name][0]
    half = parse_half_name(tf1_name)
    if half is None or half.index != 1:
        return None
    for part, (kind, suffix, _) in _BLOCK_PARTS.items():
        if kind == half.kind and suffix == half.suffix:
            return _hf_block_name(half.group, half.inner, part)
    return None
