"""The layer-transition experiment (paper Figure 2): all-shared against not-shared, per depth, the L2 distance and
cosine similarity between each block's input and output over held-out text, with the spread over tokens; and the
all-shared block applied twice as many times as it was trained, to look for a fixed point directly.

The paper's claims: the all-shared curves are smoother, and they do not reach 0 (no fixed point). Smoothness is
measured as the mean absolute change of the L2 distance between adjacent depths. A distance that falls below
FIXED_POINT_FRACTION of the first block's is reported as approaching a fixed point, which the paper denies; that
is a different thing from collapse, and the report says only what it measured.

Example:
>>> model = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
>>> [(arm.name, arm.config.share_type) for arm in layer_transitions_arms(model, 100, seeds=[0])]
[('all', 'all'), ('none', 'none')]
"""

from typing import Dict, List, Mapping, Sequence

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.experiments.runner import Arm, seed_results
from albert_tf.experiments.verdicts import MIN_SEEDS, judge_difference, masked_lm_status

NAME = "layer_transitions"
SHARE_TYPES = ("all", "none")
FIXED_POINT_FRACTION = 0.01


def layer_transitions_arms(model: Mapping[str, object], vocab_size: int, seeds: Sequence[int]) -> List[Arm]:
    return [Arm(NAME, share_type, seed, AlbertConfig(vocab_size=vocab_size, **{**model, "share_type": share_type}),
                measure_transitions=True) for share_type in SHARE_TYPES for seed in seeds]


def roughness(l2_means: Sequence[float]) -> float:
    """The mean absolute change of the L2 distance between adjacent depths (0 for a single depth)."""
    return float(np.mean(np.abs(np.diff(l2_means)))) if len(l2_means) > 1 else 0.0


def _curve(arm_results, key, metric):
    """Per depth, the mean over seeds of the per-seed token means, and the mean token spread."""
    per_seed = [[depth["mean"] for depth in result[key][metric]] for result in arm_results]
    spreads = [[depth["sd"] for depth in result[key][metric]] for result in arm_results]
    return np.mean(per_seed, axis=0).tolist(), np.mean(spreads, axis=0).tolist()


def layer_transitions_section(results: Mapping[str, Mapping[str, object]],
                              baselines: Mapping[str, float]) -> Dict[str, object]:
    """The per-depth table, the curves to plot, and the verdicts on smoothness and on a fixed point."""
    arms, curves, failed = {}, {}, []
    for share_type in SHARE_TYPES:
        arm_results = seed_results(results, NAME, share_type)
        status = masked_lm_status([float(result["eval"]["masked_lm_accuracy"]) for result in arm_results],
                                  baselines["masked_lm"])
        if status != "ok":
            failed.append(share_type)
        keys = ["transitions"] + (["transitions_twice_as_deep"] if share_type == "all" else [])
        for key in keys:
            label = f"{share_type}-shared" if share_type == "all" else "not shared"
            label += " at twice the depth" if key != "transitions" else ""
            curves[label] = {metric: _curve(arm_results, key, metric)
                             for metric in ("l2_distance", "cosine_similarity")}
        arms[share_type] = {"roughness": [roughness([depth["mean"] for depth in result["transitions"]["l2_distance"]])
                                          for result in arm_results], "status": status}
    rows = []
    depth_count = max(len(curve["l2_distance"][0]) for curve in curves.values())
    for depth in range(depth_count):
        cells = []
        for curve in curves.values():
            (l2, l2_sd), (cos, _) = curve["l2_distance"], curve["cosine_similarity"]
            cells.append(f"{l2[depth]:.3f} ± {l2_sd[depth]:.3f} / {cos[depth]:.3f}" if depth < len(l2) else "")
        rows.append(f"| {depth + 1} | " + " | ".join(cells) + " |")
    header = " | ".join(f"{label}: L2 ± token sd / cosine" for label in curves)
    table = "\n".join([f"| depth | {header} |", "|---" * (len(curves) + 1) + "|", *rows, "",
                       "Paper (Figure 2, ALBERT-large vs BERT-large, 24 layers): ALBERT's curves are smoother; both "
                       "distances drop with depth and stay above 0 (no fixed point). Status: "
                       + ", ".join(f"{share_type} {arm['status']}" for share_type, arm in arms.items())])
    claims = {}
    if failed:
        claims["all_shared_is_smoother"] = {"claim": "the all-shared curve is smoother (mean |ΔL2| between depths)",
                                            "verdict": f"not judged: failed run(s) {', '.join(failed)}"}
    else:
        claims["all_shared_is_smoother"] = {
            "claim": "the all-shared curve is smoother (mean |ΔL2| between depths: not shared - all shared)",
            **judge_difference(arms["none"]["roughness"], arms["all"]["roughness"], expect_positive=True)}
    deep_l2 = curves["all-shared at twice the depth"]["l2_distance"][0]
    approaches_zero = deep_l2[-1] < FIXED_POINT_FRACTION * deep_l2[0]
    seeds = len(seed_results(results, NAME, "all"))
    observed = "the distance approaches 0" if approaches_zero else "the distance stays above 0"
    claims["no_fixed_point"] = {
        "claim": f"the all-shared block, applied {len(deep_l2)} times, does not reach a fixed point (last L2 "
                 f"{deep_l2[-1]:.4f} against {deep_l2[0]:.4f} at depth 1)",
        "last_l2": deep_l2[-1], "first_l2": deep_l2[0],
        "verdict": (f"not judged: failed run(s) {', '.join(failed)}" if failed else
                    f"cannot be judged ({seeds} seed(s), {MIN_SEEDS} needed); {observed}" if seeds < MIN_SEEDS else
                    f"does not hold: {observed}" if approaches_zero else f"holds: {observed}")}
    return {"name": NAME, "title": "Layer transitions (paper Figure 2)", "table": table, "arms": arms,
            "claims": claims, "curves": curves}
