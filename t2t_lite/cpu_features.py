"""Whether this CPU multiplies bfloat16 (and int8) natively, and so which dtype trains or decodes faster on it.

Not the paper (it trained in float32 on GPUs). `activation_dtype=bfloat16` halves the bytes
every product reads, but it pays only where the CPU has bfloat16 multiply units: x86's
AVX-512 BF16 (`avx512_bf16`) or AMX (`amx_bf16`), Arm's BF16 extension (`bf16`), each named
in /proc/cpuinfo's flags. Elsewhere TensorFlow widens every bfloat16 operand to float32 and
back, and a bfloat16 step is slower than a float32 one. Measured with `bench/train.py
--hparams_set=transformer_multi30k --batch_size=2048`: docs/results.md, Hosts and ablations.

    python -m t2t_lite.cpu_features     # prints bfloat16 or float32: the faster training dtype here

int8 products pay only with int8 dot-product units: x86's VNNI (`avx512_vnni`, `avx_vnni`) or
AMX (`amx_int8`); without them `quantize=int8` decodes no faster than float32, and the decoding
tools say so (`int8_dot_units`, t2t_lite/decode/quantization.py's `speed_note`).

Which kernels TensorFlow runs (`use_onednn_kernels`): TensorFlow turns its oneDNN kernels on by
itself only on x86 CPUs with instructions for neural networks (VNNI, AVX-512 BF16, AMX); on the
others (AVX2-only CPUs) it runs Eigen's, and Eigen's product by the transposed embedding, the
pre-softmax projection of every decoding step, is several times slower than oneDNN's, which
makes a transformer_base beam-4 decode about twice as slow; a training step gains a little too
(docs/benchmarks.md, Decoding). The t2t-* tools call it before TensorFlow loads.
"""

import os
import platform
import sys

# /proc/cpuinfo flags (x86 "flags", Arm "Features") that name bfloat16 multiply units.
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# x86 flags that name int8 dot-product units (VNNI, AMX); without them an int8 product is no faster than float32.
INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def use_onednn_kernels() -> None:
    """TensorFlow's oneDNN kernels on every x86-64 CPU, unless TF_ENABLE_ONEDNN_OPTS says otherwise.

    Only in effect before TensorFlow is first imported: it reads the variable when it loads.
    """
    if _is_x86():
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def bfloat16_units(cpuinfo: str = "/proc/cpuinfo"):
    """True if `cpuinfo` names a bfloat16 multiply unit, False if it names none, None if unreadable.

    None (not Linux, no /proc) means "unknown": callers then leave the user's choice alone.
    """
    return _names_any(BFLOAT16_FLAGS, cpuinfo)


def int8_dot_units(cpuinfo: str = "/proc/cpuinfo"):
    """True if this x86 CPU names an int8 dot-product unit (INT8_DOT_FLAGS), False if none, None if unknown.

    Only x86 is judged (None elsewhere): the int8 figures behind the decoders' note were measured there.
    """
    if not _is_x86():
        return None
    return _names_any(INT8_DOT_FLAGS, cpuinfo)


def _names_any(flags, cpuinfo: str):
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features") and set(value.split()) & set(flags):
                    return True
    except OSError:
        return None
    return False


def training_dtype(cpuinfo: str = "/proc/cpuinfo") -> str:
    """bfloat16 where the CPU has bfloat16 units (or it cannot tell), float32 where it has none."""
    return "float32" if bfloat16_units(cpuinfo) is False else "bfloat16"


def emulation_note(activation_dtype: str, cpuinfo: str = "/proc/cpuinfo"):
    """The trainer's warning when bfloat16 is asked for on a CPU that has no bfloat16 units, else None."""
    if activation_dtype != "bfloat16" or bfloat16_units(cpuinfo) is not False:
        return None
    return (
        f"Note: activation_dtype=bfloat16, but this CPU has no bfloat16 multiply units (none of "
        f"{', '.join(BFLOAT16_FLAGS)} in {cpuinfo}), so TensorFlow emulates them and a float32 step is "
        f"usually faster here; to train in float32, add activation_dtype=float32 to --hparams."
    )


if __name__ == "__main__":
    print(training_dtype(*sys.argv[1:2]))  # an optional path stands in for /proc/cpuinfo
