"""absl flags that run_pretraining, the fine-tuning scripts and the benchmark share, defined in one place.

A script calls the `define_*` functions at import, then reads the values as usual; the models'
`recompute_blocks` setting comes from `recompute_blocks_from_flags()`.
"""

import sys
from typing import Union

from absl import flags

from albert_tf.layers.recomputation import recompute_setting
from albert_tf.training.compile_choice import JIT_COMPILE_WORDS, time_paths_in_child_process
from albert_tf.training.distribution import STRATEGY_NAMES
from albert_tf.training.training_settings import MIXED_PRECISION_POLICIES, TrainingSettings
from run_scripts.option_flags import define_option_flags

# The flags belong to the script that defines them (its --help lists them), not to this module.
flags.disclaim_key_flags()


def define_jit_compile_flag(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--jit_compile=auto (the default), true or false; --jit_compile and --nojit_compile force a path.

    The value is the word given, lower-cased ("auto", "true", "no", ...); the library reads it with
    albert_tf.training.compile_choice.parse_jit_compile.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> define_jit_compile_flag(flag_values)
    >>> _ = flag_values(["script", "--nojit_compile"])
    >>> flag_values.jit_compile
    'false'
    >>> _ = flag_values(["script", "--jit_compile=Auto"])
    >>> flag_values.jit_compile
    'auto'
    """
    # A boolean flag (`boolean=True`) takes --jit_compile and --nojit_compile without a value, as before.
    flags.DEFINE_flag(flags.Flag(
        flags.EnumParser(JIT_COMPILE_WORDS, case_sensitive=False), flags.ArgumentSerializer(), "jit_compile",
        TrainingSettings.jit_compile,
        "How the model's steps (training, evaluation, prediction) are computed: auto takes the faster of XLA "
        "and TensorFlow's own kernels for the device, the precision and the model (a rule where one is certain, "
        "else a few timed steps of each on the first batch, cached in $ALBERT_TF_CACHE_DIR or "
        "~/.cache/albert_tf); true (--jit_compile) compiles with XLA; false (--nojit_compile) runs "
        "TensorFlow's kernels.", boolean=True), flag_values=flag_values)


def define_compute_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """How a step is computed: XLA, the dtype policy, steps per call, block recomputation.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> define_compute_flags(flag_values)
    >>> _ = flag_values(["script", "--num_recomputed_blocks=8"])
    >>> flag_values.jit_compile, recompute_blocks_from_flags(flag_values)
    ('auto', 8)
    """
    define_jit_compile_flag(flag_values)
    define_option_flags(TrainingSettings, {
        "mixed_precision": "Keras dtype policy.",
        "steps_per_loop": "Training steps per tf.function call (use more on TPUs).",
    }, choices={"mixed_precision": MIXED_PRECISION_POLICIES}, flag_values=flag_values)
    flags.DEFINE_bool("recompute_blocks", False, "Re-run each transformer block in the backward pass instead of "
                      "storing its activations: less memory, about a third more compute.", flag_values=flag_values)
    flags.DEFINE_integer("num_recomputed_blocks", 0, "Recompute only the first N applied blocks (with or without "
                         "--recompute_blocks): each saves about its activations for a ninth of its compute; 0 "
                         "recomputes all of them with --recompute_blocks.", flag_values=flag_values)


def define_distribution_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Where and how reproducibly a run trains: the tf.distribute strategy, its TPU, the seed, determinism."""
    define_option_flags(TrainingSettings, {
        "strategy": "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.",
        "tpu": "Cloud TPU name or grpc:// address for --strategy=tpu.",
        "seed": "Seed for initialisation, dropout and data order.",
        "deterministic": "Make TensorFlow ops deterministic (slower; exact resumes).",
    }, choices={"strategy": STRATEGY_NAMES}, flag_values=flag_values)


def recompute_blocks_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> Union[bool, int]:
    """The models' `recompute_blocks` from --recompute_blocks and --num_recomputed_blocks."""
    return recompute_setting(flag_values.recompute_blocks, flag_values.num_recomputed_blocks)


def time_compile_paths_in_child_process(module_name: str) -> None:
    """Has `--jit_compile=auto`'s trial of both paths run this script (`module_name`) again, with the same
    arguments, in a process of its own, so that the training process never holds both paths (for the scripts
    whose first training step is their one training's)."""
    time_paths_in_child_process([sys.executable, "-m", module_name, *sys.argv[1:]])
