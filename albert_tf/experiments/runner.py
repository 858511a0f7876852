"""Arms and the resumable run over them: every arm is an ordinary pretraining output directory.

Arms that train the same model on the same records with the same objective and seed (`Arm.training`; the budget
fixes steps, batch, schedule and checkpoints for all) are one training: several experiments need the not-shared
and the all-shared model, for instance. It is trained once, in the directory of the first of its arms that already
holds a training (so a run of other experiments finds it), or else of its first arm in order, and every arm of it
reads that result; the evaluations only some of them ask for (the pure sets, the block transitions) are run on its
final checkpoint and kept in the same `arm_result.json`.

A training is finished when its directory holds `arm_result.json`, written after its evaluations and after
`finish_training` (the downstream fine-tuning), so that the result holds everything the report needs and a rerun
needs none of the training's checkpoints: arm_result.json files alone, on another machine, keep their trainings.
A rerun keeps a finished training (adding only an evaluation a newly requested arm needs). A training without it
is trained as run_pretraining trains, resuming from the directory's last checkpoint, then evaluated. Every result
records the code that trained it (`trained_by`) and what each sitting of its training cost (`record`: wall time,
steps/s, CPU, compile path, what else ran; albert_tf.experiments.sittings); a run refuses to train beside results
of other step code, so that every arm of an output directory is trained by one code. Progress logs the trainings
done and remaining, with an ETA from the steps trained in this run.

Example (it trains, so it is not run here):
>>> arm = Arm(experiment="sharing", name="share_all", seed=0, config=AlbertConfig(vocab_size=1000))  # doctest: +SKIP
>>> results = run_arms([arm], "out/arms", budget_for("smoke"), data)  # doctest: +SKIP
>>> results[arm.key]["eval"]["masked_lm_accuracy"]  # doctest: +SKIP
0.08
"""

import dataclasses
import hashlib
import os
import subprocess
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.experiments.arms import Arm
from albert_tf.experiments.budgets import Budget
from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.learning_curves import training_curve
from albert_tf.experiments.pretraining_data import PretrainingData
from albert_tf.experiments.sittings import read_sittings, sitting, training_record
from albert_tf.experiments.stopping import stopped_during
from albert_tf.experiments.block_transitions import block_transitions, deeper_shared_encoder
from albert_tf.models.param_count import encoder_parameters
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions
from albert_tf.training.compile_choice import cpu_model_name, step_code_fingerprint
from albert_tf.training.summaries import read_scalars
from data_gen.pretraining.input_pipeline import pretraining_dataset_fn

ARM_RESULT_NAME = "arm_result.json"
# Held-out batches the block transitions are measured on.
TRANSITION_BATCHES = 8
# The held-out metrics of an arm's held-out curve.
CURVE_METRICS = ("masked_lm_accuracy", "masked_lm_loss")
# Every arm keeps this many evenly spaced checkpoints (the last at the final step) and its result holds the held-out
# metrics of each: the same checkpoints for every arm, so arms that differ only in what they read are one training.
HELD_OUT_CURVE_POINTS = 4
# Checkpoints kept beyond those: a SIGTERM saves one off the schedule, which must not rotate out a scheduled one.
PREEMPTION_CHECKPOINTS_KEPT = 8
# Points of each arm's learning curve: the training loss and metrics are logged (to train/'s TensorBoard events)
# this many times over the run.
CURVE_POINTS = 20


def arm_directory(arms_dir: str, arm: Arm) -> str:
    return os.path.join(arms_dir, arm.experiment, arm.name, f"seed{arm.seed}")


