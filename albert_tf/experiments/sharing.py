"""The sharing experiment (paper Table 4): identical models with share_type none, attention, ffn and all.

Per arm: encoder parameters, held-out MLM accuracy and held-out SOP accuracy, beside the paper's parameters and
downstream average at ALBERT-base, E=128. The claims: sharing the attention costs (almost) nothing, and most of the
drop comes from sharing the feed-forward half. Here the held-out MLM accuracy stands in for the downstream score.

Example:
>>> model = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
>>> [arm.name for arm in sharing_arms(model, vocab_size=100, seeds=[0])]
['none', 'attention', 'ffn', 'all']
"""

from typing import Dict, List, Mapping, Sequence

from albert_tf.config import AlbertConfig
from albert_tf.experiments.runner import Arm
from albert_tf.experiments.verdicts import judge_difference, mean_and_spread, mean_text

NAME = "sharing"
SHARE_TYPES = ("none", "attention", "ffn", "all")
# Table 4, ALBERT-base, E=128: parameters and the downstream average.
PAPER = {"none": ("89M", 81.6), "attention": ("64M", 81.7), "ffn": ("38M", 80.2), "all": ("12M", 80.1)}


def sharing_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int]) -> List[Arm]:
    """One arm per share type and seed, all from the same model."""
    return [Arm(NAME, share_type, seed, AlbertConfig(vocab_size=vocab_size, **{**model, "share_type": share_type}))
            for share_type in SHARE_TYPES for seed in seeds]


def _per_seed(results: Mapping[str, Mapping[str, object]], share_type: str, metric: str) -> List[float]:
    return [float(result["eval"][metric]) for key, result in sorted(results.items())
            if key.startswith(f"{NAME}/{share_type}/")]


def _failed(values: Sequence[float], baseline: float) -> bool:
    return any(value <= baseline for value in values)


def sharing_section(results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float]) -> Dict[str, object]:
    """The table, the claims' verdicts and the numbers they used, from {arm key: result} and the baselines.

    An arm whose MLM or SOP accuracy does not beat its majority baseline on every seed is a failed run: the
    claims that use it are not judged.
    """
    rows, numbers, failed = [], {}, []
    for share_type in SHARE_TYPES:
        mlm = _per_seed(results, share_type, "masked_lm_accuracy")
        sop = _per_seed(results, share_type, "sentence_order_accuracy")
        parameters = next(result["parameters"] for key, result in results.items()
                          if key.startswith(f"{NAME}/{share_type}/"))
        status = "ok"
        if _failed(mlm, baselines["masked_lm"]) or _failed(sop, baselines["sentence_order"]):
            status = "failed: not above the majority baseline"
            failed.append(share_type)
        numbers[share_type] = {"parameters": parameters, "masked_lm_accuracy": mean_and_spread(mlm),
                               "sentence_order_accuracy": mean_and_spread(sop), "status": status}
        paper_parameters, paper_average = PAPER[share_type]
        rows.append(f"| {share_type} | {paper_parameters} | {paper_average} | {parameters:,} | {mean_text(mlm)} | "
                    f"{mean_text(sop)} | {status} |")
    claims = {}
    for claim, first, second, expect_positive, text in (
            ("attention_sharing_is_free", "attention", "none", True,
             "sharing the attention costs nothing (MLM: attention-shared >= not shared)"),
            ("ffn_sharing_costs_most", "attention", "ffn", True,
             "most of the drop comes from the FFN (MLM: attention-shared > FFN-shared)")):
        if first in failed or second in failed:
            judged = {"verdict": f"not judged: failed run(s) {', '.join(sorted({first, second} & set(failed)))}"}
        else:
            judged = judge_difference(_per_seed(results, first, "masked_lm_accuracy"),
                                      _per_seed(results, second, "masked_lm_accuracy"), expect_positive)
        claims[claim] = {"claim": text, "compared": [first, second], **judged}
    table = "\n".join(["| share_type | paper params | paper downstream avg | our params | our held-out MLM acc "
                       "| our held-out SOP acc | run |", "|---|---|---|---|---|---|---|", *rows])
    return {"name": NAME, "title": "Cross-layer sharing (paper Table 4)", "table": table, "arms": numbers,
            "claims": claims, "plot_metrics": [("masked_lm_accuracy", "masked_lm", "MLM accuracy"),
                                               ("sentence_order_accuracy", "sentence_order", "SOP accuracy")]}
