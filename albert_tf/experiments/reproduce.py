"""One reproduction run: prepare the data, run (or keep) every arm of the chosen experiments, write the report.

Usage (it trains for minutes, so it is not run here):

    from albert_tf.experiments.reproduce import ReproduceOptions, run_reproduction

    paths = run_reproduction(ReproduceOptions(output_dir="paper_smoke", experiments=["sharing"], budget="smoke"))
    print(open(paths["report"]).read())

Rerunning the same call keeps the finished arms, resumes a half-trained one from its last checkpoint, and only
then writes the report. The finished arms are kept by their arm_result.json files alone (with run.json, the data's
data_record.json, the learning-rate trials' and speed records): copied into a new output directory on another
machine, they rerun the report without training, once the data has been written again and matches its record.
"""

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Sequence

from absl import logging

from albert_tf.config import PRESETS
from albert_tf.experiments import dropout, embedding_size, layer_transitions, sharing, sop_vs_nsp, speed
from albert_tf.experiments.budgets import Budget, budget_for
from albert_tf.experiments.downstream import (check_glue_data_dir, downstream_baselines, downstream_dev_sizes,
                                              run_downstream)
from albert_tf.experiments.atomic_json import read_json, write_json
from albert_tf.experiments.learning_rate import choose_learning_rate, learning_rate_section
from albert_tf.experiments.pretraining_data import PretrainingData, prepare_pretraining_data
from albert_tf.experiments.arms import Arm
from albert_tf.experiments.report_inputs import record_report_inputs
from albert_tf.experiments.runner import run_arms
from albert_tf.experiments.stopping import stop_on_sigterm, stopped_during
from albert_tf.experiments.write_report import write_report_in_child
from data_gen.pretraining.input_pipeline import masked_lm_majority_baseline, sentence_order_majority_baseline

# The experiments that train arms: name -> the arms of a budget's model (their sections are written from the kept
# records, albert_tf.experiments.kept_records).
EXPERIMENTS = {sharing.NAME: sharing.sharing_arms, sop_vs_nsp.NAME: sop_vs_nsp.sop_vs_nsp_arms,
               layer_transitions.NAME: layer_transitions.layer_transitions_arms,
               embedding_size.NAME: embedding_size.embedding_size_arms, dropout.NAME: dropout.dropout_arms}
# The experiments that measure without training: name -> measure(budget's SpeedBudget, its directory, jit_compile),
# which keeps what an earlier run measured there.
MEASUREMENTS = {speed.NAME: speed.measure_speed}
EXPERIMENT_NAMES = (*EXPERIMENTS, *MEASUREMENTS)


@dataclasses.dataclass
class ReproduceOptions:
    """What to run and where (run_scripts.reproduce_paper's flags); `experiments` may hold "all"."""

    output_dir: str
    experiments: Sequence[str] = ("all",)
    budget: str = "smoke"
    corpus: Optional[Sequence[str]] = None
    include_site_packages: bool = False
    seeds: Sequence[int] = (0,)
    jit_compile: object = "auto"
    # A local GLUE copy (the original layout): the downstream score adds SST-2 and MNLI dev.
    glue_data_dir: Optional[str] = None
    # Only the arms of these names (e.g. a gate's "none" and "all"), every experiment's; none: every arm.
    arms: Optional[Sequence[str]] = None


RUN_IDENTITY_NAME = "run.json"


def check_run_identity(output_dir: str, options: ReproduceOptions) -> None:
    """Records in `output_dir`/run.json what its data and arms come from (the budget and the corpus), or checks
    that a rerun asks for the same: a rerun keeps every finished arm and the data, so a run with another budget or
    corpus there would silently report the first one's. Seeds, experiments and --glue_data_dir may change.

    Example:
    >>> import tempfile
    >>> output_dir = tempfile.mkdtemp()
    >>> check_run_identity(output_dir, ReproduceOptions(output_dir, budget="smoke"))
    >>> check_run_identity(output_dir, ReproduceOptions(output_dir, budget="smoke", seeds=(0, 1)))
    """
    identity = {"budget": options.budget,
                "corpus": sorted(os.path.abspath(path) for path in options.corpus) if options.corpus else None,
                "include_site_packages": bool(options.include_site_packages) and not options.corpus}
    path = os.path.join(output_dir, RUN_IDENTITY_NAME)
    if os.path.exists(path):
        recorded = read_json(path)
        if recorded != identity:
            raise ValueError(f"--output_dir={output_dir} holds a run of {_identity_text(recorded)} ({path}), not "
                             f"of {_identity_text(identity)}; rerun with those flags or give another --output_dir.")
        return
    os.makedirs(output_dir, exist_ok=True)
    write_json(path, identity)


def _identity_text(identity: Mapping[str, object]) -> str:
    corpus = (f"--corpus={','.join(identity['corpus'])}" if identity.get("corpus") else
              "the built-in corpus" + (" with --include_site_packages" if identity.get("include_site_packages")
                                       else ""))
    return f"--budget={identity.get('budget')} on {corpus}"


