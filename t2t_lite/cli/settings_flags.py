"""A tool's flags generated from the settings dataclass they fill: each setting is written once, as a field.

A field made with `t2t_lite.hparam.setting(default, help, flag=..., choices=...)` becomes an absl
flag of its type (int, float, bool, str; `choices`: an enum), named by `flag` or the field's name;
a field holding another settings dataclass contributes that one's flags. `from_flags` builds the
settings back from the parsed flags, so the flag, the field and the value the library sees are one
definition (`t2t-trainer`'s `RunSettings`, t2t_lite/train/run_settings.py).
"""

import dataclasses
import typing

from absl import flags as absl_flags

_DEFINE = {
    int: absl_flags.DEFINE_integer,
    float: absl_flags.DEFINE_float,
    bool: absl_flags.DEFINE_bool,
    str: absl_flags.DEFINE_string,
}


def define_flags(config_class, module_name: str, flag_values=absl_flags.FLAGS) -> None:
    """Defines one flag per `setting` field of `config_class` (and of the settings it composes).

    `module_name` is the tool's module: `--helpfull` lists the flags under it, as those it defines itself.
    """
    for field, kind in _flag_fields(config_class):
        name, metadata = _flag_name(field), field.metadata
        if metadata["choices"]:
            choices = list(metadata["choices"])
            absl_flags.DEFINE_enum(name, field.default, choices, metadata["help"], flag_values, module_name=module_name)
        else:
            _DEFINE[kind](name, field.default, metadata["help"], flag_values=flag_values, module_name=module_name)


def from_flags(config_class, flag_values=absl_flags.FLAGS, **values):
    """`config_class` with each `setting` field read from its flag, and the other fields given by name in `values`.

    A ValueError of the settings' own checks names the flag (`--train_steps=0: must be at least 1.`).
    """
    changes, types = dict(values), typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        kind = types[field.name]
        if dataclasses.is_dataclass(kind):
            changes[field.name] = from_flags(kind, flag_values)
        elif "help" in field.metadata:
            changes[field.name] = flag_values[_flag_name(field)].value
    return config_class(**changes)


def _flag_fields(config_class):
    """(field, type) of every `setting` field, those of composed settings included, in their order."""
    types = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        kind = types[field.name]
        if dataclasses.is_dataclass(kind):
            yield from _flag_fields(kind)
        elif "help" in field.metadata:
            yield field, kind


def _flag_name(field) -> str:
    return field.metadata["flag"] or field.name
