"""The tokenizer flag that every script which tokenizes text shares (fine-tuning, create_pretraining_data, the
TF-Hub export)."""

from absl import flags

from albert_tf.tokenization import DEFAULT_DIGIT_COMMA_RULE, DIGIT_COMMA_RULES

# The flag belongs to the script that defines it (its --help lists it), not to this module.
flags.disclaim_key_flags()


def define_digit_comma_rule_flag(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--digit_comma_rule: what happens to the "▁" that re-encoding a piece like "1990," adds (BUILD_NOTES)."""
    flags.DEFINE_enum(
        "digit_comma_rule", DEFAULT_DIGIT_COMMA_RULE, list(DIGIT_COMMA_RULES),
        "keep_added_marker: as the original's code, which Google's released models were trained with; "
        "drop_added_marker: as Hugging Face's tokenizer (the original's evident intent).", flag_values=flag_values)
