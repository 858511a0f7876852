"""REPORT.md, results.json and the PNG plots of a reproduction run, from its sections (each experiment's tables,
claims and figures) and its results.

Every claim a test judges is one test of the report's family (an ordering: one per adjacent pair); Holm's
adjustment over that family stands beside each p-value (`adjust_for_the_family`). This module needs scipy
(albert_tf.experiments.significance) when it writes: it runs in the report's process
(albert_tf.experiments.write_report).

Example:
>>> section = {"name": "demo", "title": "Demo", "table": "| a |\\n|---|\\n| 1 |", "claims": {}, "arms": {}}
>>> "## Demo" in report_text([section], scale="tiny", baselines={"masked_lm": 0.1, "sentence_order": 0.5})
True
"""

import math
import os
from typing import Dict, List, Mapping, Optional, Sequence

import matplotlib.colors
import matplotlib.ticker
import numpy as np

from albert_tf.experiments.arms import own_trainings
from albert_tf.experiments.atomic_json import write_json
from albert_tf.experiments.learning_curves import experiment_curves, plot_learning_curves
from albert_tf.experiments.plotting import PANEL_TITLE_FONT_SIZE, panels
from albert_tf.experiments.training_costs import training_costs_text
from albert_tf.experiments.verdicts import (MIN_SEEDS, NON_INFERIORITY_TEST, POWER, SIGNIFICANCE, p_text,
                                            downstream_accuracies)

REPORT_NAME = "REPORT.md"
RESULTS_NAME = "results.json"
# The paper's bars are hatched and pale, in the colour of ours at the same place in the panel.
PAPER_ALPHA = 0.3
# Inches per panel of an experiment's figure: three to a row fill a forge's page at the plots' resolution.
FIGURE_PANEL_SIZE = (4.2, 3.6)


def _tests(claim: Mapping[str, object]) -> List[Dict[str, object]]:
    """The tests a claim was judged by: its own, or each pair's of an ordering; none when it was not tested."""
    return [test for test in claim.get("pairs", [claim]) if "p_value" in test]


def adjust_for_the_family(sections: Sequence[Mapping[str, object]]) -> int:
    """Sets every test's Holm-adjusted p-value ("holm_p_value") over the family of every test of every section's
    claims; returns the family's size."""
    # scipy is on the report process's path only (albert_tf.experiments.verdicts).
    from albert_tf.experiments.significance import holm_adjusted
    family = [test for section in sections for claim in section["claims"].values() for test in _tests(claim)]
    for test, adjusted in zip(family, holm_adjusted([test["p_value"] for test in family])):
        test["holm_p_value"] = adjusted
    return len(family)


def _cells(test: Mapping[str, object]) -> List[str]:
    """A test's difference, seed spread, confidence interval, p-value, Holm-adjusted p-value and detectable
    difference as the verdict table shows them ("-" where it has none)."""
    if "ratio" in test:  # two models' timed repeats: a ratio of rates
        low, high = test["ratio_interval"]
        return [f"{test['ratio']:.2f}x", "-", f"{low:.2f}x to {high:.2f}x", p_text(test["p_value"]),
                p_text(test.get("holm_p_value")), f"{test['detectable_ratio']:.2f}x either way"]
    if "p_value" not in test:
        return [f"{test['difference']:+.4f}" if "difference" in test else "-"] + ["-"] * 5
    low, high = test["confidence_interval"]
    interval = f"{low:+.4f} to {high:+.4f}"
    if test.get("test") == NON_INFERIORITY_TEST:
        interval += " (90%)"
        detectable = f"{test['detectable_margin']:.4f} (margin)"
    else:
        detectable = f"{test['detectable_difference']:.4f}"
    return [f"{test['difference']:+.4f}", f"{test['spread']:.4f}", interval, p_text(test["p_value"]),
            p_text(test.get("holm_p_value")), detectable]


def _claim_cells(claim: Mapping[str, object]) -> List[str]:
    """An ordering's cells list its pairs', separated by "; "."""
    if "pairs" not in claim:
        return _cells(claim)
    per_pair = [_cells(pair) for pair in claim["pairs"]]
    return ["; ".join(column) for column in zip(*per_pair)] if per_pair else ["-"] * 6


