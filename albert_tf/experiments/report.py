"""REPORT.md, results.json and the PNG plots of a reproduction run.

Example:
>>> section = {"name": "demo", "title": "Demo", "table": "| a |\\n|---|\\n| 1 |", "claims": {}, "arms": {}}
>>> "## Demo" in report_text([section], scale="tiny", baselines={"masked_lm": 0.1, "sentence_order": 0.5})
True
"""

import os
from typing import Dict, Mapping, Sequence

import matplotlib.ticker
import numpy as np

from albert_tf.experiments.json_files import write_json
from albert_tf.experiments.learning_curves import experiment_curves, plot_learning_curves
from albert_tf.experiments.plotting import panels

REPORT_NAME = "REPORT.md"
RESULTS_NAME = "results.json"


def report_text(sections: Sequence[Mapping[str, object]], scale: str, baselines: Mapping[str, float],
                limits: str = "") -> str:
    """The Markdown report: the scale, what it cannot show (`limits`), the majority baselines, every claim's verdict
    in one table, then one table and its verdicts per experiment."""
    lines = ["# Reproducing ALBERT's claims", "", f"**Scale.** {scale}", ""]
    if limits:
        lines += [f"**What this scale cannot show.** {limits}", ""]
    if baselines:  # none when nothing was trained (speed alone)
        lines += [f"**Majority baselines.** MLM accuracy {baselines['masked_lm']:.3f} (always the most frequent "
                  "masked token of the training data); on the original generator's held-out SOP records (a "
                  f"one-segment chunk takes a random B with label 1) {baselines['sentence_order']:.3f}; on the pure "
                  f"sets MLM {baselines.get('masked_lm_pure', float('nan')):.3f}, SOP "
                  f"{baselines.get('sop_pure', float('nan')):.3f} and NSP "
                  f"{baselines.get('nsp_pure', float('nan')):.3f}. A run at or below the baseline of what it trained "
                  "on is reported as failed, not as a result.", ""]
    lines += ["**Verdicts.** A difference smaller than the larger seed standard deviation of the two arms is inside "
              "the noise. Beside it stands the difference detectable at 80% power by a two-sided two-sample test at "
              "the 5% level, (z_0.975 + z_0.8) x sd x sqrt(2 / seeds), from normal quantiles "
              "(at 3 seeds a t-test needs about a third more).", ""]
    if any(section["claims"] for section in sections):
        lines += ["## Verdicts", "", verdict_table(sections), ""]
    for section in sections:
        lines += [f"## {section['title']}", "", section["table"], ""]
        if section.get("reused"):
            lines += ["Reused trainings (the same model, records, objective and seed at this budget, trained once; "
                      "each row's evaluations are run on that training's checkpoints): " + "; ".join(
                          f"{arm} is {owner}" for arm, owner in section["reused"].items()) + ".", ""]
        for claim in section["claims"].values():
            numbers = ""
            if "difference" in claim:
                numbers = f" (difference {claim['difference']:+.4f}, seed spread {claim['spread']:.4f}"
                detectable = claim.get("detectable_difference")
                numbers += f", detectable at 80% power {detectable:.4f})" if detectable is not None else ")"
            if claim.get("detail"):
                numbers += f" ({claim['detail']})"
            lines.append(f"- {claim['claim']}: **{claim['verdict']}**{numbers}")
        for plot in section.get("plots", []):
            lines += ["", f"![{section['title']}]({plot})"]
        lines.append("")
    return "\n".join(lines)


