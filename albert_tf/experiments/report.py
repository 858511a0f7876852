"""REPORT.md, results.json and the PNG plots of a reproduction run.

Example:
>>> section = {"name": "demo", "title": "Demo", "table": "| a |\\n|---|\\n| 1 |", "claims": {}, "arms": {}}
>>> "## Demo" in report_text([section], scale="tiny", baselines={"masked_lm": 0.1, "sentence_order": 0.5})
True
"""

import json
import os
from typing import Dict, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on the machines this runs on
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot is imported)

REPORT_NAME = "REPORT.md"
RESULTS_NAME = "results.json"


def report_text(sections: Sequence[Mapping[str, object]], scale: str, baselines: Mapping[str, float]) -> str:
    """The Markdown report: the scale, the majority baselines, then one table and its verdicts per experiment."""
    lines = ["# Reproducing ALBERT's claims", "", f"**Scale.** {scale}", "",
             f"**Majority baselines on the held-out SOP set.** MLM accuracy {baselines['masked_lm']:.3f} (always the "
             f"most frequent masked token of the training data), SOP accuracy {baselines['sentence_order']:.3f} "
             "(always the most frequent label). A run at or below either is reported as failed, not as a result.", ""]
    for section in sections:
        lines += [f"## {section['title']}", "", section["table"], ""]
        for claim in section["claims"].values():
            numbers = ""
            if "difference" in claim:
                numbers = f" (difference {claim['difference']:+.4f}, seed spread {claim['spread']:.4f})"
            lines.append(f"- {claim['claim']}: **{claim['verdict']}**{numbers}")
        for plot in section.get("plots", []):
            lines += ["", f"![{section['title']}]({plot})"]
        lines.append("")
    return "\n".join(lines)


def plot_arm_accuracies(section: Mapping[str, object], baselines: Mapping[str, float], path: str) -> str:
    """Bars of each arm's held-out MLM and SOP accuracy (mean and seed spread) beside the majority baselines."""
    arms = list(section["arms"])
    figure, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for axis, metric, baseline, label in ((axes[0], "masked_lm_accuracy", baselines["masked_lm"], "MLM"),
                                          (axes[1], "sentence_order_accuracy", baselines["sentence_order"], "SOP")):
        means = [section["arms"][arm][metric]["mean"] for arm in arms]
        spreads = [section["arms"][arm][metric]["sd"] for arm in arms]
        axis.bar(arms, means, yerr=spreads, capsize=3, color="tab:blue", label="ours (mean ± sd over seeds)")
        axis.axhline(baseline, color="tab:red", linestyle="--", label="majority baseline")
        axis.set_xlabel(section["name"] + " arm")
        axis.set_ylabel(f"held-out {label} accuracy (fraction)")
        axis.legend(fontsize=7)
    figure.suptitle(section["title"], fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def write_report(output_dir: str, sections: Sequence[Dict[str, object]], results: Mapping[str, object],
                 scale: str, baselines: Mapping[str, float]) -> Dict[str, str]:
    """Writes the plots, REPORT.md and results.json (arm -> seed -> metric, and per claim the numbers used)."""
    for section in sections:
        name = f"{section['name']}_accuracy.png"
        plot_arm_accuracies(section, baselines, os.path.join(output_dir, name))
        section["plots"] = [name]
    report_path = os.path.join(output_dir, REPORT_NAME)
    with open(report_path, "w", encoding="utf-8") as handle:
        handle.write(report_text(sections, scale, baselines))
    arms: Dict[str, Dict[str, Dict[str, object]]] = {}
    for key, result in results.items():
        experiment, arm, seed = key.split("/")
        arms.setdefault(f"{experiment}/{arm}", {})[seed] = {"parameters": result["parameters"], **result["eval"]}
    document = {"scale": scale, "baselines": dict(baselines), "arms": arms,
                "claims": {f"{section['name']}/{claim}": numbers for section in sections
                           for claim, numbers in section["claims"].items()}}
    results_path = os.path.join(output_dir, RESULTS_NAME)
    with open(results_path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=True, default=float)
    return {"report": report_path, "results": results_path}
