"""The gate before a sharing run's other arms (albert_tf/experiments/gate.py): its rule on made-up arm results."""
import json
import os

import pytest

from albert_tf.experiments import gate
from albert_tf.experiments.significance import detectable_difference


def _write_arms(output_dir, accuracies):
    for arm, by_seed in accuracies.items():
        for seed, value in by_seed.items():
            directory = os.path.join(output_dir, "arms", "sharing", arm, f"seed{seed}")
            os.makedirs(directory)
            with open(os.path.join(directory, "arm_result.json"), "w") as handle:
                json.dump({"eval": {"masked_lm_accuracy": value}}, handle)


def test_a_gap_the_planned_seeds_resolve_passes_and_names_the_margin():
    decision = gate.gate_decision({0: 0.300, 1: 0.310}, {0: 0.280, 1: 0.291})
    assert decision["passed"] and decision["gap"] == pytest.approx(0.0195)
    assert decision["spread"] == pytest.approx(0.001 / 2 ** 0.5)
    assert decision["detectable_at_planned_seeds"] == pytest.approx(
        detectable_difference(decision["spread"] / 5 ** 0.5, 4))
    assert decision["masked_lm_margin"] == pytest.approx(0.0049)
    assert 2 <= decision["seeds_for_margin"] <= gate.MAX_SEEDS


@pytest.mark.parametrize("not_shared, all_shared", [
    ({0: 0.150, 1: 0.151}, {0: 0.149, 1: 0.151}),  # the small run's kind of gap: inside the spread
    ({0: 0.150, 1: 0.152}, {0: 0.160, 1: 0.161}),  # all shared ahead
])
def test_a_gap_the_planned_seeds_cannot_resolve_fails_and_names_no_margin(not_shared, all_shared):
    decision = gate.gate_decision(not_shared, all_shared)
    assert not decision["passed"] and decision["masked_lm_margin"] is None and decision["seeds_for_margin"] is None


def test_the_gate_reads_its_seeds_alone_and_writes_its_decision(tmp_path, capsys):
    # Seed 2 finished after the gate: read, it would have turned the decision.
    _write_arms(str(tmp_path), {"none": {0: 0.30, 1: 0.31, 2: 0.20}, "all": {0: 0.28, 1: 0.291, 2: 0.33}})
    gate.main([f"--output_dir={tmp_path}"])
    recorded = json.loads((tmp_path / gate.GATE_NAME).read_text())
    assert recorded["passed"] and set(recorded["differences"]) == {"0", "1"}
    assert capsys.readouterr().out.startswith("The gate passes: not shared minus all shared on held-out MLM +0.0195")

    gate.main([f"--output_dir={tmp_path}", "--seeds=0,1,2"])
    assert not json.loads((tmp_path / gate.GATE_NAME).read_text())["passed"]
    with pytest.raises(SystemExit):
        gate.main([f"--output_dir={tmp_path}", "--seeds=0-2"])
    assert "--seeds=0-2: give whole numbers separated by commas, such as 0,1." in capsys.readouterr().err


def test_a_gate_without_two_paired_seeds_is_one_sentence(tmp_path):
    with pytest.raises(ValueError, match=r"The gate needs both arms on at least two seeds; they share \[0\]\."):
        gate.gate_decision({0: 0.3}, {0: 0.2, 1: 0.25})
    _write_arms(str(tmp_path), {"none": {0: 0.30}, "all": {0: 0.28, 1: 0.291}})
    with pytest.raises(SystemExit) as stopped:
        gate.main([f"--output_dir={tmp_path}"])
    assert str(stopped.value) == (
        f"error: {tmp_path} holds finished not-shared and all-shared arms on seeds [0] of the gate's [0, 1]; the "
        "gate needs both on two seeds: train them with `reproduce_paper --arms=none,all --seeds=0,1` there first.")
    assert not (tmp_path / gate.GATE_NAME).exists()
