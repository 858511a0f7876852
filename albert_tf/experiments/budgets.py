"""How large the models, data and runs of each budget are.

Example:
>>> budget_for("smoke").num_train_steps
40
"""

import dataclasses
from typing import Dict


@dataclasses.dataclass(frozen=True)
class Budget:
    """One budget: the model every arm starts from (before its own change), the data and the training run."""

    name: str
    model: Dict[str, object]
    vocab_size: int
    max_seq_length: int
    max_predictions_per_seq: int
    dupe_factor: int
    train_batch_size: int
    num_train_steps: int
    learning_rate: float
    eval_batch_size: int = 64
    max_eval_steps: int = 1000
    # Held out from the built-in corpus, by a hash of each document (data_gen.corpora.is_holdout_document).
    holdout_fraction: float = 0.1
    # The downstream score: fine-tuning on the held-out document classification (and GLUE's, when given).
    downstream_documents: int = 8
    finetune_steps: int = 10
    finetune_batch_size: int = 16
    finetune_learning_rate: float = 1e-3

    @property
    def num_warmup_steps(self) -> int:
        return max(1, self.num_train_steps // 10)


# Tiny models that only show that every piece runs: their numbers say nothing about the paper.
SMOKE = Budget(
    name="smoke",
    model=dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    vocab_size=1000, max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1, train_batch_size=16,
    num_train_steps=40, learning_rate=0.01, max_eval_steps=20)

BUDGETS = {"smoke": SMOKE}


def budget_for(name: str) -> Budget:
    """The budget called `name`; an unknown or not yet sized budget is an error naming the ones that exist."""
    if name not in BUDGETS:
        raise ValueError(f"--budget={name!r} is not available; available: {', '.join(sorted(BUDGETS))} (the small "
                         "and full budgets are not sized yet).")
    return BUDGETS[name]
