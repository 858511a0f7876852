"""A reproduction run's report from its kept records: report_inputs.json (albert_tf.experiments.report_inputs),
the arm_result.json and downstream_result.json files it names and the speed records, read back into the results
and sections the report is written from. No TensorFlow: albert_tf.experiments.write_report runs it in a process
of its own.

Example (it needs a finished run's records, so it is not run here):
>>> write_report_from_records("paper_runs/small")["report"]  # doctest: +SKIP
'paper_runs/small/REPORT.md'
"""

import os
from typing import Dict, Mapping

from albert_tf.experiments import dropout, embedding_size, layer_transitions, sharing, sop_vs_nsp, speed_report
from albert_tf.experiments.arms import reused_trainings
from albert_tf.experiments.budgets import SpeedBudget
from albert_tf.experiments.atomic_json import read_json
from albert_tf.experiments.report import write_report
from albert_tf.experiments.verdicts import ClaimRules
from albert_tf.experiments.write_report import REPORT_INPUTS_NAME

# The experiments whose sections judge claims by ClaimRules: name -> section(results, baselines, rules).
JUDGED_SECTIONS = {sharing.NAME: sharing.sharing_section, sop_vs_nsp.NAME: sop_vs_nsp.sop_vs_nsp_section,
                   embedding_size.NAME: embedding_size.embedding_size_section, dropout.NAME: dropout.dropout_section}


def read_report_inputs(output_dir: str) -> Dict[str, object]:
    path = os.path.join(output_dir, REPORT_INPUTS_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{output_dir} holds no {REPORT_INPUTS_NAME}, which a reproduction run writes before "
                                "its report; rerun reproduce_paper there to write it.")
    return read_json(path)


def kept_results(output_dir: str, inputs: Mapping[str, object]) -> Dict[str, Dict[str, object]]:
    """{arm key: its training's arm_result.json, with its `trained_as`, `config` and `downstream` scores} for every
    arm of `inputs`, read from the files they name."""
    results = {}
    for key, arm in inputs["arms"].items():
        results[key] = {**read_json(os.path.join(output_dir, arm["result"])), "trained_as": arm["trained_as"],
                        "config": arm["config"]}
        if arm["downstream"]:
            results[key]["downstream"] = {task: read_json(os.path.join(output_dir, path))
                                          for task, path in arm["downstream"].items()}
    return results


def _section(name: str, results: Mapping[str, Mapping[str, object]], baselines: Mapping[str, float],
             rules: ClaimRules) -> Dict[str, object]:
    own = {key: result for key, result in results.items() if key.startswith(name + "/")}
    if name == layer_transitions.NAME:
        section = layer_transitions.layer_transitions_section(own, baselines)
    else:
        section = JUDGED_SECTIONS[name](own, baselines, rules)
    return {**section, "reused": reused_trainings(own)}


def write_report_from_records(output_dir: str) -> Dict[str, str]:
    """Writes REPORT.md, results.json and the plots of the run in `output_dir` from its kept records; returns
    write_report's paths."""
    inputs = read_report_inputs(output_dir)
    results = kept_results(output_dir, inputs)
    rules = ClaimRules(inputs["downstream_score"], inputs["non_inferiority_margins"])
    sections = [inputs["learning_rate_section"]] if inputs["learning_rate_section"] else []
    for name in inputs["experiments"]:
        if name == speed_report.NAME:
            records = speed_report.read_speed_records(os.path.join(output_dir, inputs["speed_dir"]))
            sections.append(speed_report.speed_report_section(records, SpeedBudget(**inputs["speed_budget"])))
        else:
            sections.append(_section(name, results, inputs["baselines"], rules))
    return write_report(output_dir, sections, results, inputs["scale"], inputs["baselines"], inputs["limits"],
                        inputs["non_inferiority_margins_note"], inputs.get("downstream_dev_sizes", {}))