def verdict_table(sections: Sequence[Mapping[str, object]]) -> str:
    """One row per claim of every section: the experiment, the claim, the verdict and, where a test judged it, the
    difference, its seed spread (the standard deviation of the per-seed differences), its confidence interval,
    p-value, Holm-adjusted p-value and the difference detectable at 80% power.

    Example:
    >>> claims = {"x": {"claim": "A beats B (MLM)", "verdict": "inside the noise", "difference": 0.001,
    ...                 "spread": 0.002, "confidence_interval": [-0.004, 0.006], "p_value": 0.46,
    ...                 "holm_p_value": 0.92, "detectable_difference": 0.0065}}
    >>> print(verdict_table([{"title": "Sharing (Table 4)", "claims": claims}]).splitlines()[-1])
    | Sharing (Table 4) | A beats B (MLM) | **inside the noise** | +0.0010 | 0.0020 | -0.0040 to +0.0060 | 0.4600 \
| 0.9200 | 0.0065 |
    """
    rows = ["| experiment | claim | verdict | difference | seed spread | 95% confidence interval | p | "
            "Holm-adjusted p | detectable at 80% power |", "|---|---|---|---|---|---|---|---|---|"]
    for section in sections:
        for claim in section["claims"].values():
            # A claim's own bars (mean |ΔL2|) would split its cell.
            text = claim["claim"].replace("|", "\\|")
            rows.append(f"| {section['title']} | {text} | **{claim['verdict']}** | "
                        f"{' | '.join(_claim_cells(claim))} |")
    return "\n".join(rows)


def _numbers_text(test: Mapping[str, object]) -> str:
    """A test's numbers in a sentence, for the claim's line under its experiment."""
    if "ratio" in test:
        low, high = test["ratio_interval"]
        return (f"ratio {test['ratio']:.2f}x, 95% CI {low:.2f}x to {high:.2f}x, p {p_text(test['p_value'])}, "
                f"Holm-adjusted p {p_text(test.get('holm_p_value'))}")
    if "p_value" not in test:
        return f"difference {test['difference']:+.4f}, {test['seeds']} seed(s)" if "difference" in test else ""
    low, high = test["confidence_interval"]
    text = f"difference {test['difference']:+.4f}, "
    if test.get("test") == NON_INFERIORITY_TEST:
        text += (f"one-sided 95% bounds {low:+.4f} and {high:+.4f} against the margin -{test['margin']:g}, "
                 f"p {p_text(test['p_value'])}")
    else:
        text += f"95% CI {low:+.4f} to {high:+.4f}, p {p_text(test['p_value'])}"
    text += f", Holm-adjusted p {p_text(test.get('holm_p_value'))}, {test['seeds']} seeds"
    if test["verdict"] == "inside the noise":
        text += (f"; at this spread {test['seeds']} seeds show a margin of {test['detectable_margin']:.4f} at 80% "
                 "power" if test.get("test") == NON_INFERIORITY_TEST else
                 f"; detectable at 80% power {test['detectable_difference']:.4f}")
    return text


def _claim_line(claim: Mapping[str, object]) -> str:
    if "pairs" in claim:
        numbers = "; ".join(f"{pair['claim']}: {pair['verdict']}" + (f" ({_numbers_text(pair)})"
                                                                     if _numbers_text(pair) else "")
                            for pair in claim["pairs"])
    else:
        numbers = _numbers_text(claim)
    return f"- {claim['claim']}: **{claim['verdict']}**" + (f" ({numbers})" if numbers else "")


