"""Strict matching of a checkpoint's TF1-named arrays onto a model's variables, by name and shape.

- Every variable the model needs must be in the file, and every shape must match.
- With `allow_missing_heads=True`, head variables that the file lacks keep their fresh
  initialisation and are listed in a warning. Heads are all names outside `bert/`, and the pooler
  `bert/pooler/dense/*`: only the SOP/NSP objective trains it, and Hugging Face's masked-LM,
  token-classification and QA models are saved without it.
- A file variable the model does not use is an error, except the pretraining heads
  `cls/predictions/*` and `cls/seq_relationship/*` when the model has no such head: starting a
  fine-tuning model from a pretraining checkpoint is the normal case. They are logged.
- With `drop_unused_heads=True`, any other head variable the model does not have (a GLUE, SQuAD or
  RACE head of a fine-tuned checkpoint) is left out too, and listed in a warning; unused variables
  under `bert/` stay an error.
- The block layout (groups, inner groups, shared or per-layer halves) must match the config,
  unless `init_from_group0=True`: then every model variable absent from the file takes the
  original's rewrites `group_g` -> `group_0` and `attention_k` / `ffn_k` -> index 1 (also
  combined), so more groups or a partially shared model can start from an all-shared
  checkpoint.
- When the file comes with a config (HF config.json, an albert_config.json beside a TF1 or
  native checkpoint), its architecture fields must equal the model's.
Nothing is assigned unless everything matches.
"""

from albert_tf.checkpoints.tf1_names import PRETRAINING_HEAD_SCOPES, group0_candidates, parse_half_name
from albert_tf.config import AlbertConfig

# Architecture fields that weights alone do not pin down (activation, depth, heads) or that
# decide the layout; dropout and initializer_range may differ between a file and a model.
_ARCHITECTURE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "max_position_embeddings", "type_vocab_size", "num_hidden_groups",
                        "inner_group_num", "share_type")
_LAYOUT_FIELDS = ("num_hidden_layers", "num_hidden_groups", "share_type")
POOLER_SCOPE = "bert/pooler/"
# Hugging Face encoder names that have no TF1 name keep their own (with or without the model's `albert.`).
_UNTRANSLATED_ENCODER_PREFIXES = ("albert.", "embeddings.", "encoder.", "pooler.")


class CheckpointMismatchError(ValueError):
    """The file and the model disagree; the message lists every name with its shapes."""

    def __init__(self, message, missing=(), unexpected=(), mismatched=()):
        super().__init__(message)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


def albert_config_of(model) -> AlbertConfig:
    """The AlbertConfig of a model load_weights and save_weights take: its own, or its encoder's."""
    config = getattr(model, "config", None)
    if not isinstance(config, AlbertConfig):
        config = model.encoder.config
    return config


def check_config_agrees(model_config, file_config, source, init_from_group0):
    """Raises CheckpointMismatchError listing every architecture field in which the file's config differs from the
    model's (the layout fields count only without init_from_group0)."""
    fields = [name for name in _ARCHITECTURE_FIELDS if not (init_from_group0 and name in _LAYOUT_FIELDS)]
    differ = [f"{name}: file {getattr(file_config, name)!r} vs model {getattr(model_config, name)!r}"
              for name in fields if getattr(file_config, name) != getattr(model_config, name)]
    file_act, model_act = (("gelu" if act == "gelu_new" else act)
                           for act in (file_config.hidden_act, model_config.hidden_act))
    if file_act != model_act:
        differ.append(f"hidden_act: file {file_config.hidden_act!r} vs model {model_config.hidden_act!r}")
    if differ:
        raise CheckpointMismatchError(f"The config of the checkpoint ({source}) does not match the model's: "
                                      f"{'; '.join(differ)}.")


def _ranges(numbers):
    numbers = sorted(set(numbers))
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}..{numbers[-1]}"
    return ",".join(str(number) for number in numbers)


def _describe_layout(names):
    halves = [half for half in map(parse_half_name, names) if half is not None]
    if not halves:
        return "no transformer blocks"
    by_kind = {kind: [half.index for half in halves if half.kind == kind] for kind in ("attention", "ffn")}
    return (f"group_{{{_ranges(half.group for half in halves)}}} x "
            f"inner_group_{{{_ranges(half.inner for half in halves)}}}, "
            f"attention_{{{_ranges(by_kind['attention'])}}}, ffn_{{{_ranges(by_kind['ffn'])}}}")


