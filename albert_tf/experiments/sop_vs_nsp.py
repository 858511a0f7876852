"""The sentence-objective experiment (paper Table 5): no sentence loss, NSP and SOP, on one model.

Each arm is evaluated on the pure, balanced held-out sets (data_gen.sentence_pair_eval): masked-LM accuracy on the
SOP set's masked positions, NSP accuracy on the NSP set, SOP accuracy on the SOP set; the paper's intrinsic 3x3
table beside ours. The claims: a model trained on NSP is at chance on SOP, and one trained on SOP does well on NSP.

Example:
>>> model = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
>>> [(arm.name, arm.train_data, arm.sentence_loss_weight) for arm in sop_vs_nsp_arms(model, 100, seeds=[0])]
[('none', 'sop', 0.0), ('nsp', 'nsp', 1.0), ('sop', 'sop', 1.0)]
"""

from typing import Dict, List, Mapping, Sequence

from albert_tf.config import AlbertConfig
from albert_tf.experiments.runner import Arm
from albert_tf.experiments.verdicts import judge_difference, mean_and_spread, mean_text

NAME = "sop_vs_nsp"
# arm -> (training records, sentence loss weight); "none" trains the masked LM alone.
OBJECTIVES = {"none": ("sop", 0.0), "nsp": ("nsp", 1.0), "sop": ("sop", 1.0)}
# Table 5, ALBERT-base: intrinsic MLM, NSP and SOP accuracy (%), and the downstream average.
PAPER = {"none": (54.9, 52.4, 53.3, 79.0), "nsp": (54.5, 90.5, 52.0, 79.2), "sop": (54.0, 78.9, 86.5, 80.1)}
# (column, pure set, metric of that set, baseline key, the arms trained on that task).
COLUMNS = (("masked_lm_accuracy", "sop", "masked_lm_accuracy", "masked_lm_pure", ("none", "nsp", "sop")),
           ("nsp_accuracy", "nsp", "sentence_order_accuracy", "nsp_pure", ("nsp",)),
           ("sop_accuracy", "sop", "sentence_order_accuracy", "sop_pure", ("sop",)))


def sop_vs_nsp_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int]) -> List[Arm]:
    """One arm per objective and seed, all from the same model (share_type as the model says)."""
    config = AlbertConfig(vocab_size=vocab_size, **model)
    return [Arm(NAME, name, seed, config, train_data=train_data, sentence_loss_weight=weight, evaluate_pure_sets=True)
            for name, (train_data, weight) in OBJECTIVES.items() for seed in seeds]


def _per_seed(results: Mapping[str, Mapping[str, object]], arm: str, pure_set: str, metric: str) -> List[float]:
    return [float(result["pure_eval"][pure_set][metric]) for key, result in sorted(results.items())
            if key.startswith(f"{NAME}/{arm}/")]


def sop_vs_nsp_section(results: Mapping[str, Mapping[str, object]],
                       baselines: Mapping[str, float]) -> Dict[str, object]:
    """The 3x3 table, the claims' verdicts and their numbers. An arm fails when, on some seed, its MLM accuracy or
    the accuracy on the task it trained on is not above that set's majority baseline."""
    rows, numbers, failed = [], {}, []
    for arm in OBJECTIVES:
        values = {column: _per_seed(results, arm, pure_set, metric) for column, pure_set, metric, _, _ in COLUMNS}
        failures = [column for column, _, _, baseline, trained in COLUMNS
                    if arm in trained and any(value <= baselines[baseline] for value in values[column])]
        status = f"failed: {', '.join(failures)} not above the majority baseline" if failures else "ok"
        if failures:
            failed.append(arm)
        numbers[arm] = {**{column: mean_and_spread(value) for column, value in values.items()}, "status": status}
        paper = PAPER[arm]
        ours = " | ".join(mean_text(values[column]) for column, *_ in COLUMNS)
        rows.append(f"| {arm} | {paper[0]} | {paper[1]} | {paper[2]} | {paper[3]} | {ours} | {status} |")
    claims = {}
    for claim, arm, other, pure_set, text in (
            ("nsp_does_not_solve_sop", "sop", "nsp", "sop",
             "NSP does not solve SOP (SOP accuracy: SOP-trained > NSP-trained)"),
            ("sop_solves_nsp", "sop", "none", "nsp",
             "SOP solves NSP well (NSP accuracy: SOP-trained > no sentence loss)")):
        if arm in failed or other in failed:
            judged = {"verdict": f"not judged: failed run(s) {', '.join(sorted({arm, other} & set(failed)))}"}
        else:
            judged = judge_difference(_per_seed(results, arm, pure_set, "sentence_order_accuracy"),
                                      _per_seed(results, other, pure_set, "sentence_order_accuracy"), True)
        claims[claim] = {"claim": text, "compared": [arm, other], **judged}
    table = "\n".join([
        "| trained on | paper MLM | paper NSP | paper SOP | paper downstream avg | our MLM acc | our NSP acc "
        "(pure set) | our SOP acc (pure set) | run |", "|---|---|---|---|---|---|---|---|---|", *rows,
        f"| majority baseline | | | | | {baselines['masked_lm_pure']:.3f} | {baselines['nsp_pure']:.3f} | "
        f"{baselines['sop_pure']:.3f} | |"])
    return {"name": NAME, "title": "Sentence objectives: none, NSP, SOP (paper Table 5)", "table": table,
            "arms": numbers, "claims": claims,
            "plot_metrics": [(column, baseline, column.replace("_", " ")) for column, _, _, baseline, _ in COLUMNS]}
