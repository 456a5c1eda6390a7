"""The registry: decorators, look-ups with suggestions, --t2t_usr_dir, and --registry_help."""

import importlib.util
import os
import textwrap

import pytest

from t2t_lite import registry
from t2t_lite.hparam import HParams


def test_builtins_are_listed():
    assert {
        "transformer_base",
        "transformer_big",
        "transformer_big_enfr",
        "transformer_parsing",
        "transformer_tiny",
    } <= set(registry.list_hparams())
    assert "transformer" in registry.list_models()


def test_unknown_name_suggests_the_nearest():
    with pytest.raises(registry.RegistryError) as error:
        registry.hparams("transformer_bigg")
    assert "'transformer_big'" in str(error.value) and "--registry_help" in str(error.value)
    with pytest.raises(registry.RegistryError) as error:
        registry.model("transfomer")
    assert "'transformer'" in str(error.value)


def test_register_and_duplicate():
    @registry.register_hparams
    def test_registry_set():
        return HParams(hidden_size=64, num_heads=2)

    assert registry.hparams("test_registry_set").hidden_size == 64
    with pytest.raises(registry.RegistryError):
        registry.register_hparams(test_registry_set)


def test_class_names_become_snake_case():
    class TranslateEndeWmt32k:
        pass

    assert registry.default_name(TranslateEndeWmt32k) == "translate_ende_wmt32k"


def test_reversed_problem_is_built_with_was_reversed():
    @registry.register_problem
    class TestRegistryProblem:
        def __init__(self, was_reversed=False):
            self.was_reversed = was_reversed

    assert registry.problem("test_registry_problem").was_reversed is False
    assert registry.problem("test_registry_problem_rev").was_reversed is True


def test_usr_dir_registers_more(tmp_path):
    package = tmp_path / "my_usr"
    package.mkdir()
    (package / "__init__.py").write_text("from . import my_sets\n")
    (package / "my_sets.py").write_text(
        textwrap.dedent("""
        from t2t_lite import registry
        from t2t_lite.hparam import HParams

        @registry.register_hparams
        def my_usr_transformer():
            return HParams(hidden_size=32, num_heads=2, filter_size=64)
    """)
    )
    registry.import_usr_dir(str(package))
    assert registry.hparams("my_usr_transformer").filter_size == 64


def test_usr_dir_that_is_not_a_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="__init__.py"):
        registry.import_usr_dir(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such directory"):
        registry.import_usr_dir(str(tmp_path / "missing"))


def test_registry_help_lists_everything():
    text = registry.help_string()
    for name in ("transformer_base", "transformer_parsing", "transformer"):
        assert name in text


def _package(root, name: str, modules: dict):
    """A --t2t_usr_dir package `name` under `root` whose __init__ imports `modules` {name: source}, in order."""
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("".join(f"from . import {module}\n" for module in modules))
    for module, source in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))
    return package


def test_usr_dir_module_that_raises_is_named_with_its_line(tmp_path):
    package = _package(
        tmp_path,
        "usr_raises",
        {"fine": "X = 1\n", "broken": "import os\n\nraise ValueError('no corpus in /data\\nsecond line')\n"},
    )
    with pytest.raises(registry.UsrDirError) as error:
        registry.import_usr_dir(str(package))
    message = str(error.value)
    assert message.startswith(f"--t2t_usr_dir={package}: importing usr_raises.broken raised ValueError: ")
    assert "no corpus in /data" in message and "second line" not in message and "\n" not in message
    assert message.endswith(f"{package / 'broken.py'}:3)")


def test_usr_dir_missing_dependency_and_syntax_error_are_named(tmp_path):
    missing = _package(tmp_path, "usr_missing", {"needs": "import no_such_module_for_t2t\n"})
    with pytest.raises(registry.UsrDirError, match=r"importing usr_missing\.needs raised ModuleNotFoundError: No "):
        registry.import_usr_dir(str(missing))
    syntax = _package(tmp_path, "usr_syntax", {"typo": "x = 1\ndef f(:\n"})
    with pytest.raises(registry.UsrDirError, match=r"importing usr_syntax\.typo raised SyntaxError: .*typo\.py:2\)$"):
        registry.import_usr_dir(str(syntax))


def test_usr_dir_repeating_a_builtin_name_names_both_places(tmp_path):
    source = "from t2t_lite import registry\n\n\n@registry.register_hparams\ndef transformer_base():\n    return None\n"
    package = _package(tmp_path, "usr_repeats_builtin", {"sets": source})
    builtin_file = importlib.util.find_spec("t2t_lite.hparams.transformer").origin
    lines = open(builtin_file).read().splitlines()
    decorator = lines.index("def transformer_base() -> HParams:")  # the 1-based line of the decorator above it
    with pytest.raises(registry.UsrDirError) as error:
        registry.import_usr_dir(str(package))
    message = str(error.value)
    builtin_place = f"{os.path.relpath(builtin_file)}:{decorator}"
    assert f"Hparams set 'transformer_base' is registered twice: by {builtin_place} and by " in message
    assert message.split(" and by ")[1].startswith(f"{package / 'sets.py'}:4.")


def test_usr_dir_registering_one_name_twice_names_both_modules(tmp_path):
    problem = "from t2t_lite import registry\n\n@registry.register_problem('usr_twice_problem')\nclass {}:\n    pass\n"
    package = _package(tmp_path, "usr_twice", {"first": problem.format("First"), "second": problem.format("Second")})
    with pytest.raises(registry.UsrDirError) as error:
        registry.import_usr_dir(str(package))
    assert f"Problem 'usr_twice_problem' is registered twice: by {package / 'first.py'}:3 and by " in str(error.value)
    assert f"{package / 'second.py'}:3." in str(error.value)
