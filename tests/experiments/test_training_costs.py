"""The report's table of what each training cost (albert_tf/experiments/training_costs.py), from the arms'
records: one row per training, its sittings summed, and the trainings from before the records in one sentence."""
from albert_tf.experiments.report import report_text
from albert_tf.experiments.training_costs import COLUMNS, training_costs_text

XEON = {"cpu_model": "Intel(R) Xeon(R) Processor (family 6, model 207)", "cpu_bfloat16_units": True, "cores": 2}
ZEN3 = {"cpu_model": "AMD EPYC (family 25, model 1)", "cpu_bfloat16_units": False, "cores": 2}


def _sitting(steps, seconds, other, machine, compile_path):
    return {"steps": steps, "seconds": seconds, "other_processes_cpu_seconds": other, "machine": machine,
            "compile_path": compile_path}


def _cells(table, row):
    return [cell.strip() for cell in table.splitlines()[row].strip("|").split("|")]


def test_each_training_is_one_row_over_its_sittings_and_a_reused_arm_has_none():
    kernels = "TensorFlow's own kernels (rule: this CPU has bfloat16 units and XLA computes ...)"
    xla = "XLA (flag: jit_compile=True)"
    # Two sittings on two machines, the first cut off before its records were kept from step 600 on.
    moved = {"record": {"sittings": [_sitting([0, 600], 300.0, 0.0, ZEN3, xla),
                                     _sitting([1200, 12000], 4500.0, 2400.0, XEON, kernels)],
                        "seconds": 4800.0, "steps_trained": 11400, "steps_per_second": 2.375,
                        "evaluation_seconds": 150.0, "finish_seconds": 210.0}}
    # Trained before the records held sittings: its CPU alone.
    older = {"trained_by": {"cpu": "AMD EPYC (family 26, model 2)"}, "record": {}}
    unmeasured = {"record": {"sittings": [_sitting([0, 40], 20.0, None, XEON, None)], "seconds": 20.0,
                             "steps_trained": 40, "steps_per_second": 2.0, "evaluation_seconds": 3.0}}
    results = {"sharing/none/seed1": moved, "sharing/all/seed0": older, "dropout/dropout0/seed1": {
        **moved, "trained_as": "sharing/none/seed1"}, "sharing/ffn/seed2": unmeasured, "sharing/all/seed1": {}}
    table, sentence = training_costs_text(results).split("\n\n")
    assert _cells(table, 0) == list(COLUMNS) and len(table.splitlines()) == 2 + 2
    assert _cells(table, 2) == ["sharing/ffn", "2", "Intel(R) Xeon(R) Processor (family 6, model 207) (bfloat16 "
                                "units)", "not recorded", "1", "40", "2.00", "0:00", "0", "not recorded"]
    # 2,400 other CPU-seconds over 4,800 wall seconds of 2 cores: a quarter.
    assert _cells(table, 3) == ["sharing/none", "1", "AMD EPYC (family 25, model 1); Intel(R) Xeon(R) Processor "
                                "(family 6, model 207) (bfloat16 units)", "XLA; TensorFlow's own kernels", "2",
                                "11,400", "2.38", "1:20", "6", "25%"]
    assert "dropout/dropout0" not in table
    assert sentence == ("2 of the 4 trainings are from before the records held sittings: wall time and speed not "
                        "recorded (trained on AMD EPYC (family 26, model 2), an unrecorded CPU).")
    assert training_costs_text({"sharing/all/seed0": older, "sharing/all/seed1": older}).startswith(
        "The 2 trainings are from before the records")
    assert training_costs_text({"sharing/all/seed0": older}).startswith("The training is from before the records")
    assert training_costs_text({"sharing/all/seed0": older, "sharing/ffn/seed0": moved}).split("\n\n")[1].startswith(
        "1 of the 2 trainings is from before the records")


def test_the_report_ends_with_the_costs_when_there_are_any():
    section = {"name": "demo", "title": "Demo", "table": "| a |\n|---|\n| 1 |", "claims": {}}
    baselines = {"masked_lm": 0.1, "sentence_order": 0.5}
    costs = training_costs_text({"demo/a/seed0": {"record": {}, "trained_by": {"cpu": "AMD EPYC"}}})
    report = report_text([section], scale="tiny", baselines=baselines, costs=costs)
    assert report.index("## Demo") < report.index("## What the trainings cost") < report.index(costs)
    assert "## What the trainings cost" not in report_text([section], scale="tiny", baselines=baselines)
