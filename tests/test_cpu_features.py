"""cpu_features: bfloat16 is worth training in only where /proc/cpuinfo names bfloat16 multiply units."""

import subprocess
import sys

import pytest

from t2t_lite import cpu_features

# Abridged /proc/cpuinfo of the CPUs docs/results.md measured, and of two Arm cores.
ZEN4 = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
XEON_AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni amx_bf16 amx_tile amx_int8\n"
ZEN3 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma vaes\nbugs\t\t: sysret_ss_attrs\n"
NEOVERSE_V1 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"
NEOVERSE_N1 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\nCPU implementer\t: 0x41\n"


@pytest.mark.parametrize(
    "text, units",
    [(ZEN4, True), (XEON_AMX, True), (NEOVERSE_V1, True), (ZEN3, False), (NEOVERSE_N1, False)],
    ids=["zen4", "xeon-amx", "neoverse-v1", "zen3", "neoverse-n1"],
)
def test_bfloat16_units_are_read_from_the_flags(tmp_path, text, units):
    (tmp_path / "cpuinfo").write_text(text)
    assert cpu_features.bfloat16_units(str(tmp_path / "cpuinfo")) is units
    assert cpu_features.training_dtype(str(tmp_path / "cpuinfo")) == ("bfloat16" if units else "float32")


def test_a_flag_name_elsewhere_on_a_line_is_not_a_flag(tmp_path):
    """Only the flags/Features lines count: a model name or bug list mentioning bf16 does not."""
    (tmp_path / "cpuinfo").write_text("model name\t: bf16 avx512_bf16 lookalike\nflags\t\t: fpu avx2\n")
    assert cpu_features.bfloat16_units(str(tmp_path / "cpuinfo")) is False


def test_an_unreadable_cpuinfo_leaves_the_choice_to_the_user(tmp_path):
    missing = str(tmp_path / "no-such-file")
    assert cpu_features.bfloat16_units(missing) is None
    assert cpu_features.training_dtype(missing) == "bfloat16"
    assert cpu_features.emulation_note("bfloat16", missing) is None


def test_the_note_is_for_bfloat16_on_a_cpu_without_units_only(tmp_path):
    (tmp_path / "zen3").write_text(ZEN3)
    (tmp_path / "zen4").write_text(ZEN4)
    note = cpu_features.emulation_note("bfloat16", str(tmp_path / "zen3"))
    assert str(tmp_path / "zen3") in note and "activation_dtype=float32" in note
    assert cpu_features.emulation_note("float32", str(tmp_path / "zen3")) is None
    assert cpu_features.emulation_note("bfloat16", str(tmp_path / "zen4")) is None


def test_the_module_prints_the_faster_dtype(tmp_path):
    (tmp_path / "zen3").write_text(ZEN3)
    (tmp_path / "zen4").write_text(ZEN4)
    for name, dtype in (("zen3", "float32"), ("zen4", "bfloat16")):
        result = subprocess.run(
            [sys.executable, "-m", "t2t_lite.cpu_features", str(tmp_path / name)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout == dtype + "\n"


@pytest.mark.parametrize(
    "machine, users_choice, expected",
    [("x86_64", None, "1"), ("AMD64", None, "1"), ("x86_64", "0", "0"), ("aarch64", None, None)],
)
def test_onednn_kernels_on_x86_64_unless_the_user_chose(monkeypatch, machine, users_choice, expected):
    """TensorFlow leaves them off on x86 CPUs without VNNI, BF16 or AMX; elsewhere the variable is not ours to set."""
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: machine)
    if users_choice is None:
        monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    else:
        monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", users_choice)
    cpu_features.use_onednn_kernels()
    assert cpu_features.os.environ.get("TF_ENABLE_ONEDNN_OPTS") == expected


ZEN1 = "processor\t: 0\nmodel name\t: AMD EPYC 7571\nflags\t\t: fpu sse2 avx avx2 fma sha_ni\n"


@pytest.mark.parametrize(
    "text, units",
    [(ZEN4, True), (XEON_AMX, True), (ZEN3, False), (ZEN1, False)],
    ids=["zen4-vnni", "xeon-amx", "zen3", "zen1"],
)
def test_int8_dot_product_units_are_read_from_the_flags_on_x86(tmp_path, monkeypatch, text, units):
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "x86_64")
    (tmp_path / "cpuinfo").write_text(text)
    assert cpu_features.int8_dot_units(str(tmp_path / "cpuinfo")) is units


def test_int8_units_are_not_judged_off_x86(tmp_path, monkeypatch):
    """The int8 figures were measured on x86: an Arm CPU (VNNI's names absent by nature) is 'unknown'."""
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "aarch64")
    (tmp_path / "cpuinfo").write_text(NEOVERSE_N1)
    assert cpu_features.int8_dot_units(str(tmp_path / "cpuinfo")) is None