def _verdicts_text(family_size: int, margins_note: str) -> str:
    return (f"**Verdicts.** Arms trained with the same seed see the same data in the same order, so two arms are "
            f"compared seed by seed: the difference on each seed both have, and a two-sided paired t-test of those "
            f"differences (Student's t quantiles, n - 1 degrees of freedom; scipy.stats) at the "
            f"{SIGNIFICANCE:.0%} level. A claim holds where the test rejects in the paper's direction and does not "
            "hold where it rejects in the other; otherwise it is inside the noise, and beside it stands the "
            f"difference a run of this many seeds detects at {POWER:.0%} power at the measured spread (from the "
            "noncentral t distribution, scipy.stats.nct). The seed spread is the standard deviation of the "
            "per-seed differences. A \"costs nothing\" claim is a non-inferiority test against a margin the budget "
            "names (Budget.non_inferiority_margins, printed in the claim): it holds where the one-sided 95% lower "
            "bound of (arm - reference) is above -margin, does not hold where the one-sided 95% upper bound is "
            "below it, and its interval is the 90% one those two bounds make; its p-value is the one-sided test "
            "against -margin, and the detectable column the smallest margin this many seeds show at 80% power "
            "when the arms are equal. A claim whose metric has no margin is not judged for non-inferiority. "
            + (margins_note + " " if margins_note else "")
            + "An ordering is judged pair by adjacent pair. The speed claims compare the logarithms of two models' "
            "timed repeats by Welch's t-test at the same level. The family is every test of this report (each "
            f"claim's own, each pair of an ordering: {family_size} tests); Holm's adjustment over it stands beside "
            "each p-value, and a verdict whose Holm-adjusted p-value is 0.05 or more could be the family's chance "
            f"finding. Fewer than {MIN_SEEDS} seeds both arms have: no verdict. A claim on a run that did not beat "
            "its majority baseline is not judged.")


def dev_sets_text(dev_sizes: Mapping[str, int], results: Mapping[str, Mapping[str, object]]) -> str:
    """For each downstream task of `dev_sizes` ({"downstream/<task>": examples}) that `results` scored: its dev
    set's size and the binomial sd of an accuracy at the trainings' mean, what the dev set's size alone allows.

    Example:
    >>> dev_sets_text({"downstream/packages": 3492}, {"sharing/none/seed0": {"downstream": {"packages": {
    ...     "accuracy": 0.35}}}}).split(": ", 1)[1]
    'packages, 3,492 examples (at the mean accuracy 0.350, binomial sd 0.008).'
    """
    parts = []
    for key, size in sorted(dev_sizes.items()):
        task = key.split("/", 1)[1]
        accuracies = downstream_accuracies([result for result in own_trainings(results).values()
                                            if task in result.get("downstream", {})], task)
        if accuracies and size > 0:
            mean = sum(accuracies) / len(accuracies)
            parts.append(f"{task}, {size:,} examples (at the mean accuracy {mean:.3f}, binomial sd "
                         f"{math.sqrt(mean * (1 - mean) / size):.3f})")
    if not parts:
        return ""
    return ("**Downstream dev sets.** The binomial sd, sqrt(p(1 - p) / n), is what the dev set's size alone puts on "
            "an accuracy; a seed spread far above it comes from the fine-tuning and the pretraining, not from the "
            "dev set: " + "; ".join(parts) + ".")


def report_text(sections: Sequence[Mapping[str, object]], scale: str, baselines: Mapping[str, float],
                limits: str = "", family_size: int = 0, margins_note: str = "", costs: str = "",
                dev_sets: str = "") -> str:
    """The Markdown report: the scale, what it cannot show (`limits`), the majority baselines, the downstream dev
    sets (`dev_sets`, dev_sets_text), how the claims are judged (a family of `family_size` tests), every claim's
    verdict in one table, then one table, its verdicts and its plots per experiment, and last what each training
    cost (`costs`, training_costs_text)."""
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
    if dev_sets:
        lines += [dev_sets, ""]
    lines += [_verdicts_text(family_size, margins_note), ""]
    if any(section["claims"] for section in sections):
        lines += ["## Verdicts", "", verdict_table(sections), ""]
    for section in sections:
        lines += [f"## {section['title']}", "", section["table"], ""]
        if section.get("reused"):
            lines += ["Reused trainings (the same model, records, objective and seed at this budget, trained once; "
                      "each row's evaluations are run on that training's checkpoints): " + "; ".join(
                          f"{arm} is {owner}" for arm, owner in section["reused"].items()) + ".", ""]
        lines += [_claim_line(claim) for claim in section["claims"].values()]
        for plot in section.get("plots", []):
            lines += ["", f"![{section['title']}]({plot})"]
        lines.append("")
    if costs:
        lines += ["## What the trainings cost", "", "From each training's record (its arm_result.json): the wall "
                  "time and steps/s of the sittings that trained it, and the share of the machine's CPU that other "
                  "processes (a test suite, another run) took meanwhile, which slows a training down. A sitting "
                  "from before the records were kept is missing, and so are its steps.", "", costs, ""]
    return "\n".join(lines)