def _checkpoint_interval(num_train_steps: int) -> int:
    return max(1, num_train_steps // HELD_OUT_CURVE_POINTS)


def held_out_curve_steps(num_train_steps: int) -> List[int]:
    """The steps of an arm's held-out curve: its last HELD_OUT_CURVE_POINTS scheduled checkpoints.

    Example:
    >>> held_out_curve_steps(2000), held_out_curve_steps(42)
    ([500, 1000, 1500, 2000], [20, 30, 40, 42])
    """
    save_every = _checkpoint_interval(num_train_steps)
    scheduled = sorted(set(range(save_every, num_train_steps + 1, save_every)) | {num_train_steps})
    return scheduled[-HELD_OUT_CURVE_POINTS:]


def _pretraining_options(output_dir: str, arm: Arm, budget: Budget, data: PretrainingData,
                         jit_compile) -> PretrainingOptions:
    # A loop as long as the log interval: each logged point is the mean over the steps since the previous one.
    curve_interval = max(1, budget.num_train_steps // CURVE_POINTS)
    return PretrainingOptions(
        output_dir=output_dir, input_file=data.train_patterns[arm.train_data], eval_input_file=data.eval_pattern,
        do_train=True, do_eval=True, max_seq_length=budget.max_seq_length,
        max_predictions_per_seq=budget.max_predictions_per_seq,
        train_batch_size=budget.train_batch_size, eval_batch_size=budget.eval_batch_size, optimizer="lamb",
        learning_rate=budget.learning_rate, num_train_steps=budget.num_train_steps,
        num_warmup_steps=budget.num_warmup_steps, save_checkpoints_steps=_checkpoint_interval(budget.num_train_steps),
        keep_checkpoint_max=HELD_OUT_CURVE_POINTS + PREEMPTION_CHECKPOINTS_KEPT, max_eval_steps=budget.max_eval_steps,
        log_every_steps=curve_interval, steps_per_loop=curve_interval,
        jit_compile=jit_compile, mixed_precision=budget.mixed_precision, seed=arm.seed,
        sentence_loss_weight=arm.sentence_loss_weight)


def _missing_evaluations(arm: Arm, result: Mapping[str, object]) -> List[str]:
    """The evaluations `arm` asks for that `result` does not hold yet."""
    return ([name for name, wanted in (("pure_eval", arm.evaluate_pure_sets), ("transitions", arm.measure_transitions))
             if wanted and name not in result])


def _add_evaluations(arm: Arm, options: PretrainingOptions, result: Dict[str, object], budget: Budget,
                     data: PretrainingData, finish: Optional[Callable[[], None]] = None) -> Dict[str, object]:
    """Runs, on the final checkpoint, the evaluations `arm` asks for that `result` lacks, then `finish`, and writes
    the result."""
    missing = _missing_evaluations(arm, result)
    if missing:
        lengths = dict(max_seq_length=budget.max_seq_length, max_predictions_per_seq=budget.max_predictions_per_seq)
        run = Pretraining(arm.config, options)
        if "pure_eval" in missing:
            result["pure_eval"] = {
                task: run.evaluate_latest(pretraining_dataset_fn(pattern, is_training=False, **lengths))
                for task, pattern in sorted(data.pure_eval_patterns.items())}
        if "transitions" in missing:
            run.trainer.restore()
            dataset_fn = pretraining_dataset_fn(data.eval_pattern, is_training=False, **lengths)
            batches = list(dataset_fn(None, budget.eval_batch_size, 0).take(TRANSITION_BATCHES))
            result["transitions"] = block_transitions(run.model.encoder, batches)
            if arm.config.share_type == "all":
                deeper = deeper_shared_encoder(run.model.encoder, 2 * arm.config.num_hidden_layers, batches[0])
                result["transitions_twice_as_deep"] = block_transitions(deeper, batches)
    if missing or not os.path.exists(os.path.join(options.output_dir, ARM_RESULT_NAME)):
        if finish is not None:
            finish_started = time.time()
            finish()
            result.setdefault("record", {})["finish_seconds"] = round(time.time() - finish_started, 1)
        write_json(os.path.join(options.output_dir, ARM_RESULT_NAME), result)
    return result


def trained_by() -> Dict[str, Optional[str]]:
    """What trains in this process: the step code's fingerprint (albert_tf's layers, models and training packages:
    compile_choice.step_code_fingerprint), the git commit of this checkout (None outside one) and the CPU."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(["git", "-C", package_dir, "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"step_code": step_code_fingerprint(), "commit": commit, "cpu": cpu_model_name()}


def check_step_code(finished: Mapping[str, Mapping[str, object]], arms_dir: str) -> None:
    """Fails when a finished training in `finished` ({key: result}) was trained by other step code than this
    process runs: a run that trains more arms must train them all with one code.

    Example:
    >>> check_step_code({"sharing/all/seed0": {"trained_by": trained_by()}}, "out/arms")
    """
    current = step_code_fingerprint()
    for key, result in sorted(finished.items()):
        recorded = result.get("trained_by") or {}
        if recorded.get("step_code") != current:
            raise ValueError(
                f"{arms_dir} holds training {key} by step code {recorded.get('step_code')} (commit "
                f"{recorded.get('commit')}), not this checkout's {current}; train the rest from a checkout of that "
                "commit (git worktree add --detach DIR COMMIT) or give another --output_dir.")


TRAINING_SETTINGS_NAME = "training_settings.json"
# What shapes a training's trajectory besides its model, records and seed (Arm.training): the same for every step.
_TRAINING_SETTINGS = ("learning_rate", "num_train_steps", "num_warmup_steps", "train_batch_size", "max_seq_length",
                      "max_predictions_per_seq", "mixed_precision", "optimizer")


def check_training_settings(output_dir: str, options: PretrainingOptions) -> None:
    """Records in `output_dir` the settings a training starts with, or, resuming, checks that they are the same: a
    checkpoint trained at one learning rate must not be resumed at another (a rerun whose learning-rate choice
    changed, say), which would mix two trainings in one result.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> options = PretrainingOptions(output_dir=directory, learning_rate=0.005)
    >>> check_training_settings(directory, options)
    >>> check_training_settings(directory, dataclasses.replace(options, learning_rate=0.01))
    Traceback (most recent call last):
    ...
    ValueError: .../training_settings.json records a training with learning_rate=0.005, and this run asks for ...
    """
    settings = {name: getattr(options, name) for name in _TRAINING_SETTINGS}
    path = os.path.join(output_dir, TRAINING_SETTINGS_NAME)
    if not os.path.exists(path):
        os.makedirs(output_dir, exist_ok=True)
        write_json(path, settings)
        return
    recorded = read_json(path)
    for name, value in settings.items():
        if recorded.get(name) != value:
            raise ValueError(f"{path} records a training with {name}={recorded.get(name)}, and this run asks for "
                             f"{value}; delete {output_dir} to train it again with the new settings, or rerun with "
                             "the old ones.")


def run_arm(arm: Arm, output_dir: str, budget: Budget, data: PretrainingData, jit_compile="auto",
            finish: Optional[Callable[[], None]] = None) -> Dict[str, object]:
    """Trains (or resumes) and evaluates one arm, runs `finish` (what else needs its checkpoints), writes its
    arm_result.json and returns it; SIGTERM during the training raises stopping.ReproductionStopped once its
    checkpoint is saved (or, under stopping.stop_on_sigterm, once it has finished, when the signal came during its
    last loop or its evaluation)."""
    options = _pretraining_options(output_dir, arm, budget, data, jit_compile)
    check_training_settings(output_dir, options)
    lengths = dict(max_seq_length=budget.max_seq_length, max_predictions_per_seq=budget.max_predictions_per_seq)
    with stopped_during(f"training {arm.key}"):
        run = Pretraining(arm.config, options)
        with sitting(output_dir, lambda: _trained_steps(output_dir), lambda: run.trainer.jit_compile_choice):
            train = run.train(pretraining_dataset_fn(options.input_file, is_training=True, seed=options.seed,
                                                     **lengths), source=options.input_file)
        evaluation_started = time.time()
        evaluation = run.evaluate_checkpoints(pretraining_dataset_fn(options.eval_input_file, is_training=False,
                                                                     **lengths))
    record = {**training_record(read_sittings(output_dir)),
              "evaluation_seconds": round(time.time() - evaluation_started, 1)}
    result = {"arm": arm.name, "seed": arm.seed, "parameters": encoder_parameters(arm.config),
              "eval": evaluation, "train": train, "trained_by": trained_by(), "record": record,
              "training_curve": training_curve(output_dir)}
    # What run_pretraining's evaluation of every kept checkpoint wrote for TensorBoard (a rerun's last value), at
    # the scheduled steps only: a checkpoint that a SIGTERM saved in between is evaluated too, and left out here,
    # so that every arm's curve has the same steps.
    eval_dir = os.path.join(output_dir, "eval")
    curves = {key: read_scalars(eval_dir, key) for key in CURVE_METRICS}
    steps = held_out_curve_steps(budget.num_train_steps)
    missing = [step for step in steps if step not in curves[CURVE_METRICS[0]]]
    if missing:
        raise ValueError(f"The held-out curve of {arm.key} in {eval_dir} has no evaluation at step(s) {missing}; "
                         f"delete {output_dir} and rerun to train the arm again.")
    result["curve"] = {"step": steps, **{key: [values[step] for step in steps] for key, values in curves.items()}}
    return _add_evaluations(arm, options, result, budget, data, finish)


def _eta_text(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def trainings(arms: Sequence[Arm]) -> List[List[Arm]]:
    """The arms grouped by `Arm.training`, each group in the arms' order, the groups in the order of their first arm.

    Example:
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    ...                       intermediate_size=64)
    >>> arms = [Arm("a", "x", 0, config), Arm("b", "y", 0, config), Arm("b", "z", 0, config, train_data="nsp")]
    >>> [[arm.key for arm in group] for group in trainings(arms)]
    [['a/x/seed0', 'b/y/seed0'], ['b/z/seed0']]
    """
    groups: Dict[str, List[Arm]] = {}
    for arm in arms:
        groups.setdefault(arm.training, []).append(arm)
    return list(groups.values())


def _trained_steps(directory: str) -> int:
    """The step of the checkpoint the directory's training resumes from (the Trainer's ckpt-STEP; 0 when none)."""
    path = tf.train.latest_checkpoint(directory) if os.path.isdir(directory) else None
    return int(path.rsplit("-", 1)[1]) if path else 0


def training_arm(group: Sequence[Arm], arms_dir: str) -> Arm:
    """The arm of `group` whose directory holds (or will hold) the group's training: the first whose directory has
    a finished result, else the first with a checkpoint, else the first; it asks for every evaluation any arm of
    the group asks for."""
    finished = [arm for arm in group if os.path.exists(os.path.join(arm_directory(arms_dir, arm), ARM_RESULT_NAME))]
    started = [arm for arm in group if _trained_steps(arm_directory(arms_dir, arm))]
    owner = (finished or started or list(group))[0]
    return dataclasses.replace(owner, evaluate_pure_sets=any(arm.evaluate_pure_sets for arm in group),
                               measure_transitions=any(arm.measure_transitions for arm in group))


def training_order(arm: Arm):
    """Where `arm`'s training comes in a run: seed by seed (a block of every arm with one seed), and inside a block
    in an order shuffled by the seed, so that a change of machine or of load during a run that spans sittings
    falls on different arms in different seeds rather than always on the same arm.

    Example:
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    ...                       intermediate_size=64)
    >>> arms = [Arm("sharing", name, seed, config) for seed in (1, 0) for name in ("none", "attention", "all")]
    >>> [arm.name + str(arm.seed) for arm in sorted(arms, key=training_order)]
    ['all0', 'none0', 'attention0', 'all1', 'none1', 'attention1']
    """
    return arm.seed, hashlib.sha256(f"{arm.seed}/{arm.experiment}/{arm.name}".encode("utf-8")).hexdigest()


def _finisher(finish_training: Optional[Callable[[Sequence[Arm], str], None]], group: Sequence[Arm],
              directory: str) -> Optional[Callable[[], None]]:
    return None if finish_training is None else lambda: finish_training(group, directory)


def run_arms(arms: Sequence[Arm], arms_dir: str, budget: Budget, data: PretrainingData, jit_compile="auto",
             finish_training: Optional[Callable[[Sequence[Arm], str], None]] = None) -> Dict[str, Dict[str, object]]:
    """Runs every training the arms need that is not finished, in order, and returns {arm.key: its result} for
    every arm, each with its `directory` (where its training and curves are), `trained_as` (the key of the arm
    that directory belongs to: the arm's own unless it reuses another's training) and its model `config` added.

    `finish_training(group, directory)`, given, runs for each training's arms once it is trained and evaluated,
    before its arm_result.json is written: the work that needs its checkpoints."""
    keys = [arm.key for arm in arms]
    if len(set(keys)) != len(keys):
        raise ValueError(f"Two arms share a key: {sorted(key for key in keys if keys.count(key) > 1)}.")
    groups = [(group, training_arm(group, arms_dir)) for group in trainings(arms)]
    results: Dict[str, Dict[str, object]] = {}
    pending = []
    for group, owner in groups:
        path = os.path.join(arm_directory(arms_dir, owner), ARM_RESULT_NAME)
        if os.path.exists(path):
            results[owner.key] = read_json(path)
            missing = _missing_evaluations(owner, results[owner.key])
            if missing:
                directory = arm_directory(arms_dir, owner)
                if tf.train.latest_checkpoint(directory) is None:
                    raise ValueError(f"Training {owner.key} in {directory} is finished but lacks {', '.join(missing)} "
                                     f"and has no checkpoint to measure it on; delete its {ARM_RESULT_NAME} and rerun "
                                     "to train it again.")
                logging.info("Training %s: finished; adding %s for the arms that reuse it", owner.key,
                             ", ".join(missing))
                options = _pretraining_options(directory, owner, budget, data, jit_compile)
                results[owner.key] = _add_evaluations(owner, options, results[owner.key], budget, data,
                                                      _finisher(finish_training, group, directory))
        else:
            pending.append((group, owner))
    if pending:
        check_step_code(results, arms_dir)
    pending.sort(key=lambda item: training_order(item[1]))
    logging.info("Arms: %d, in %d trainings (%d arms reuse another arm's training); trainings: %d finished and "
                 "kept, %d to run", len(arms), len(groups), len(arms) - len(groups), len(groups) - len(pending),
                 len(pending))
    remaining_steps = sum(budget.num_train_steps - _trained_steps(arm_directory(arms_dir, arm)) for _, arm in pending)
    started, trained_steps = time.time(), 0
    for index, (group, owner) in enumerate(pending):
        directory = arm_directory(arms_dir, owner)
        logging.info("Training %s (%d of %d to run; %d steps to go in all)", owner.key, index + 1, len(pending),
                     remaining_steps)
        steps_before = _trained_steps(directory)
        results[owner.key] = run_arm(owner, directory, budget, data, jit_compile,
                                     _finisher(finish_training, group, directory))
        trained_steps += budget.num_train_steps - steps_before
        remaining_steps -= budget.num_train_steps - steps_before
        eta = (time.time() - started) / max(1, trained_steps) * remaining_steps
        logging.info("Trainings done: %d of %d; remaining %d (%d steps), ETA %s",
                     len(groups) - len(pending) + index + 1, len(groups), len(pending) - index - 1, remaining_steps,
                     _eta_text(eta))
    combined = {}
    for group, owner in groups:
        for arm in group:
            combined[arm.key] = {**results[owner.key], "directory": arm_directory(arms_dir, owner),
                                 "trained_as": owner.key, "config": arm.config.to_dict()}
    return combined