def _shape_text(shape):
    return "[" + ",".join(str(dim) for dim in shape) + "]"


def is_head_variable(name) -> bool:
    """Whether allow_missing_heads may leave `name` freshly initialised (and drop_unused_heads leave it out)."""
    if name.startswith(_UNTRANSLATED_ENCODER_PREFIXES):
        return False
    return not name.startswith("bert/") or name.startswith(POOLER_SCOPE)


def _mismatch_message(names, contents, config, missing, unexpected, mismatched, allow_missing_heads,
                      drop_unused_heads, init_from_group0):
    available = contents.shapes
    lines = [f"{contents.location.path} ({contents.format}) does not match the model."]
    file_layout, model_layout = _describe_layout(available), _describe_layout(names)
    if file_layout != model_layout and not init_from_group0:
        lines.append(
            f"Its block layout ({file_layout}) does not match the model's ({model_layout}: num_hidden_groups="
            f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num}, share_type="
            f"{config.share_type}); pass init_from_group0 (--init_from_group0) to initialise every group "
            f"from group 0.")
    lines.append(f"missing from the file ({len(missing)}):")
    lines += [f"  {contents.describe(name)} {_shape_text(names[name].shape)}" for name in missing]
    lines.append(f"unexpected in the file ({len(unexpected)}):")
    lines += [f"  {contents.describe(name)} {_shape_text(available[name])}" for name in unexpected]
    lines.append(f"shape mismatches ({len(mismatched)}):")
    lines += [f"  {contents.describe(name)}: file {_shape_text(file_shape)} vs model {_shape_text(model_shape)}"
              for name, file_shape, model_shape in mismatched]
    if missing and not allow_missing_heads and all(map(is_head_variable, missing)):
        lines.append("Only head variables (or the pooler) are missing: allow_missing_heads "
                     "(--allow_missing_heads) starts them from a fresh initialisation.")
    if unexpected and not drop_unused_heads and all(map(is_head_variable, unexpected)):
        lines.append("Only head variables are unexpected: drop_unused_heads (--drop_unused_heads) leaves them "
                     "out, e.g. to take the encoder of a fine-tuned checkpoint; to keep a fine-tuned head, "
                     "load into its task model (convert_checkpoint's --head).")
    return "\n".join(lines)


def match_variables(names, contents, config, allow_missing_heads, drop_unused_heads, init_from_group0):
    """Model name -> file name for every model variable, or CheckpointMismatchError.

    Returns (sources, missing_heads, ignored, dropped_heads): the file name each model variable takes, the heads
    left fresh (allow_missing_heads), the pretraining heads the model lacks, and the heads left out
    (drop_unused_heads).
    """
    available = contents.shapes
    sources = {}
    for name in names:
        if name in available:
            sources[name] = name
        elif init_from_group0:
            candidate = next((c for c in group0_candidates(name) if c in available), None)
            if candidate is not None:
                sources[name] = candidate
    used = set(sources.values())
    unexpected = sorted(name for name in available if name not in used)
    head_scopes_in_model = {scope for scope in PRETRAINING_HEAD_SCOPES if any(n.startswith(scope) for n in names)}
    ignored = [name for name in unexpected
               if any(name.startswith(scope) for scope in PRETRAINING_HEAD_SCOPES if scope not in head_scopes_in_model)]
    unexpected = [name for name in unexpected if name not in ignored]
    dropped_heads = [name for name in unexpected if drop_unused_heads and is_head_variable(name)]
    unexpected = [name for name in unexpected if name not in dropped_heads]
    missing = sorted(name for name in names if name not in sources)
    missing_heads = [name for name in missing if allow_missing_heads and is_head_variable(name)]
    missing = [name for name in missing if name not in missing_heads]
    mismatched = sorted((name, available[source], tuple(names[name].shape)) for name, source in sources.items()
                        if tuple(available[source]) != tuple(names[name].shape))
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(
            _mismatch_message(names, contents, config, missing, unexpected, mismatched, allow_missing_heads,
                              drop_unused_heads, init_from_group0),
            missing=missing, unexpected=unexpected, mismatched=mismatched)
    return sources, missing_heads, ignored, dropped_heads