def _bars(axis, panel: Mapping[str, object]) -> None:
    """Grouped bars over the panel's categories, a group member per series; ours in the colour cycle with their
    error bars, the paper's pale and hatched; a missing value (None) is written "no figure"."""
    positions = np.arange(len(panel["categories"]))
    width = 0.8 / len(panel["series"])
    drawn = {"ours": 0, "paper": 0}
    for index, series in enumerate(panel["series"]):
        offsets = positions + (index - (len(panel["series"]) - 1) / 2) * width
        values = np.array([np.nan if value is None else value for value in series["values"]], dtype=float)
        color = f"C{drawn[series['source']]}"
        drawn[series["source"]] += 1
        style = (dict(color=matplotlib.colors.to_rgba(color, PAPER_ALPHA), hatch="//", edgecolor=color)
                 if series["source"] == "paper" else dict(color=color))
        axis.bar(offsets, values, width, yerr=series["errors"], capsize=3, label=series["label"], **style)
        for offset, value in zip(offsets, values):
            if np.isnan(value):
                axis.text(offset, 0.5, "no figure", transform=axis.get_xaxis_transform(), rotation=90,
                          ha="center", va="center", fontsize=8, color="0.3")
    # The whole row of categories, also those drawn as "no figure" only.
    axis.set_xlim(-0.5, len(positions) - 0.5)
    axis.set_xticks(positions, panel["categories"], fontsize=9,
                    rotation=20 if max(len(str(category)) for category in panel["categories"]) > 8 else 0)
    if panel.get("yscale") == "log":
        axis.set_yscale("log")
        # Labels at 1, 2 and 5 of every decade, none at the other minor ticks (they overlapped).
        axis.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        axis.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))


def _lines(axis, panel: Mapping[str, object]) -> None:
    """A line per series against its x (the band: its lower and upper bounds), the majority baseline dashed; the
    paper's lines dashed with square markers, in the colour of the series of ours at the same place in its panel."""
    for index, series in enumerate(panel["series"]):
        xs = np.asarray(series["x"], dtype=float)
        paper = series.get("source") == "paper"
        drawn, = axis.plot(xs, series["values"], marker="s" if paper else "o",
                           linestyle="--" if paper else series.get("style", "-"), label=series["label"],
                           color=f"C{index}")
        if series.get("band") is not None:
            low, high = series["band"]
            axis.fill_between(xs, low, high, alpha=0.15, color=drawn.get_color())
    if panel.get("baseline") is not None:
        axis.axhline(panel["baseline"], color="tab:red", linestyle="--", label="majority baseline")
    if panel.get("xscale") == "log":
        axis.set_xscale("log")
        ticks = sorted({x for series in panel["series"] for x in series["x"]})
        axis.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
        axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def plot_figure(spec: Mapping[str, object], path: str, caption: str = "") -> str:
    """Draws spec["panels"] ("kind" "bars" or "lines", each with its "title", "xlabel", "ylabel" and "series",
    and optionally "yscale", "xscale", "reference_line" (a thin line at that value) and "baseline") in a grid of
    spec["columns"] (one row by default), titled spec["title"], with spec["note"] and `caption` (where the
    numbers were measured) under the title."""
    with panels(path, spec["title"], [(panel["xlabel"], panel["ylabel"]) for panel in spec["panels"]],
                panel_size=FIGURE_PANEL_SIZE, columns=spec.get("columns"),
                note=" ".join(filter(None, [spec.get("note"), caption]))) as axes:
        for axis, panel in zip(axes, spec["panels"]):
            axis.set_title(panel["title"], fontsize=PANEL_TITLE_FONT_SIZE)
            (_bars if panel["kind"] == "bars" else _lines)(axis, panel)
            if panel.get("reference_line") is not None:
                axis.axhline(panel["reference_line"], color="black", linewidth=0.8)
    return path


