"""Flags shared by every t2t-* tool: --registry_help, --t2t_usr_dir, and errors that name the flag."""

import pytest
from absl import flags as absl_flags

from t2t_lite.cli import flags


@pytest.fixture
def parse():
    def parse_args(*argv):
        absl_flags.FLAGS.unparse_flags()
        absl_flags.FLAGS(["t2t-tool", *argv])

    yield parse_args
    absl_flags.FLAGS.unparse_flags()


def test_registry_help_prints_everything_and_exits(parse, capsys):
    parse("--registry_help")
    with pytest.raises(SystemExit) as exit_info:
        flags.prepare()
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert "transformer_base" in printed and "transformer_parsing" in printed and "Models:" in printed


def test_usr_dir_registers_a_set_usable_by_hparams_set(parse, tmp_path):
    package = tmp_path / "cli_usr"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from t2t_lite import registry\n"
        "from t2t_lite.hparams.transformer import transformer_tiny\n"
        "@registry.register_hparams\n"
        "def cli_usr_tiny():\n"
        "    return transformer_tiny().replace(num_heads=2)\n"
    )
    parse(f"--t2t_usr_dir={package}", "--hparams_set=cli_usr_tiny", "--hparams=hidden_size=64")
    flags.prepare()
    hp = flags.hparams_from_flags()
    assert (hp.num_heads, hp.hidden_size) == (2, 64)


def test_a_usr_dir_that_raises_on_import_is_a_usage_error_naming_it(parse, tmp_path):
    package = tmp_path / "cli_usr_raises"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('set CORPUS first')\n")
    parse(f"--t2t_usr_dir={package}")
    with pytest.raises(flags.UsageError) as error:
        flags.prepare()
    assert str(error.value) == (
        f"--t2t_usr_dir={package}: importing cli_usr_raises raised RuntimeError: set CORPUS first "
        f"({package / '__init__.py'}:1)"
    )


def test_bad_values_name_the_flag(parse, tmp_path):
    parse("--hparams_set=transformer_bsae")
    with pytest.raises(flags.UsageError, match="--hparams_set: .*'transformer_base'"):
        flags.hparams_from_flags()
    parse("--hparams_set=transformer_base", "--hparams=num_heads=lots")
    with pytest.raises(flags.UsageError, match="--hparams: .*num_heads"):
        flags.hparams_from_flags()
    parse(f"--t2t_usr_dir={tmp_path / 'nowhere'}")
    with pytest.raises(flags.UsageError, match="--t2t_usr_dir"):
        flags.prepare()
    parse()
    with pytest.raises(flags.UsageError, match="--problem, --data_dir"):
        flags.require("problem", "data_dir")


def test_a_precision_slower_than_float32_here_is_said_once_before_decoding(parse, capsys, monkeypatch):
    """quantize=int8 without xla=true is slower than float32 on any CPU: the decoding tools say so, once."""
    from t2t_lite import registry

    problem, hparams = registry.problem("algorithmic_reverse"), registry.hparams("transformer_tiny")
    parse("--decode_hparams=quantize=int8")
    assert flags.decode_settings(hparams, problem).quantize == "int8"
    printed = capsys.readouterr().err
    assert printed.count("Note: quantize=int8 pays only with xla=true") == 1, printed
    parse("--decode_hparams=quantize=int8,xla=true")
    monkeypatch.setattr("t2t_lite.cpu_features.int8_dot_units", lambda cpuinfo="/proc/cpuinfo": True)
    flags.decode_settings(hparams, problem)
    assert capsys.readouterr().err == ""  # a CPU with VNNI or AMX: int8 pays, nothing to say
