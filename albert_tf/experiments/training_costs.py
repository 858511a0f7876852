"""What each training of a reproduction run cost, from its record (albert_tf.experiments.sittings): the report's
last section, so that a reader sees where and how fast every arm trained, and what else ran beside it.

Example:
>>> sitting = {"steps": [0, 1200], "seconds": 600.0, "other_processes_cpu_seconds": 300.0,
...            "compile_path": "XLA (rule: ...)", "machine": {"cpu_model": "AMD EPYC", "cpu_bfloat16_units": False,
...                                                          "cores": 2}}
>>> result = {"record": {"sittings": [sitting], "seconds": 600.0, "steps_trained": 1200, "steps_per_second": 2.0,
...                      "evaluation_seconds": 60.0, "finish_seconds": 120.0}}
>>> print(training_costs_text({"sharing/all/seed0": result}).splitlines()[2])
| sharing/all | 0 | AMD EPYC | XLA | 1 | 1,200 | 2.00 | 0:10 | 3 | 25% |
"""

from typing import List, Mapping

from albert_tf.experiments.arms import own_trainings

COLUMNS = ("training", "seed", "CPU", "compile path", "sittings", "steps recorded", "steps/s", "training (h:mm)",
           "evaluation and fine-tuning (min)", "other processes' share of the CPU")


def _hours_and_minutes(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}:{minutes % 60:02d}"


def _cpus(sittings: List[Mapping[str, object]]) -> str:
    """Each sitting's CPU model, with its bfloat16 units where it has them, each once."""
    return "; ".join(dict.fromkeys(
        sitting["machine"]["cpu_model"] + (" (bfloat16 units)" if sitting["machine"].get("cpu_bfloat16_units") else "")
        for sitting in sittings))


def _compile_paths(sittings: List[Mapping[str, object]]) -> str:
    """Each sitting's compile path without the reason its rule gives, each once."""
    return "; ".join(dict.fromkeys((sitting.get("compile_path") or "not recorded").split(" (")[0]
                                   for sitting in sittings))


def _other_processes_share(sittings: List[Mapping[str, object]]) -> str:
    """The other processes' CPU seconds over the sittings' wall seconds times the machine's cores."""
    if any(sitting.get("other_processes_cpu_seconds") is None for sitting in sittings):
        return "not recorded"
    available = sum(float(sitting["seconds"]) * sitting["machine"]["cores"] for sitting in sittings)
    if available <= 0:
        return "-"
    return f"{sum(float(sitting['other_processes_cpu_seconds']) for sitting in sittings) / available:.0%}"


def _row(key: str, result: Mapping[str, object]) -> List[str]:
    experiment, arm, seed = key.split("/")
    record = result["record"]
    sittings = record["sittings"]
    after_training = float(record.get("evaluation_seconds", 0.0)) + float(record.get("finish_seconds", 0.0))
    steps_per_second = record.get("steps_per_second")
    return [f"{experiment}/{arm}", seed.replace("seed", ""), _cpus(sittings), _compile_paths(sittings),
            str(len(sittings)), f"{record['steps_trained']:,}",
            "-" if steps_per_second is None else f"{steps_per_second:.2f}",
            _hours_and_minutes(float(record["seconds"])), f"{after_training / 60:.0f}",
            _other_processes_share(sittings)]


def training_costs_text(results: Mapping[str, Mapping[str, object]]) -> str:
    """A Markdown row per training of `results` with sittings in its record (an arm that reuses another's
    training has no row of its own), in key order: its CPUs, compile paths, sittings, the steps its sittings
    recorded (a sitting cut off before records were kept leaves its steps out), their steps/s and wall time, the
    evaluation and fine-tuning after it, and the share of the machine's CPU that other processes took meanwhile.
    Then one sentence for the trainings from before the records held sittings, with the CPUs they name."""
    trainings = own_trainings(results)
    recorded = {key: result for key, result in trainings.items() if (result.get("record") or {}).get("sittings")}
    parts = []
    if recorded:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        parts.append("\n".join(lines + ["| " + " | ".join(_row(key, result)) + " |"
                                         for key, result in recorded.items()]))
    unrecorded = [result for key, result in trainings.items() if key not in recorded]
    if unrecorded:
        cpus = sorted({(result.get("trained_by") or {}).get("cpu") or "an unrecorded CPU" for result in unrecorded})
        verb = "is" if len(unrecorded) == 1 else "are"
        which = (f"{len(unrecorded)} of the {len(trainings)} trainings {verb}" if len(unrecorded) < len(trainings)
                 else "The training is" if len(trainings) == 1 else f"The {len(trainings)} trainings are")
        parts.append(f"{which} from before the records held sittings: wall time and speed not recorded (trained on "
                     f"{', '.join(cpus)}).")
    return "\n\n".join(parts)
