"""How large the models, data and runs of each budget are.

Example:
>>> budget_for("smoke").num_train_steps
40
>>> budget_for("full").model["hidden_size"], budget_for("full").train_batch_size
(768, 4096)
"""

import dataclasses
from typing import Dict, Optional, Tuple

from albert_tf.config import PRESETS


@dataclasses.dataclass(frozen=True)
class SpeedBudget:
    """How the speed experiment times the paper's Table 2 models: their widths (hidden, intermediate, embedding,
    heads, vocabulary) divided by `width_divisor` and their depths by `depth_divisor` (1 and 1: the models
    themselves), pretraining steps at `batch_size` x `seq_length`, `warmup_steps` then `repeats` timed runs of
    `steps`; `isolate` runs each model in a process of its own, so its peak memory is its own; `measure_peak`
    measures the machine's matmul peak beside each (the harness's % of peak)."""

    width_divisor: int = 1
    depth_divisor: int = 1
    # The defaults fit 2 CPU cores: ALBERT-xxlarge takes about half a minute a step at 2 x 128.
    batch_size: int = 2
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    steps: int = 2
    warmup_steps: int = 1
    repeats: int = 3
    isolate: bool = True
    measure_peak: bool = True

    @property
    def full_size(self) -> bool:
        return self.width_divisor == 1 and self.depth_divisor == 1


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
    # Held out from the built-in corpus, by a hash of each document (data_gen.pretraining.corpora.is_holdout_document).
    holdout_fraction: float = 0.1
    # None: a tenth of the steps.
    warmup_steps: Optional[int] = None
    # The Keras dtype policy of every pretraining and fine-tuning run.
    mixed_precision: str = "float32"
    # Candidates for the learning rate of every arm, each trained for `learning_rate_steps` on one seed before the
    # arms (albert_tf.experiments.learning_rate); none: every arm trains at `learning_rate`.
    learning_rate_candidates: Tuple[float, ...] = ()
    learning_rate_steps: int = 0
    speed: SpeedBudget = SpeedBudget()
    # The downstream score (albert_tf.experiments.downstream): fine-tuning on a held-out classification, "documents"
    # (which of `downstream_documents` documents a sentence comes from) or "packages" (which of
    # `downstream_packages` packages, each cut to `downstream_sentences_per_package` sentences), for
    # `finetune_steps`, or `finetune_epochs` when given; with `linear_probe`, a probe on frozen features too; and
    # GLUE's tasks when given.
    downstream_task: str = "documents"
    downstream_documents: int = 8
    downstream_packages: int = 20
    downstream_sentences_per_package: int = 600
    finetune_steps: int = 10
    finetune_epochs: Optional[float] = None
    finetune_batch_size: int = 16
    finetune_learning_rate: float = 1e-3
    linear_probe: bool = False
    # The sharing experiment's grouped arms (M layers per group, M in 2 and L/2) besides the share types.
    grouped_sharing: bool = True
    # The margins of the "costs nothing" claims (non-inferiority: the arm is at most this much worse), by the
    # metric they are judged on ("masked_lm_accuracy", "downstream"), in accuracy (fraction) units. Named before
    # the arms they judge train; a budget without one for a metric does not judge such a claim on it.
    non_inferiority_margins: Tuple[Tuple[str, float], ...] = ()
    # When and how the margins were named, for the report, where that was not before the run.
    non_inferiority_margins_note: str = ""

    def non_inferiority_margin(self, metric: str) -> Optional[float]:
        """The margin of a "costs nothing" claim judged on `metric`, or None."""
        return dict(self.non_inferiority_margins).get(metric)

    @property
    def num_warmup_steps(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else max(1, self.num_train_steps // 10)


# Tiny models that only show that every piece runs: their numbers say nothing about the paper.
SMOKE = Budget(
    name="smoke",
    model=dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    vocab_size=1000, max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1, train_batch_size=16,
    # Four held-out batches of 64 per evaluation (of the 14 the built-in corpus holds out): each arm evaluates its
    # four kept checkpoints, and a shorter evaluation is most of what keeps the smoke test short.
    num_train_steps=40, learning_rate=0.01, max_eval_steps=4,
    # Table 2's models at 1/32 of their width and 1/12 of their depth, two steps each in this process: seconds.
    speed=SpeedBudget(width_divisor=32, depth_divisor=12, batch_size=4, seq_length=32, max_predictions_per_seq=5,
                      steps=2, warmup_steps=1, repeats=1, isolate=False, measure_peak=False))

# BERT-mini/small-like models on the larger built-in corpus (--include_site_packages), sized by measurement on 2
# CPU cores (BUILD_NOTES, "The small budget"): ALBERT v2's block (no dropout) at 4 layers, H=256, E=128, 4 heads,
# sequence 128, a 10,000-piece vocabulary, 2,000 LAMB steps of 32 in mixed_bfloat16 (1.6x float32's speed on a
# CPU with bfloat16 units). The learning rate is chosen among the candidates before the arms train (learning_rate
# stays for a run with the candidates removed).
SMALL = Budget(
    name="small",
    model=dict(embedding_size=128, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
               max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    vocab_size=10000, max_seq_length=128, max_predictions_per_seq=20, dupe_factor=10, train_batch_size=32,
    num_train_steps=2000, learning_rate=0.01, max_eval_steps=100, mixed_precision="mixed_bfloat16",
    learning_rate_candidates=(0.0025, 0.005, 0.01, 0.02), learning_rate_steps=500,
    downstream_documents=16, finetune_steps=100, finetune_batch_size=32, finetune_learning_rate=1e-4,
    # Set after the run had finished (BUILD_NOTES, "Reproducing the paper") by the rule the medium budget's gate
    # names before its attention arms train: a quarter of the run's own not-shared minus all-shared gap, so that
    # "costs nothing" means less than a quarter of what sharing everything costs. On held-out MLM the gap is
    # 0.0012; on the document classification all shared is ahead (-0.049), which names no cost, so no margin.
    non_inferiority_margins=(("masked_lm_accuracy", 0.0003),),
    non_inferiority_margins_note=(
        "This run's margin was set after it had finished, by the rule the medium run names at its gate: a quarter "
        "of the run's own not-shared minus all-shared gap (0.0012 on held-out MLM, so 0.0003); on the document "
        "classification all shared is ahead, which names no cost, so that claim has no margin (BUILD_NOTES, "
        "\"Reproducing the paper\")."))

# The paper's depth at a width 2 CPU cores can train on many tokens per parameter, to decide which half of a
# block can be shared (paper Table 4; BUILD_NOTES, "The medium budget"): 12 layers, H=128, I=512, E=64, 2 heads,
# sequence 128, an 8,000-piece vocabulary, 12,000 LAMB steps of 32 in mixed_bfloat16 (about 49M tokens: 17 per
# parameter of the not-shared model, 20 per parameter outside its embeddings; attention, FFN and all sharing remove
# 25/49/74% of its parameters, the paper's 28/57/87%). Every training fits about 2 hours of a 2-core Zen 4 (4.8
# steps/s on a Zen 5 with bfloat16 units). The downstream score is the package classification (3,492 dev
# sentences) with a linear probe beside it; only the four share types train (no grouped arms). Held-out MLM is
# evaluated on every held-out record.
MEDIUM = Budget(
    name="medium",
    model=dict(embedding_size=64, hidden_size=128, num_hidden_layers=12, num_attention_heads=2, intermediate_size=512,
               max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    vocab_size=8000, max_seq_length=128, max_predictions_per_seq=20, dupe_factor=10, train_batch_size=32,
    num_train_steps=12000, learning_rate=0.0025, max_eval_steps=1000, mixed_precision="mixed_bfloat16",
    learning_rate_candidates=(0.00125, 0.0025, 0.005, 0.01, 0.02), learning_rate_steps=1500,
    downstream_task="packages", downstream_packages=20, downstream_sentences_per_package=600, finetune_epochs=5.0,
    finetune_batch_size=32, finetune_learning_rate=2e-4, linear_probe=True, grouped_sharing=False,
    # Named by the gate (albert_tf.experiments.gate) on seeds 0 and 1 of not shared and all shared, before any
    # attention or FFN arm trained: a quarter of their held-out MLM gap (+0.0186). The gate names no downstream
    # margin, so "costs nothing" is not judged downstream.
    non_inferiority_margins=(("masked_lm_accuracy", 0.0046),),
    non_inferiority_margins_note=(
        "Named at the gate, before any attention or FFN arm trained: a quarter of not shared minus all shared on "
        "held-out MLM over seeds 0 and 1 (+0.0186, spread 0.0070), so 0.0046. At that spread more than 6 seeds "
        "would show it with 80% power; the run trains the 5 planned, so this claim may stay inside the noise. The "
        "gate names no downstream margin."))

# The paper's settings (section 4.1): ALBERT-base (v2: no dropout), a 30,000-piece vocabulary, 125k LAMB steps of
# 4096 x 512 at 0.00176 with 3,125 warm-up steps, up to 20 masked positions. For accelerators: nothing here runs it.
# The original generator's dupe_factor is 40 (create_pretraining_data.py's default).
FULL = Budget(
    name="full",
    model={key: value for key, value in PRESETS["albert-base"].items() if key != "vocab_size"},
    vocab_size=30000, max_seq_length=512, max_predictions_per_seq=20, dupe_factor=40, train_batch_size=4096,
    num_train_steps=125000, learning_rate=0.00176, warmup_steps=3125, max_eval_steps=100,
    speed=SpeedBudget(batch_size=32, seq_length=512, steps=10, warmup_steps=2, repeats=3))

BUDGETS = {"smoke": SMOKE, "small": SMALL, "medium": MEDIUM, "full": FULL}


def budget_for(name: str) -> Budget:
    """The budget called `name`; an unknown or not yet sized budget is an error naming the ones that exist."""
    if name not in BUDGETS:
        raise ValueError(f"--budget={name!r} is not available; available: {', '.join(sorted(BUDGETS))}.")
    return BUDGETS[name]