def _line_plot_figure(spec: Mapping[str, object]) -> Dict[str, object]:
    """A section's "line_plots" entry ({label: (xs, means, seed spreads)} against spec["xlabel"], the majority
    baseline, and the paper's lines in spec["paper"]) as plot_figure's panels, ours beside the paper's."""
    ours = {"kind": "lines", "title": "ours", "xlabel": spec["xlabel"], "ylabel": spec["ylabel"],
            "xscale": spec["xscale"], "baseline": spec["baseline"], "series": [
                {"label": f"ours, {label} (mean ± sd over seeds)", "x": xs, "values": means,
                 "band": [np.subtract(means, spreads).tolist(), np.add(means, spreads).tolist()]}
                for label, (xs, means, spreads) in spec["lines"].items()]}
    paper = spec["paper"]
    return {"title": spec["title"], "panels": [ours, {
        "kind": "lines", "title": paper["title"], "xlabel": spec["xlabel"], "ylabel": paper["ylabel"],
        "xscale": spec["xscale"], "series": [{"label": f"paper, {label}", "x": xs, "values": values,
                                              "source": "paper"}
                                             for label, (xs, values) in paper["lines"].items()]}]}


def provenance_text(results: Mapping[str, Mapping[str, object]]) -> str:
    """Where and when the arms of `results` trained, from their records: the CPU models and the first and last
    day of their training sittings (a result keeps its sittings since they were recorded; older ones only the
    CPU that trained them).

    Example:
    >>> provenance_text({"a/b/seed0": {"trained_by": {"cpu": "AMD EPYC"}}})
    'Ours trained on AMD EPYC (dates not recorded).'
    """
    cpus, days = set(), set()
    for result in results.values():
        sittings = result.get("record", {}).get("sittings", [])
        cpus |= {sitting["machine"]["cpu_model"] for sitting in sittings}
        days |= {sitting["started_at"][:10] for sitting in sittings}
        if not sittings and result.get("trained_by"):
            cpus.add(result["trained_by"]["cpu"])
    if not cpus:
        return ""
    when = f"{min(days)} to {max(days)}" if days else "dates not recorded"
    return f"Ours trained on {', '.join(sorted(cpus))} ({when})."


def write_report(output_dir: str, sections: Sequence[Dict[str, object]], results: Mapping[str, object],
                 scale: str, baselines: Mapping[str, float], limits: str = "",
                 margins_note: str = "", dev_sizes: Optional[Mapping[str, int]] = None) -> Dict[str, str]:
    """Writes the plots, REPORT.md and results.json (arm -> seed -> metric, what was measured without training
    (the speed experiment's models), and per claim the numbers used, Holm-adjusted over the family); `dev_sizes`,
    the examples of each downstream dev set, for the report's paragraph on them."""
    family_size = adjust_for_the_family(sections)
    for section in sections:
        own = {key: result for key, result in results.items() if key.startswith(section["name"] + "/")}
        caption = provenance_text(own)
        section["plots"] = []
        figures = [*section.get("figures", []), *({**_line_plot_figure(spec), "file": spec["file"]}
                                                  for spec in section.get("line_plots", []))]
        for spec in figures:
            section["plots"].append(spec["file"])
            plot_figure(spec, os.path.join(output_dir, spec["file"]), caption)
        learning_curves = experiment_curves(results, section["name"])
        if learning_curves:
            section["plots"].append(f"{section['name']}_learning_curves.png")
            plot_learning_curves(learning_curves, section["title"], os.path.join(output_dir, section["plots"][-1]),
                                 caption)
    report_path = os.path.join(output_dir, REPORT_NAME)
    with open(report_path, "w", encoding="utf-8") as handle:
        handle.write(report_text(sections, scale, baselines, limits, family_size, margins_note,
                                 training_costs_text(results) if results else "",
                                 dev_sets_text(dev_sizes or {}, results)))
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