def verdict_table(sections: Sequence[Mapping[str, object]]) -> str:
    """One row per claim of every section: the experiment, the claim, the verdict and, where the verdict compared
    seeds, the difference with its seed spread and the difference detectable at 80% power.

    Example:
    >>> claims = {"x": {"claim": "A beats B (MLM)", "verdict": "inside the noise", "difference": 0.001,
    ...                 "spread": 0.002, "detectable_difference": 0.004}}
    >>> print(verdict_table([{"title": "Sharing (Table 4)", "claims": claims}]).splitlines()[-1])
    | Sharing (Table 4) | A beats B (MLM) | **inside the noise** | +0.0010 | 0.0020 | 0.0040 |
    """
    rows = ["| experiment | claim | verdict | difference | seed spread | detectable at 80% power |",
            "|---|---|---|---|---|---|"]
    for section in sections:
        for claim in section["claims"].values():
            numbers = [f"{claim['difference']:+.4f}", f"{claim['spread']:.4f}",
                       "-" if claim.get("detectable_difference") is None else f"{claim['detectable_difference']:.4f}"
                       ] if "difference" in claim else ["-", "-", "-"]
            # A claim's own bars (mean |ΔL2|) would split its cell.
            text = claim["claim"].replace("|", "\\|")
            rows.append(f"| {section['title']} | {text} | **{claim['verdict']}** | {' | '.join(numbers)} |")
    return "\n".join(rows)


def plot_arm_accuracies(section: Mapping[str, object], baselines: Mapping[str, float], path: str) -> str:
    """Bars of each arm's held-out accuracies (mean and seed spread), one panel per metric of the section's
    `plot_metrics` ((metric, baseline key, label)), each beside its majority baseline."""
    arms = list(section["arms"])
    metrics = section["plot_metrics"]
    with panels(path, section["title"], [(section["name"] + " arm", f"held-out {label} (fraction)")
                                         for _, _, label in metrics]) as axes:
        for axis, (metric, baseline_key, _) in zip(axes, metrics):
            means = [section["arms"][arm][metric]["mean"] for arm in arms]
            spreads = [section["arms"][arm][metric]["sd"] for arm in arms]
            axis.bar(arms, means, yerr=spreads, capsize=3, color="tab:blue", label="ours (mean ± sd over seeds)")
            axis.axhline(baselines[baseline_key], color="tab:red", linestyle="--", label="majority baseline")
    return path


def plot_transition_curves(section: Mapping[str, object], path: str) -> str:
    """L2 distance and cosine similarity between each block's input and output against depth, one line per model
    (the shaded band: the spread over tokens)."""
    metrics = (("l2_distance", "L2 distance (hidden-state units)"),
               ("cosine_similarity", "cosine similarity (unitless)"))
    with panels(path, section["title"], [("depth (applied block)", label) for _, label in metrics]) as axes:
        for axis, (metric, _) in zip(axes, metrics):
            for name, curve in section["curves"].items():
                means, spreads = (np.asarray(values) for values in curve[metric])
                depths = np.arange(1, len(means) + 1)
                axis.plot(depths, means, marker="o", linestyle="--" if "twice" in name else "-", label=name)
                axis.fill_between(depths, means - spreads, means + spreads, alpha=0.15)
    return path


def plot_lines(spec: Mapping[str, object], path: str) -> str:
    """One line per entry of spec["lines"] ({label: (xs, means, seed spreads)}, the band: mean ± spread) against
    spec["xlabel"], with the majority baseline dashed."""
    with panels(path, spec["title"], [(spec["xlabel"], spec["ylabel"])], panel_size=(5, 3.2)) as (axis,):
        for label, (xs, means, spreads) in spec["lines"].items():
            xs, means, spreads = (np.asarray(values, dtype=float) for values in (xs, means, spreads))
            axis.plot(xs, means, marker="o", label=f"{label} (mean ± sd over seeds)")
            axis.fill_between(xs, means - spreads, means + spreads, alpha=0.15)
        axis.axhline(spec["baseline"], color="tab:red", linestyle="--", label="majority baseline")
        axis.set_xscale(spec["xscale"])
        if spec["xscale"] == "log":
            ticks = sorted({x for xs, _, _ in spec["lines"].values() for x in xs})
            axis.set_xticks(ticks, [str(tick) for tick in ticks])
            axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    return path


