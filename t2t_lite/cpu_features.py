"""Whether this CPU multiplies bfloat16 natively, and so which activation dtype trains faster on it.

Not the paper (it trained in float32 on GPUs). `activation_dtype=bfloat16` halves the bytes
every product reads, but it pays only where the CPU has bfloat16 multiply units: x86's
AVX-512 BF16 (`avx512_bf16`) or AMX (`amx_bf16`), Arm's BF16 extension (`bf16`), each named
in /proc/cpuinfo's flags. Elsewhere TensorFlow widens every bfloat16 operand to float32 and
back, and a bfloat16 step is slower than a float32 one. Measured with `bench/train.py
--hparams_set=transformer_multi30k --batch_size=2048` (docs/results.md): bfloat16 1.46× faster
than float32 on AMD Zen 4 (AVX-512 BF16), 1.57× on an Intel Xeon with AMX, and slower than
float32 on AMD Zen 3 (AVX2 only).

    python -m t2t_lite.cpu_features     # prints bfloat16 or float32: the faster training dtype here
"""

import sys

# /proc/cpuinfo flags (x86 "flags", Arm "Features") that name bfloat16 multiply units.
BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def bfloat16_units(cpuinfo: str = "/proc/cpuinfo"):
    """True if `cpuinfo` names a bfloat16 multiply unit, False if it names none, None if unreadable.

    None (not Linux, no /proc) means "unknown": callers then leave the user's choice alone.
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features") and set(value.split()) & set(BFLOAT16_FLAGS):
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
    return (f"Note: activation_dtype=bfloat16, but this CPU has no bfloat16 multiply units (none of "
            f"{', '.join(BFLOAT16_FLAGS)} in {cpuinfo}), so TensorFlow emulates them and a float32 step is "
            f"usually faster here; to train in float32, add activation_dtype=float32 to --hparams.")


if __name__ == "__main__":
    print(training_dtype(*sys.argv[1:2]))  # an optional path stands in for /proc/cpuinfo
