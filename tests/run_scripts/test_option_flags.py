"""The scripts' option flags: each default is the original script's (google-research/albert's flags) where the
original had the flag, else the options dataclass's, stated there once."""
import dataclasses
import json
import subprocess
import sys

import pytest
from absl import flags

from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.pretraining import PretrainingOptions
from albert_tf.tasks.quickstart import QuickstartOptions
from run_scripts.option_flags import define_option_flags
from tests.helpers import REPO_ROOT

_FINETUNING_ORIGINAL = dict(do_lower_case=True, do_train=False, do_eval=False, do_predict=False, train_batch_size=32,
                            eval_batch_size=8, predict_batch_size=8, optimizer="adamw", dropout_prob=0.1)
# {script: (its options dataclass, the original script's defaults of the flags albert-tf kept)}
ORIGINAL_DEFAULTS = {
    "run_pretraining": (PretrainingOptions, dict(
        max_seq_length=512, max_predictions_per_seq=20, train_batch_size=4096, eval_batch_size=64, optimizer="lamb",
        learning_rate=0.00176, poly_power=1.0, num_train_steps=125000, num_warmup_steps=3125, start_warmup_step=0,
        save_checkpoints_steps=5000, keep_checkpoint_max=5, max_eval_steps=100, init_from_group0=False,
        init_checkpoint=None, input_file=None)),
    "run_glue": (FinetuningOptions, dict(_FINETUNING_ORIGINAL, max_seq_length=512, learning_rate=5e-5,
                                         train_step=1000, warmup_step=0, save_checkpoints_steps=1000)),
    "run_classifier": (FinetuningOptions, dict(_FINETUNING_ORIGINAL, max_seq_length=128, learning_rate=5e-5,
                                               num_train_epochs=3.0, warmup_proportion=0.1)),
    "run_squad": (FinetuningOptions, dict(_FINETUNING_ORIGINAL, max_seq_length=384, learning_rate=5e-5,
                                          num_train_epochs=3.0, warmup_proportion=0.1, save_checkpoints_steps=1000)),
    "run_race": (FinetuningOptions, dict(_FINETUNING_ORIGINAL, do_train=True, do_eval=True, max_seq_length=512,
                                         learning_rate=1e-5, train_step=12000, warmup_step=1000,
                                         save_checkpoints_steps=100)),
    "run_ner": (FinetuningOptions, dict(_FINETUNING_ORIGINAL, do_train=True, do_eval=True, max_seq_length=128,
                                        learning_rate=5e-5, num_train_epochs=3.0, warmup_proportion=0.1)),
    "quickstart": (QuickstartOptions, {}),  # albert-tf's own: every default is the dataclass's
}
# A script counting epochs has no step count, the others no epoch count.
_COUNTED_BY_THE_OTHER = {"train_step": None, "num_train_epochs": None, "warmup_proportion": None}

# Imports each script in turn in one process, removing the flags the previous one defined (they share names).
_DUMP_DEFAULTS = """
import importlib, json, sys
from absl import flags
baseline, defaults = set(flags.FLAGS), {}
for script in sys.argv[1:]:
    for name in set(flags.FLAGS) - baseline:
        delattr(flags.FLAGS, name)
    importlib.import_module("run_scripts." + script)
    defaults[script] = {name: flags.FLAGS[name].default for name in set(flags.FLAGS) - baseline}
print(json.dumps(defaults))
"""


@pytest.fixture(scope="module")
def script_defaults():
    """{script: {flag: default}}, the scripts imported one after another in a process of their own."""
    completed = subprocess.run([sys.executable, "-c", _DUMP_DEFAULTS, *ORIGINAL_DEFAULTS], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script", sorted(ORIGINAL_DEFAULTS))
def test_each_option_flag_defaults_to_the_original_else_to_its_dataclass(script, script_defaults):
    options_class, original = ORIGINAL_DEFAULTS[script]
    flag_defaults = script_defaults[script]
    option_flags = [field for field in dataclasses.fields(options_class) if field.name in flag_defaults]
    assert len(option_flags) > 10
    for field in option_flags:
        if field.name in original:
            expected = original[field.name]
        elif field.name in _COUNTED_BY_THE_OTHER:
            expected = field.default if "train_step" in original else _COUNTED_BY_THE_OTHER[field.name]
        elif field.default is dataclasses.MISSING:
            expected = None
        elif field.name == "recompute_blocks":
            expected = False
        else:
            expected = field.default
        assert flag_defaults[field.name] == expected, f"--{field.name} of {script}"


def test_a_flag_for_a_field_the_options_do_not_have_is_refused():
    @dataclasses.dataclass
    class Options:
        learning_rate: float = 0.1

    with pytest.raises(ValueError, match="Options has no field 'learning_rte'"):
        define_option_flags(Options, {"learning_rte": "Typo."}, flag_values=flags.FlagValues())