def plot_bars(spec: Mapping[str, object], path: str) -> str:
    """Grouped bars over spec["categories"], one panel per entry of spec["panels"] ({"ylabel", "yscale",
    "series": {label: (values, errors or None)}}); errors are matplotlib's yerr (one row, or lower and upper)."""
    categories = spec["categories"]
    positions = np.arange(len(categories))
    with panels(path, spec["title"], [(spec["xlabel"], panel["ylabel"]) for panel in spec["panels"]],
                panel_size=(5, 3.4)) as axes:
        for axis, panel in zip(axes, spec["panels"]):
            width = 0.8 / len(panel["series"])
            for index, (label, (values, errors)) in enumerate(panel["series"].items()):
                axis.bar(positions + (index - (len(panel["series"]) - 1) / 2) * width, values, width, yerr=errors,
                         capsize=3, label=label)
            axis.set_yscale(panel["yscale"])
            if panel["yscale"] == "log":
                # Labels at 1, 2 and 5 of every decade, none at the other minor ticks (they overlapped).
                axis.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
                axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            axis.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            axis.set_xticks(positions, categories, rotation=20, fontsize=7)
    return path


def write_report(output_dir: str, sections: Sequence[Dict[str, object]], results: Mapping[str, object],
                 scale: str, baselines: Mapping[str, float], limits: str = "") -> Dict[str, str]:
    """Writes the plots, REPORT.md and results.json (arm -> seed -> metric, what was measured without training
    (the speed experiment's models), and per claim the numbers used)."""
    for section in sections:
        section["plots"] = []
        if "plot_metrics" in section:
            section["plots"].append(f"{section['name']}_accuracy.png")
            plot_arm_accuracies(section, baselines, os.path.join(output_dir, section["plots"][-1]))
        if "curves" in section:
            section["plots"].append(f"{section['name']}_curves.png")
            plot_transition_curves(section, os.path.join(output_dir, section["plots"][-1]))
        for kind, plot in (("line_plots", plot_lines), ("bar_plots", plot_bars)):
            for spec in section.get(kind, []):
                section["plots"].append(spec["file"])
                plot(spec, os.path.join(output_dir, spec["file"]))
        learning_curves = experiment_curves(results, section["name"])
        if learning_curves:
            section["plots"].append(f"{section['name']}_learning_curves.png")
            plot_learning_curves(learning_curves, section["title"], os.path.join(output_dir, section["plots"][-1]))
    report_path = os.path.join(output_dir, REPORT_NAME)
    with open(report_path, "w", encoding="utf-8") as handle:
        handle.write(report_text(sections, scale, baselines, limits))
    arms: Dict[str, Dict[str, Dict[str, object]]] = {}
    for key, result in results.items():
        experiment, arm, seed = key.split("/")
        metrics = {"parameters": result["parameters"], **result["eval"]}
        if result.get("trained_as", key) != key:
            metrics["trained_as"] = result["trained_as"]
        for task, task_metrics in result.get("downstream", {}).items():
            metrics.update({f"downstream/{task}/{name}": value for name, value in task_metrics.items()})
        for pure_set, pure_metrics in result.get("pure_eval", {}).items():
            metrics.update({f"pure_{pure_set}/{name}": value for name, value in pure_metrics.items()})
        for transitions in ("transitions", "transitions_twice_as_deep"):
            for name, per_depth in result.get(transitions, {}).items():
                metrics[f"{transitions}/{name}"] = [depth["mean"] for depth in per_depth]
        for name, values in result.get("curve", {}).items():
            metrics[f"curve/{name}"] = values
        arms.setdefault(f"{experiment}/{arm}", {})[seed] = metrics
    document = {"scale": scale, "limits": limits, "baselines": dict(baselines), "arms": arms,
                "measurements": {key: value for section in sections
                                 for key, value in section.get("measurements", {}).items()},
                "claims": {f"{section['name']}/{claim}": numbers for section in sections
                           for claim, numbers in section["claims"].items()}}
    results_path = os.path.join(output_dir, RESULTS_NAME)
    write_json(results_path, document)
    return {"report": report_path, "results": results_path}
