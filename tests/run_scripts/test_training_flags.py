"""The shared training flags: --jit_compile's auto default and the spellings that force a path."""
import pytest
from absl import flags

from albert_tf.training.compile_choice import parse_jit_compile
from albert_tf.training.training_settings import TrainingSettings
from run_scripts.training_flags import define_compute_flags, define_jit_compile_flag


def _parsed(*arguments, define=define_compute_flags):
    flag_values = flags.FlagValues()
    define(flag_values)
    flag_values(["script", *arguments])
    return flag_values


@pytest.mark.parametrize("arguments, expected", [
    ((), "auto"), (("--jit_compile=auto",), "auto"), (("--jit_compile",), True), (("--nojit_compile",), False),
    (("--jit_compile=true",), True), (("--jit_compile=false",), False), (("--jit_compile=1",), True),
    (("--jit_compile=0",), False), (("--jit_compile=yes",), True), (("--jit_compile=no",), False),
    (("--jit_compile=AUTO",), "auto"), (("--nojit_compile", "--jit_compile=auto"), "auto")])
def test_jit_compile_parses_auto_and_the_boolean_spellings(arguments, expected):
    for define in (define_compute_flags, define_jit_compile_flag):
        value = _parsed(*arguments, define=define).jit_compile
        assert parse_jit_compile(value) == expected
        assert TrainingSettings(jit_compile=value).jit_compile == expected


def test_a_bad_jit_compile_value_is_named():
    with pytest.raises(flags.IllegalFlagValueError, match=r"flag --jit_compile=maybe: value should be one of "
                                                          r"<auto\|true\|t\|1\|yes\|y\|false\|f\|0\|no\|n>"):
        _parsed("--jit_compile=maybe")


def test_the_help_lists_jit_compile_as_a_negatable_flag_with_its_auto_default():
    flag_values = flags.FlagValues()
    define_compute_flags(flag_values)
    help_text = flag_values.get_help()
    assert "--[no]jit_compile" in help_text
    assert "(default: 'auto')" in help_text