def experiment_names(requested: Sequence[str]) -> List[str]:
    """The experiments to run, in a fixed order; "all" means every one built. Unknown names are an error."""
    unknown = sorted(set(requested) - set(EXPERIMENT_NAMES) - {"all"})
    if unknown or not requested:
        raise ValueError(f"--experiment={','.join(requested)}: {', '.join(unknown) or 'nothing'} is not available; "
                         f"available: {', '.join(EXPERIMENT_NAMES)}, all.")
    return [name for name in EXPERIMENT_NAMES if "all" in requested or name in requested]


def _experiment_arms(name: str, budget: Budget, seeds: Sequence[int]) -> List[Arm]:
    """The arms of experiment `name` at `budget`: the sharing experiment's grouped arms only where the budget
    asks for them."""
    if name == sharing.NAME:
        return sharing.sharing_arms(budget.model, budget.vocab_size, seeds, grouped=budget.grouped_sharing)
    return EXPERIMENTS[name](budget.model, budget.vocab_size, seeds)


def _scale_text(budget, seeds: Sequence[int], corpus: str) -> str:
    model = budget.model
    tokens = budget.num_train_steps * budget.train_batch_size * budget.max_seq_length
    finetuning = (f"{budget.finetune_epochs:g} fine-tuning epochs" if budget.finetune_epochs
                  else f"{budget.finetune_steps} fine-tuning steps")
    if budget.downstream_task == "packages":
        task = (f"the held-out package classification: which of {budget.downstream_packages} Python packages (those "
                "with the most held-out text, each cut to "
                f"{budget.downstream_sentences_per_package} sentences) a sentence of a docstring comes from, whole "
                "docstrings split between dev and train; no arm pretrained on them, and neither the masked LM nor "
                "SOP ever names a package" + ("; beside it, a linear probe on the frozen encoder's mean token "
                                              "features for the same task" if budget.linear_probe else ""))
    else:
        task = (f"the held-out document classification: which of {budget.downstream_documents} held-out documents "
                "(the largest, cut to equal length) a sentence comes from, every third sentence of each held out for "
                "dev; no arm pretrained on those documents, and neither the masked LM nor SOP ever names a document")
    return (f"budget `{budget.name}`: {model['num_hidden_layers']} layers, H={model['hidden_size']}, "
            f"E={model['embedding_size']}, vocabulary {budget.vocab_size}; {budget.num_train_steps} LAMB steps of "
            f"{budget.train_batch_size} x {budget.max_seq_length} tokens at {budget.learning_rate:g}, "
            f"{budget.mixed_precision} (about {tokens:,} tokens seen, the paper's "
            f"ALBERT-base saw 125k x 4096 x 512); {len(seeds)} seed(s); corpus: {corpus}. The paper's figures are "
            "downstream scores of ALBERT-base; ours are held-out pretraining accuracies and, where an experiment "
            f"fine-tunes its arms, the dev accuracy after {finetuning} of {budget.finetune_batch_size} on {task}.")


def _limits_text(budget: Budget) -> str:
    """What the budget's scale can and cannot show about the paper's claims, for the report's head."""
    model, base = budget.model, PRESETS["albert-base"]
    paper_scale = budget.num_train_steps * budget.train_batch_size >= 125000 * 4096
    scale = ("The model, the data's size and the steps are the paper's; the downstream tasks are not." if paper_scale
             else "Ours come from a model a fraction of ALBERT-base's size "
                  f"({model['num_hidden_layers']} of its {base['num_hidden_layers']} layers, H={model['hidden_size']} "
                  f"of its {base['hidden_size']}, {model['num_attention_heads']} of its "
                  f"{base['num_attention_heads']} heads), trained for a small fraction of its 125k steps of "
                  "4,096 x 512 tokens.")
    if budget.downstream_task == "packages":
        task = (f"a {budget.downstream_packages}-way classification of held-out sentences"
                + (" with a linear probe beside it" if budget.linear_probe else ""))
    else:
        task = "one small classification task"
    depth = ""
    if not paper_scale and model["num_hidden_layers"] == base["num_hidden_layers"]:
        depth = ("At the paper's depth, sharing removes nearly the share of the parameters it removes from "
                 "ALBERT-base (the sharing table's parameter columns), so which half of a block can be shared is "
                 "asked as the paper asks it, at this width and this many tokens per parameter; whether the answer "
                 "carries to ALBERT-base's width is beyond this run. ")
    return (f"The paper's figures are downstream averages over GLUE, SQuAD and RACE. {scale} Our numbers are held-out "
            f"pretraining accuracies and {task} (and two GLUE tasks with --glue_data_dir). {depth}Most of the "
            "paper's gaps are about a point of downstream average, and such a gap need not show in these numbers: "
            "'inside the noise' says this run could not resolve a difference, not that the paper's claim is false, "
            "and 'holds' says its direction appears here, not its size. The claims about the largest models (dropout "
            "on ALBERT-xxlarge after 1M steps) and about training on TPUs at batch 4,096 (Table 2's speedups) are "
            "beyond this run; their sections say what was measured instead.")


