"""absl flags derived from an options dataclass, so that each option's default is stated once: in the dataclass.

A script names the fields it exposes with their help texts; the flag's type and default come from the field.
A script whose original had another default for a field (run_glue's learning rate is not run_squad's) passes it in
`defaults`, and a field with a fixed set of values passes them in `choices`.
"""

import dataclasses
import typing
from typing import Mapping, Optional, Sequence

from absl import flags

# The flags belong to the script that defines them (its --help lists them), not to this module.
flags.disclaim_key_flags()

_DEFINERS = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string}


def define_option_flags(options_class, help_by_field: Mapping[str, str], *,
                        defaults: Optional[Mapping[str, object]] = None,
                        choices: Optional[Mapping[str, Sequence[str]]] = None,
                        flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines a flag per field in `help_by_field`, of the field's type, defaulting to the field's default.

    Example:
    >>> @dataclasses.dataclass
    ... class Options:
    ...     learning_rate: float = 0.00176
    ...     optimizer: str = "lamb"
    ...     init_checkpoint: Optional[str] = None
    >>> flag_values = flags.FlagValues()
    >>> define_option_flags(Options, {"learning_rate": "Peak rate.", "optimizer": "Optimizer.",
    ...                               "init_checkpoint": "Weights."}, choices={"optimizer": ["lamb", "adamw"]},
    ...                     flag_values=flag_values)
    >>> _ = flag_values(["script", "--optimizer=adamw"])
    >>> flag_values.learning_rate, flag_values.optimizer, flag_values.init_checkpoint
    (0.00176, 'adamw', None)
    """
    fields = {field.name: field for field in dataclasses.fields(options_class)}
    types = typing.get_type_hints(options_class)
    defaults = dict(defaults or {})
    choices = dict(choices or {})
    unknown = sorted((set(help_by_field) | set(defaults) | set(choices)) - set(fields))
    if unknown:
        raise ValueError(f"{options_class.__name__} has no field {unknown[0]!r} to define a flag for.")
    for name, help_text in help_by_field.items():
        default = defaults.get(name, fields[name].default)
        if default is dataclasses.MISSING:
            raise ValueError(f"{options_class.__name__}.{name} has no default to give its flag; pass one in "
                             "`defaults`.")
        if name in choices:
            flags.DEFINE_enum(name, default, list(choices[name]), help_text, flag_values=flag_values)
        else:
            _DEFINERS[_flag_type(types[name], options_class, name)](name, default, help_text,
                                                                    flag_values=flag_values)


def _flag_type(annotation, options_class, name):
    """bool, int, float or str: the annotation itself, or the one type besides None of an Optional."""
    candidates = [candidate for candidate in typing.get_args(annotation) or (annotation,)
                  if candidate is not type(None)]
    if len(candidates) != 1 or candidates[0] not in _DEFINERS:
        raise ValueError(f"{options_class.__name__}.{name} is a {annotation}, which no single flag type holds.")
    return candidates[0]
