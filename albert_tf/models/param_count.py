"""Analytic parameter counts of the encoder (pooler included, pretraining heads excluded).

The formulas follow the sharing plan, so they count exactly what AlbertEncoder creates; the
tests check the two agree. `paper_tables` reproduces Tables 3 and 4 of the ALBERT paper.
"""

import dataclasses
from typing import List

from albert_tf.config import AlbertConfig
from albert_tf.models.sharing import build_sharing_plan


def embedding_parameters(config: AlbertConfig) -> int:
    tables = (config.vocab_size + config.type_vocab_size + config.max_position_embeddings) * config.embedding_size
    layer_norm = 2 * config.embedding_size
    projection = 0
    if config.embedding_size != config.hidden_size:
        projection = config.embedding_size * config.hidden_size + config.hidden_size
    return tables + layer_norm + projection


def attention_half_parameters(config: AlbertConfig) -> int:
    hidden = config.hidden_size
    return 4 * (hidden * hidden + hidden) + 2 * hidden


def ffn_half_parameters(config: AlbertConfig) -> int:
    hidden, intermediate = config.hidden_size, config.intermediate_size
    return hidden * intermediate + intermediate + intermediate * hidden + hidden + 2 * hidden


def pooler_parameters(config: AlbertConfig) -> int:
    return config.hidden_size * config.hidden_size + config.hidden_size


def encoder_parameters(config: AlbertConfig) -> int:
    plan = build_sharing_plan(config)
    return (embedding_parameters(config)
            + len(plan.attention_keys) * attention_half_parameters(config)
            + len(plan.ffn_keys) * ffn_half_parameters(config)
            + pooler_parameters(config))


def model_parameters(model) -> int:
    """Counts a built Keras model's unique variables (a shared variable counts once)."""
    unique = {id(variable): variable for variable in model.weights}
    total = 0
    for variable in unique.values():
        size = 1
        for dim in variable.shape:
            size *= int(dim)
        total += size
    return total


@dataclasses.dataclass(frozen=True)
class PaperRow:
    table: str
    embedding_size: int
    share_type: str
    paper_millions: int

    def config(self) -> AlbertConfig:
        return AlbertConfig.from_preset("albert-base", embedding_size=self.embedding_size,
                                        share_type=self.share_type)


# ALBERT-base rows of the paper (arXiv:1909.11942v6): Table 3 (embedding size, not-shared vs
# all-shared) and Table 4 (the four sharing strategies at E = 768 and E = 128).
PAPER_ROWS: List[PaperRow] = [
    PaperRow("Table 3", 64, "none", 87), PaperRow("Table 3", 128, "none", 89),
    PaperRow("Table 3", 256, "none", 93), PaperRow("Table 3", 768, "none", 108),
    PaperRow("Table 3", 64, "all", 10), PaperRow("Table 3", 128, "all", 12),
    PaperRow("Table 3", 256, "all", 16), PaperRow("Table 3", 768, "all", 31),
    PaperRow("Table 4", 768, "all", 31), PaperRow("Table 4", 768, "ffn", 57),
    PaperRow("Table 4", 768, "attention", 83), PaperRow("Table 4", 768, "none", 108),
    PaperRow("Table 4", 128, "all", 12), PaperRow("Table 4", 128, "ffn", 38),
    PaperRow("Table 4", 128, "attention", 64), PaperRow("Table 4", 128, "none", 89),
]


# Table 1 of the paper: the released model sizes.
PAPER_TABLE_1 = [("bert-base", 108), ("bert-large", 334), ("albert-base", 12), ("albert-large", 18),
                 ("albert-xlarge", 60), ("albert-xxlarge", 235)]


def paper_tables() -> str:
    """Markdown tables of exact counts beside the paper's rounded figures."""
    lines = ["### Table 1 (the presets, V=30000)", "", "| preset | parameters | ours (M) | paper (M) |",
             "|---|---|---|---|"]
    for preset, paper_millions in PAPER_TABLE_1:
        count = encoder_parameters(AlbertConfig.from_preset(preset))
        lines.append(f"| {preset} | {count:,} | {count / 1e6:.1f} | {paper_millions} |")
    lines.append("")
    for table in ("Table 3", "Table 4"):
        lines += [f"### {table} (ALBERT-base, V=30000, H=768, L=12)", "",
                  "| E | share_type | parameters | ours (M) | paper (M) |", "|---|---|---|---|---|"]
        for row in PAPER_ROWS:
            if row.table != table:
                continue
            count = encoder_parameters(row.config())
            lines.append(f"| {row.embedding_size} | {row.share_type} | {count:,} | {count / 1e6:.1f} "
                         f"| {row.paper_millions} |")
        lines.append("")
    return "\n".join(lines)
