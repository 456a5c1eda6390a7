"""A tool's flags made from its settings dataclass (t2t_lite/cli/settings_flags.py): t2t-trainer's flags are
RunSettings' fields, with their defaults and help, and the values parsed are the settings the library gets."""

import dataclasses

import pytest
from absl import flags as absl_flags

from t2t_lite.cli import settings_flags
from t2t_lite.hparam import setting
from t2t_lite.train.early_stopping import EarlyStopping
from t2t_lite.train.run_settings import RunSettings


@dataclasses.dataclass(frozen=True)
class Inner:
    depth: int = setting(3, "How deep.", flag="inner_depth")


@dataclasses.dataclass(frozen=True)
class Outer:
    steps: int = setting(10, "How many.")
    rate: float = setting(0.5, "How fast.")
    loud: bool = setting(False, "Whether loud.")
    mode: str = setting("a", "Which mode.", choices=("a", "b"))
    inner: Inner = Inner()
    name: str = "given"  # no flag: given by the caller

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"--steps={self.steps}: must be at least 1.")


def parsed(argv):
    flag_values = absl_flags.FlagValues()
    settings_flags.define_flags(Outer, "a_tool", flag_values)
    flag_values(["tool", *argv])
    return flag_values


def test_each_setting_field_is_a_flag_of_its_type_and_the_flags_build_the_settings():
    flag_values = parsed(["--steps=4", "--rate=0.25", "--loud", "--mode=b", "--inner_depth=7"])
    assert settings_flags.from_flags(Outer, flag_values, name="x") == Outer(4, 0.25, True, "b", Inner(7), "x")
    assert settings_flags.from_flags(Outer, parsed([])) == Outer()
    assert flag_values["steps"].help == "How many." and "name" not in flag_values
    assert {flag.name for flag in flag_values.flags_by_module_dict()["a_tool"]} == {
        "steps",
        "rate",
        "loud",
        "mode",
        "inner_depth",
    }  # --helpfull lists them under the tool
    with pytest.raises(absl_flags.IllegalFlagValueError):
        parsed(["--mode=c"])
    with pytest.raises(ValueError, match="--steps=0: must be at least 1"):
        settings_flags.from_flags(Outer, parsed(["--steps=0"]))


def test_t2t_trainers_flags_are_run_settings_fields_with_their_defaults():
    from t2t_lite.cli import t2t_trainer  # defines its flags on absl's FLAGS

    fields = [field for field in dataclasses.fields(RunSettings) if "help" in field.metadata]
    fields += [field for field in dataclasses.fields(EarlyStopping)]
    assert {"train_steps", "local_eval_frequency", "warm_start_from"} <= {field.name for field in fields}
    for field in fields:
        flag = t2t_trainer.FLAGS[field.metadata["flag"] or field.name]
        assert flag.default == field.default and flag.help.endswith(field.metadata["help"]), field.name
