"""The gate before a sharing run's other arms: do not shared and all shared differ by more than the planned seeds
can resolve?

The sharing question (paper Table 4: sharing the attention costs nothing, sharing the feed-forward half costs
most) needs the not-shared and all-shared models to differ clearly; if they do not, no arm between them can show
anything, and training the other arms is wasted (the small budget's gap on held-out MLM was 0.0012 and shrinking).
So a run first trains those two arms on the gate's seeds (`reproduce_paper --arms=none,all --seeds=0,1`), and
this module decides, by a rule fixed before their results exist:

- d_s = held-out MLM accuracy of not shared minus all shared, seed by seed (the arms see the same data in the same
  order with the same seed), and their mean g and standard deviation s (one degree of freedom at two seeds: a
  rough spread, which is why the rule asks for the planned seeds' detectable difference, not the gate's own test);
- the gate passes when g > 0 and g is at least the difference a two-sided paired t-test at 5% detects with 80% power
  over the planned seeds at that spread (significance.detectable_difference, the noncentral t);
- when it passes, it names the margin of "sharing the attention costs nothing" on held-out MLM before the attention
  arms train: a quarter of g (rounded to 0.0001), so that the claim asks whether attention sharing costs less than
  a quarter of what sharing everything costs; and it says how many seeds (at most 6) the non-inferiority test
  needs to show that margin with 80% power at the gate's spread.

It reads the gate's seeds alone (0 and 1 unless `--seeds` names others), so that run again after more seeds have
finished it decides as it did. The decision is written to OUTPUT_DIR/gate.json with every number it used, which
the run's repository keeps, and printed:

    python -m albert_tf.experiments.gate --output_dir=paper_runs/medium

Example:
>>> decision = gate_decision({0: 0.200, 1: 0.206}, {0: 0.190, 1: 0.195}, planned_seeds=5)
>>> decision["passed"], round(decision["gap"], 4), decision["masked_lm_margin"]
(True, 0.0105, 0.0026)
>>> gate_decision({0: 0.200, 1: 0.201}, {0: 0.199, 1: 0.2015}, planned_seeds=5)["passed"]
False
"""

import argparse
import math
import os
from typing import Dict, Mapping, Optional, Sequence

from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.write_report import put_report_packages_on_path

GATE_NAME = "gate.json"
EXPERIMENT = "sharing"
ARMS = ("none", "all")
GATE_SEEDS = (0, 1)
PLANNED_SEEDS = 5
MAX_SEEDS = 6
MARGIN_FRACTION = 0.25


def gate_decision(not_shared: Mapping[int, float], all_shared: Mapping[int, float],
                  planned_seeds: int = PLANNED_SEEDS) -> Dict[str, object]:
    """The gate's decision from each arm's held-out MLM accuracy by seed (see the module docstring)."""
    from albert_tf.experiments.significance import detectable_difference, paired_differences

    differences = paired_differences(not_shared, all_shared)
    if len(differences) < 2:
        raise ValueError(f"The gate needs both arms on at least two seeds; they share {sorted(differences)}.")
    values = list(differences.values())
    gap = sum(values) / len(values)
    spread = math.sqrt(sum((value - gap) ** 2 for value in values) / (len(values) - 1))
    detectable = detectable_difference(spread / math.sqrt(planned_seeds), planned_seeds - 1)
    passed = gap > 0 and gap >= detectable
    margin = round(MARGIN_FRACTION * gap, 4) if passed else None
    # The seeds (up to MAX_SEEDS) at which the non-inferiority test shows that margin with 80% power when attention
    # sharing truly costs nothing, at the gate's spread; None: more than MAX_SEEDS.
    seeds_for_margin = next((seeds for seeds in range(2, MAX_SEEDS + 1) if margin and detectable_difference(
        spread / math.sqrt(seeds), seeds - 1, two_sided=False) <= margin), None)
    return {"differences": {str(seed): value for seed, value in differences.items()}, "gap": gap,
            "spread": spread, "planned_seeds": planned_seeds, "detectable_at_planned_seeds": detectable,
            "passed": passed, "masked_lm_margin": margin, "seeds_for_margin": seeds_for_margin,
            "rule": f"passes when the mean not-shared minus all-shared held-out MLM difference over the gate's seeds "
                    f"is positive and at least what a two-sided paired t-test at 5% detects with 80% power over "
                    f"{planned_seeds} seeds at the gate's spread; the margin of 'sharing the attention costs "
                    f"nothing' is then {MARGIN_FRACTION:g} of that difference"}


def _masked_lm_by_seed(output_dir: str, arm: str, seeds: Sequence[int]) -> Dict[int, float]:
    found = {}
    for seed in seeds:
        path = os.path.join(output_dir, "arms", EXPERIMENT, arm, f"seed{seed}", "arm_result.json")
        if os.path.exists(path):
            found[seed] = float(read_json(path)["eval"]["masked_lm_accuracy"])
    return found


def decide(output_dir: str, planned_seeds: int = PLANNED_SEEDS,
           seeds: Sequence[int] = GATE_SEEDS) -> Dict[str, object]:
    """Decides the gate of the run in `output_dir` from its finished not-shared and all-shared arms on `seeds`,
    writes gate.json there and returns the decision."""
    not_shared, all_shared = (_masked_lm_by_seed(output_dir, arm, seeds) for arm in ARMS)
    paired = sorted(set(not_shared) & set(all_shared))
    if len(paired) < 2:
        raise ValueError(f"{output_dir} holds finished not-shared and all-shared arms on seeds {paired} of the "
                         f"gate's {list(seeds)}; the gate needs both on two seeds: train them with "
                         f"`reproduce_paper --arms=none,all --seeds={','.join(map(str, seeds))}` there first.")
    decision = gate_decision(not_shared, all_shared, planned_seeds=planned_seeds)
    write_json(os.path.join(output_dir, GATE_NAME), decision)
    return decision


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Decides whether a sharing run's other arms are worth training.")
    parser.add_argument("--output_dir", required=True, help="The run's output directory.")
    parser.add_argument("--planned_seeds", type=int, default=PLANNED_SEEDS, help="Seeds every arm will have.")
    parser.add_argument("--seeds", default=",".join(map(str, GATE_SEEDS)),
                        help="The gate's seeds, comma-separated: the only ones it reads.")
    arguments = parser.parse_args(argv)
    try:
        seeds = [int(seed) for seed in arguments.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds={arguments.seeds}: give whole numbers separated by commas, such as 0,1.")
    put_report_packages_on_path()
    try:
        decision = decide(os.path.abspath(arguments.output_dir), arguments.planned_seeds, seeds)
    except ValueError as error:  # too few finished arms, or a damaged arm_result.json: its sentence says which
        raise SystemExit(f"error: {error}") from None
    verdict = "passes" if decision["passed"] else "fails"
    print(f"The gate {verdict}: not shared minus all shared on held-out MLM {decision['gap']:+.4f} (spread "
          f"{decision['spread']:.4f} over {len(decision['differences'])} seeds); {decision['planned_seeds']} seeds "
          f"detect {decision['detectable_at_planned_seeds']:.4f} at 80% power"
          + (f"; margin of 'attention sharing costs nothing': {decision['masked_lm_margin']}, shown at 80% power by "
             f"{decision['seeds_for_margin'] or f'more than {MAX_SEEDS}'} seeds." if decision["passed"] else "."))


if __name__ == "__main__":
    main()
