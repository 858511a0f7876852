"""What an arm is, and an experiment's results looked up by arm and seed, without TensorFlow: the experiment
modules that declare arms also build their report sections, and the report is written in a process that must not
import TensorFlow (albert_tf.experiments.write_report). Training them is albert_tf.experiments.runner's.

Results are {arm key: result}, the key "EXPERIMENT/ARM/seedN" (`Arm.key`).

Example:
>>> results = {"sharing/all/seed1": {"eval": 0.2}, "sharing/all/seed0": {"eval": 0.1},
...            "sharing/none/seed0": {"eval": 0.3}}
>>> results_by_seed(results, "sharing", "all")
{0: {'eval': 0.1}, 1: {'eval': 0.2}}
>>> reused_trainings({"dropout/dropout0/seed0": {"trained_as": "sharing/all/seed0"},
...                   "dropout/dropout0.1/seed0": {"trained_as": "dropout/dropout0.1/seed0"}})
{'dropout/dropout0': 'sharing/all'}
>>> list(own_trainings({"dropout/dropout0/seed0": {"trained_as": "sharing/all/seed0"}, "sharing/all/seed0": {}}))
['sharing/all/seed0']
"""

import dataclasses
import json
from typing import Callable, Dict, List, Mapping

from albert_tf.config import AlbertConfig


@dataclasses.dataclass(frozen=True)
class Arm:
    """One model of one experiment, trained with one seed: on the `train_data` records ("sop" or "nsp") with the
    sentence loss weighted by `sentence_loss_weight` (0: the masked LM alone), evaluated on the original
    generator's held-out records and, with `evaluate_pure_sets`, on the pure SOP and NSP sets; with
    `measure_transitions`, its block transitions are measured on the held-out records (and, for one shared block,
    at twice the trained depth); with `downstream`, it is fine-tuned for the downstream score
    (albert_tf.experiments.downstream). Every arm's result holds the held-out metrics of its kept checkpoints (a
    held-out learning curve; albert_tf.experiments.runner)."""

    experiment: str
    name: str
    seed: int
    config: AlbertConfig
    train_data: str = "sop"
    sentence_loss_weight: float = 1.0
    evaluate_pure_sets: bool = False
    measure_transitions: bool = False
    downstream: bool = False

    @property
    def key(self) -> str:
        return f"{self.experiment}/{self.name}/seed{self.seed}"

    @property
    def training(self) -> str:
        """What decides the trained weights at a given budget: the model, the records, the sentence loss weight and
        the seed (equal strings: one training)."""
        return json.dumps({"config": self.config.to_dict(), "train_data": self.train_data,
                           "sentence_loss_weight": float(self.sentence_loss_weight), "seed": self.seed},
                          sort_keys=True)


def results_by_seed(results: Mapping[str, Mapping[str, object]], experiment: str,
                    arm: str) -> Dict[int, Mapping[str, object]]:
    """{seed: result} of one arm of `experiment`, in seed order."""
    prefix = f"{experiment}/{arm}/seed"
    return dict(sorted((int(key[len(prefix):]), result) for key, result in results.items()
                       if key.startswith(prefix)))


def seed_results(results: Mapping[str, Mapping[str, object]], experiment: str,
                 arm: str) -> List[Mapping[str, object]]:
    """The results of one arm of `experiment`, one per seed, in seed order."""
    return list(results_by_seed(results, experiment, arm).values())


def seed_values(results: Mapping[str, Mapping[str, object]], experiment: str, arm: str,
                metric: Callable[[Mapping[str, object]], float]) -> Dict[int, float]:
    """{seed: metric(result)} of one arm of `experiment`: what two arms are compared on, seed by seed."""
    return {seed: float(metric(result)) for seed, result in results_by_seed(results, experiment, arm).items()}


def reused_trainings(results: Mapping[str, Mapping[str, object]]) -> Dict[str, str]:
    """{experiment/arm: the experiment/arm whose training it reuses} for the arms of `results` (each with its
    `trained_as`, the key of the arm whose directory holds its training) trained in another arm's directory."""
    reused = {}
    for key, result in sorted(results.items()):
        if result["trained_as"] != key:
            reused[key.rsplit("/", 1)[0]] = result["trained_as"].rsplit("/", 1)[0]
    return reused


def own_trainings(results: Mapping[str, Mapping[str, object]]) -> Dict[str, Mapping[str, object]]:
    """The results of `results` whose training is their own (no `trained_as`, or their own key), in key order:
    each training once, however many arms read it."""
    return {key: result for key, result in sorted(results.items()) if result.get("trained_as", key) == key}
