"""The registry: decorators, look-ups with suggestions, --t2t_usr_dir, and --registry_help."""

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
