"""AlbertConfig: the original albert_config.json keys, plus `share_type`."""

import copy
import dataclasses
import json
from typing import Any, Optional

SHARE_TYPES = ("all", "attention", "ffn", "none")
HIDDEN_ACTS = ("gelu", "gelu_new", "relu", "tanh", "linear")

# Keys that Google's released albert_config.json files carry but the model never reads.
# They are accepted and written back unchanged so a round trip is lossless.
PASSTHROUGH_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep")

_ALBERT_COMMON = dict(
    vocab_size=30000,
    embedding_size=128,
    num_hidden_groups=1,
    inner_group_num=1,
    down_scale_factor=1,
    hidden_act="gelu",
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    max_position_embeddings=512,
    type_vocab_size=2,
    initializer_range=0.02,
    share_type="all",
)

PRESETS = {
    "albert-base": dict(_ALBERT_COMMON, hidden_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072),
    "albert-large": dict(_ALBERT_COMMON, hidden_size=1024, num_hidden_layers=24,
                         num_attention_heads=16, intermediate_size=4096),
    "albert-xlarge": dict(_ALBERT_COMMON, hidden_size=2048, num_hidden_layers=24,
                          num_attention_heads=16, intermediate_size=8192),
    "albert-xxlarge": dict(_ALBERT_COMMON, hidden_size=4096, num_hidden_layers=12,
                           num_attention_heads=64, intermediate_size=16384),
    "bert-base": dict(_ALBERT_COMMON, embedding_size=768, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, share_type="none"),
    "bert-large": dict(_ALBERT_COMMON, embedding_size=1024, hidden_size=1024, num_hidden_layers=24,
                       num_attention_heads=16, intermediate_size=4096, share_type="none"),
}

_POSITIVE_INT_FIELDS = (
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
    "num_attention_heads", "intermediate_size", "inner_group_num", "down_scale_factor",
    "max_position_embeddings", "type_vocab_size",
)
_PROBABILITY_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


@dataclasses.dataclass
class AlbertConfig:
    """Hyper-parameters of an ALBERT encoder, named exactly as in albert_config.json.

    `share_type` is the one addition: which half of each block is shared across the layers of
    a group. `all` is ALBERT, `none` is BERT, `attention` and `ffn` are the paper's Table 4
    ablations.

    Example:
    >>> config = AlbertConfig.from_preset("albert-base", num_hidden_layers=2)
    >>> config.hidden_size
    768
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    embedding_size: int = 128
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    down_scale_factor: int = 1
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    share_type: str = "all"
    extra_keys: dict = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.validate()

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def validate(self):
        """Raises ValueError naming the field, its value and what is allowed."""
        for name in _POSITIVE_INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"AlbertConfig.{name} must be a positive integer, got {value!r}.")
        for name in _PROBABILITY_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"AlbertConfig.{name} must be a probability in [0, 1), got {value!r}.")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise ValueError(
                f"AlbertConfig.initializer_range must be a positive number, got {self.initializer_range!r}.")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"AlbertConfig.hidden_size={self.hidden_size} must be divisible by "
                f"num_attention_heads={self.num_attention_heads}.")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups={self.num_hidden_groups} must be at most "
                f"num_hidden_layers={self.num_hidden_layers}; extra groups would never be applied.")
        if self.hidden_act not in HIDDEN_ACTS:
            raise ValueError(
                f"AlbertConfig.hidden_act={self.hidden_act!r} is not supported; allowed: {', '.join(HIDDEN_ACTS)}.")
        if self.share_type not in SHARE_TYPES:
            raise ValueError(
                f"AlbertConfig.share_type={self.share_type!r} is not supported; allowed: {', '.join(SHARE_TYPES)}.")
        unknown_extra = sorted(set(self.extra_keys) - set(PASSTHROUGH_KEYS))
        if unknown_extra:
            raise ValueError(f"AlbertConfig got unknown key(s) {unknown_extra}; released configs may only add "
                             f"{', '.join(PASSTHROUGH_KEYS)}.")

    def group_of_layer(self, layer_index: int) -> int:
        """The group that layer `layer_index` (0-based) uses, by the original's float formula."""
        return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

    # ---- dict / JSON -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, values: dict, source: str = "config dict") -> "AlbertConfig":
        field_names = {f.name for f in dataclasses.fields(cls)} - {"extra_keys"}
        known = {k: v for k, v in values.items() if k in field_names}
        extra = {k: v for k, v in values.items() if k not in field_names}
        unknown = sorted(set(extra) - set(PASSTHROUGH_KEYS))
        if unknown:
            raise ValueError(f"Unknown key(s) {unknown} in {source}; allowed keys are the albert_config.json "
                             f"fields {sorted(field_names)} and {list(PASSTHROUGH_KEYS)}.")
        missing = sorted(f.name for f in dataclasses.fields(cls)
                         if f.name in field_names and f.default is dataclasses.MISSING
                         and f.name not in known)
        if missing:
            raise ValueError(f"Missing required key(s) {missing} in {source}.")
        if isinstance(known.get("hidden_act"), str):
            # The original's get_activation lowercases the name, so "GELU" or "Relu" configs work there, and
            # takes an empty name as no activation.
            known["hidden_act"] = known["hidden_act"].lower() or "linear"
        if isinstance(known.get("down_scale_factor"), float) and known["down_scale_factor"].is_integer():
            # The original never reads it, so a JSON 1.0 loaded there.
            known["down_scale_factor"] = int(known["down_scale_factor"])
        return cls(**known, extra_keys=copy.deepcopy(extra))

    def to_dict(self) -> dict:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra_keys"}
        values.update(copy.deepcopy(self.extra_keys))
        return values

    @classmethod
    def from_json_file(cls, path: str) -> "AlbertConfig":
        import tensorflow as tf

        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"The config file {path} does not exist.")
        with tf.io.gfile.GFile(path, "r") as handle:
            text = handle.read()
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}.") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a JSON object, got {type(values).__name__}.")
        return cls.from_dict(values, source=path)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str):
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write(self.to_json_string())

    # ---- presets -----------------------------------------------------------------------------

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "AlbertConfig":
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; available: {', '.join(PRESETS)}.")
        values = dict(PRESETS[name])
        values.update(overrides)
        return cls.from_dict(values, source=f"preset {name!r} with overrides {sorted(overrides)}")

    def replace(self, **changes: Any) -> "AlbertConfig":
        values = self.to_dict()
        values.update(changes)
        return type(self).from_dict(values)


def load_config(albert_config_file: Optional[str] = None, preset: Optional[str] = None,
                **overrides: Any) -> AlbertConfig:
    """The config a run script asks for: exactly one of a JSON file or a preset name."""
    if bool(albert_config_file) == bool(preset):
        raise ValueError("Give exactly one of --albert_config_file or --preset "
                         f"(got albert_config_file={albert_config_file!r}, preset={preset!r}).")
    if preset:
        return AlbertConfig.from_preset(preset, **overrides)
    config = AlbertConfig.from_json_file(albert_config_file)
    return config.replace(**overrides) if overrides else config
