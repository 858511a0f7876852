"""Flags of the original scripts that albert-tf has no use for: they parse, and setting one stops the run
with a sentence naming what replaces it (absl alone would only say "Unknown command line flag").

Command lines copied from google-research/albert's README, run.sh and run_glue.sh carry the TPUEstimator
flags and a few per-script ones. A boolean original flag may still be given as false (`--nouse_tpu`),
which asks for nothing.
"""

from typing import Mapping, Optional

from absl import flags

TPU_FLAGS = {
    "use_tpu": "pass --strategy=tpu (with --tpu)",
    "tpu_name": "pass --tpu=NAME with --strategy=tpu",
    "tpu_zone": "pass --tpu=NAME with --strategy=tpu; the TPU resolver finds its zone",
    "gcp_project": "pass --tpu=NAME with --strategy=tpu; the TPU resolver finds its project",
    "master": "pass --tpu=grpc://ADDRESS with --strategy=tpu",
    "num_tpu_cores": "--strategy=tpu uses every core of the TPU",
    "iterations_per_loop": "pass --steps_per_loop",
}
_BOOLEAN_FLAGS = ("use_tpu", "use_einsum")
CACHED_FEATURES = "features are cached under --cached_dir (default --output_dir), keyed by their content"
NO_EINSUM_CHOICE = "nothing to pass: einsum is always used"


def define_original_flags(script_flags: Optional[Mapping[str, str]] = None, tpu: bool = True,
                          flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines `script_flags` ({name: what to do instead}) and, with `tpu`, TPU_FLAGS as refused flags.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> define_original_flags({"use_einsum": "nothing to pass: einsum is always used"}, flag_values=flag_values)
    >>> flag_values(["script", "--nouse_einsum"])[0]
    'script'
    >>> flag_values(["script", "--iterations_per_loop=1000"])
    Traceback (most recent call last):
    ...
    absl.flags._exceptions.IllegalFlagValueError: flag --iterations_per_loop=1000: ... pass --steps_per_loop.
    """
    for name, instead in {**(TPU_FLAGS if tpu else {}), **(script_flags or {})}.items():
        message = f"--{name} is a flag of the original scripts that albert-tf does not have: {instead}."
        if name in _BOOLEAN_FLAGS:
            flags.DEFINE_bool(name, None, f"Not used here: {instead}.", flag_values=flag_values)
            flags.register_validator(name, lambda value: not value, message=message, flag_values=flag_values)
        else:
            flags.DEFINE_string(name, None, f"Not used here: {instead}.", flag_values=flag_values)
            flags.register_validator(name, lambda value: value is None, message=message, flag_values=flag_values)