def _majority_baselines(data: PretrainingData, budget: Budget) -> Dict[str, float]:
    """What always answering the most frequent class scores on each held-out set: the floor a run must beat."""
    shapes = dict(max_seq_length=budget.max_seq_length, max_predictions_per_seq=budget.max_predictions_per_seq)
    return {
        "masked_lm": masked_lm_majority_baseline(data.train_patterns["sop"], data.eval_pattern, **shapes)["accuracy"],
        "sentence_order": sentence_order_majority_baseline(data.eval_pattern, **shapes)["accuracy"],
        # The MLM accuracy of sop_vs_nsp is on the pure SOP set's masked positions.
        "masked_lm_pure": masked_lm_majority_baseline(data.train_patterns["sop"], data.pure_eval_patterns["sop"],
                                                      **shapes)["accuracy"],
        **{f"{task}_pure": sentence_order_majority_baseline(pattern, **shapes)["accuracy"]
           for task, pattern in data.pure_eval_patterns.items()}}


def run_reproduction(options: ReproduceOptions) -> Dict[str, str]:
    """Runs the experiments of `options` under options.output_dir; returns the report's and results' paths.

    SIGTERM stops it with stopping.ReproductionStopped, which names what it was doing; the same call resumes."""
    with stop_on_sigterm("the reproduction run, between its trainings"):
        return _run_reproduction(options)


def _run_reproduction(options: ReproduceOptions) -> Dict[str, str]:
    names = experiment_names(options.experiments)
    budget = budget_for(options.budget)
    if not options.seeds or len(set(options.seeds)) != len(options.seeds):
        raise ValueError(f"--seeds={','.join(map(str, options.seeds))}: give one or more distinct seeds.")
    check_glue_data_dir(options.glue_data_dir)
    output_dir = os.path.abspath(options.output_dir)
    arms = [arm for name in names if name in EXPERIMENTS for arm in _experiment_arms(name, budget, options.seeds)
            if not options.arms or arm.name in options.arms]
    if options.arms and not arms:
        raise ValueError(f"--arms={','.join(options.arms)} names no arm of --experiment="
                         f"{','.join(options.experiments)} at --budget={options.budget}.")
    check_run_identity(output_dir, options)
    results, baselines, learning_rate_choice, dev_sizes = {}, {}, {}, {}
    # Only the experiments that train need the data; speed alone needs no corpus.
    if arms:
        with stopped_during("the data preparation"):
            data = prepare_pretraining_data(os.path.join(output_dir, "data"), budget, options.corpus,
                                            options.include_site_packages)
        budget, learning_rate_choice = choose_learning_rate(budget, output_dir, data, options.seeds[0],
                                                            options.jit_compile)

        def fine_tune(group: Sequence[Arm], directory: str) -> None:
            # Before the training's arm_result.json: fine-tuning needs its checkpoints, which a rerun on another
            # machine, from the kept results alone, does not have.
            downstream_arms = [arm for arm in group if arm.downstream]
            if downstream_arms:
                run_downstream(downstream_arms, {arm.key: directory for arm in downstream_arms}, budget, data,
                               options.glue_data_dir, options.jit_compile)

        results = run_arms(arms, os.path.join(output_dir, "arms"), budget, data, options.jit_compile, fine_tune)
        baselines = _majority_baselines(data, budget)
        downstream_arms = [arm for arm in arms if arm.downstream]
        if downstream_arms:
            directories = {arm.key: results[arm.key]["directory"] for arm in downstream_arms}
            for key, scores in run_downstream(downstream_arms, directories, budget, data, options.glue_data_dir,
                                              options.jit_compile).items():
                results[key]["downstream"] = scores
            baselines.update(downstream_baselines(data, budget, options.glue_data_dir))
            dev_sizes = downstream_dev_sizes(data, budget, options.glue_data_dir)
    for name in names:
        if name in MEASUREMENTS:
            with stopped_during(f"the {name} measurements"):
                MEASUREMENTS[name](budget.speed, os.path.join(output_dir, name), options.jit_compile)
    corpus = ", ".join(options.corpus) if options.corpus else "the built-in docstring corpus"
    with stopped_during("the writing of the report"):
        record_report_inputs(output_dir, budget, names, results, baselines,
                             _scale_text(budget, options.seeds, corpus), _limits_text(budget),
                             learning_rate_section(learning_rate_choice) if learning_rate_choice else None,
                             dev_sizes)
        paths = write_report_in_child(output_dir)
    logging.info("Report: %s", paths["report"])
    return paths
