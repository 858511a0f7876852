"""The cross-layer sharing plan: which attention / feed-forward instance each applied block uses.

A block has two halves, each with its own post-LN. Every half instance has a key
(group, inner_group, index) that is also its place in the original TF1 checkpoint layout:
`group_{g}/inner_group_{i}/attention_{k}` and `.../ffn_{k}`. A shared half uses index 1, the
original's only index; an unshared half of layer l uses index l + 1.
"""

import dataclasses
from typing import List, Tuple

HalfKey = Tuple[int, int, int]

# Which halves are shared across the layers of a group, per share_type.
_SHARED_HALVES = {
    "all": ("attention", "ffn"),
    "attention": ("attention",),
    "ffn": ("ffn",),
    "none": (),
}


@dataclasses.dataclass(frozen=True)
class AppliedBlock:
    """One block application: layer `layer_index` runs inner block `inner_index` with these halves."""

    layer_index: int
    inner_index: int
    attention_index: int
    ffn_index: int


@dataclasses.dataclass(frozen=True)
class SharingPlan:
    attention_keys: List[HalfKey]
    ffn_keys: List[HalfKey]
    blocks: List[AppliedBlock]


def build_sharing_plan(config) -> SharingPlan:
    """The plan for an AlbertConfig: unique half instances in creation order and the applied blocks."""
    shared = _SHARED_HALVES[config.share_type]
    attention_keys: List[HalfKey] = []
    ffn_keys: List[HalfKey] = []
    blocks: List[AppliedBlock] = []

    def index_of(keys, key):
        if key not in keys:
            keys.append(key)
        return keys.index(key)

    for layer_index in range(config.num_hidden_layers):
        group = config.group_of_layer(layer_index)
        for inner_index in range(config.inner_group_num):
            attention_key = (group, inner_index, 1 if "attention" in shared else layer_index + 1)
            ffn_key = (group, inner_index, 1 if "ffn" in shared else layer_index + 1)
            blocks.append(AppliedBlock(layer_index, inner_index,
                                       index_of(attention_keys, attention_key),
                                       index_of(ffn_keys, ffn_key)))
    return SharingPlan(attention_keys, ffn_keys, blocks)
