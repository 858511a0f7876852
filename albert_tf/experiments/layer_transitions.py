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
from albert_tf.experiments.arms import Arm, results_by_seed, seed_results
from albert_tf.experiments.verdicts import MIN_SEEDS, judge_unless_failed, masked_lm_status, paired_interval

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


def _fixed_point_verdict(deep_l2_by_seed: Mapping[int, Sequence[float]], failed: Sequence[str]) -> str:
    """Whether the all-shared block applied twice its depth approaches a fixed point, seed by seed: it does on a
    seed whose last L2 distance is below FIXED_POINT_FRACTION of its first. The claim (no fixed point) holds when
    no seed does, within the depth measured; that the distance keeps falling beyond it is not excluded."""
    if failed:
        return f"not judged: failed run(s) {', '.join(failed)}"
    fractions = [l2[-1] / l2[0] for l2 in deep_l2_by_seed.values()]
    approaching = [fraction < FIXED_POINT_FRACTION for fraction in fractions]
    depth = len(next(iter(deep_l2_by_seed.values())))
    share = (f"{min(fractions):.0%}" if f"{min(fractions):.0%}" == f"{max(fractions):.0%}" else
             f"{min(fractions):.0%} to {max(fractions):.0%}")
    observed = f"the last L2 is {share} of the first over {len(fractions)} seed(s)"
    if len(fractions) < MIN_SEEDS:
        return f"cannot be judged ({len(fractions)} seed(s), {MIN_SEEDS} needed); {observed}"
    if not any(approaching):
        return f"holds within {depth} applications: {observed}"
    if all(approaching):
        return f"does not hold: {observed}, below {FIXED_POINT_FRACTION:.0%} on every seed"
    return f"inside the noise: {observed}, below {FIXED_POINT_FRACTION:.0%} on some seeds only"


def _figure(curves, roughness_interval, title: str) -> Dict[str, object]:
    """L2 distance and cosine similarity against depth (the band: the spread over tokens), the smoothness
    difference with its paired 95% confidence interval, and what the paper's Figure 2 shows in words: it gives
    curves, no values, so none is drawn."""
    panels = [{"kind": "lines", "title": f"ours: {label}", "xlabel": "depth (applied block)", "ylabel": unit,
               "series": [{"label": f"ours, {name} (band: spread over tokens)", "x": list(range(1, len(means) + 1)),
                           "values": means, "style": "--" if "twice" in name else "-",
                           "band": [[mean - sd for mean, sd in zip(means, sds)],
                                    [mean + sd for mean, sd in zip(means, sds)]]}
                          for name, curve in curves.items() for means, sds in [curve[metric]]]}
              for metric, label, unit in (("l2_distance", "L2 distance", "hidden-state units"),
                                          ("cosine_similarity", "cosine similarity", "unitless"))]
    if roughness_interval is not None:
        mean, low, high = roughness_interval
        panels.append({"kind": "bars", "title": "ours: smoothness, not shared minus all-shared", "xlabel": "",
                       "reference_line": 0.0, "categories": [""], "ylabel": "mean |ΔL2| between depths",
                       "series": [{"label": "ours (mean, paired 95% CI)", "values": [mean], "source": "ours",
                                   "errors": [[mean - low], [high - mean]]}]})
    return {"file": f"{NAME}_curves.png", "title": title, "panels": panels, "columns": 2,
            "note": "Paper (Figure 2, ALBERT-large against BERT-large, 24 layers): the all-shared curves are smoother "
                    "and stay above 0; the figure gives no values, so only ours are drawn."}


def layer_transitions_section(results: Mapping[str, Mapping[str, object]],
                              baselines: Mapping[str, float]) -> Dict[str, object]:
    """The per-depth table, the curves to plot, and the verdicts on smoothness (seed by seed) and on a fixed
    point."""
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
        arms[share_type] = {"roughness": {seed: roughness([depth["mean"] for depth in result["transitions"][
            "l2_distance"]]) for seed, result in results_by_seed(results, NAME, share_type).items()},
            "status": status}
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
    claims = {"all_shared_is_smoother": {
        "claim": "the all-shared curve is smoother (mean |ΔL2| between depths: not shared - all shared)",
        "compared": ["none", "all"],
        **judge_unless_failed(arms["none"]["roughness"], arms["all"]["roughness"], ("none", "all"), failed)}}
    deep_l2 = {seed: [depth["mean"] for depth in result["transitions_twice_as_deep"]["l2_distance"]]
               for seed, result in results_by_seed(results, NAME, "all").items()}
    mean_l2 = curves["all-shared at twice the depth"]["l2_distance"][0]
    claims["no_fixed_point"] = {
        "claim": f"the all-shared block, applied {len(mean_l2)} times, does not reach a fixed point (mean last L2 "
                 f"{mean_l2[-1]:.4f} against {mean_l2[0]:.4f} at depth 1; a fixed point: below "
                 f"{FIXED_POINT_FRACTION:.0%} of the first)",
        "last_l2": mean_l2[-1], "first_l2": mean_l2[0], "verdict": _fixed_point_verdict(deep_l2, failed)}
    interval = paired_interval(arms["none"]["roughness"], arms["all"]["roughness"], scale=1.0)
    return {"name": NAME, "title": "Layer transitions (paper Figure 2)", "table": table, "arms": arms,
            "claims": claims, "figures": [_figure(curves, interval, "Layer transitions (paper Figure 2)")]}
