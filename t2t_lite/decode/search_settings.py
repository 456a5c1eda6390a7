"""How each translation is searched for (§6.1): the beam and its length penalty, or sampling's draws.

    score(Y) = log P(Y | X) / lp(Y),   lp(Y) = ((5 + |Y|) / 6) ** α          (beam search, GNMT eq. 14)
    y_t ~ softmax(log p(· | y_<t, x) / T)  among the k most probable tokens   (sampling_method=random)

`SearchSettings` is one frozen, hashable value that travels whole from `--decode_hparams` (t2t-decoder's
`DecodeHParams`, an export's `ExportSettings`, the dev BLEU of training) to `beam_search.decode`, and keys
the searches `batch_decoding.decode_batch` compiles (`traced()`: the settings a trace depends on). A new
option of the search is a field here and the code that reads it. Its names are tensor2tensor's
(`beam_size`, `alpha`, `extra_length`, `sampling_method`, `sampling_temp`, `sampling_keep_top_k`).
"""

import dataclasses
import math

from t2t_lite.decode.sampling import Sampling

SAMPLING_METHODS = ("argmax", "random")
# The search's lengths and beam, and the draws' seed (t2t_lite/decode/sampling.py), are int32 tensors.
MAX_INT32 = 2**31 - 1
# The settings each mode leaves unused: one given for the other mode is refused, not ignored.
UNUSED_IN_MODE = {
    "argmax": ("sampling_temp", "sampling_keep_top_k", "sampling_seed"),
    "random": ("beam_size",),  # one draw per step, no beam
}


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """The search of one translation: beam or draws, its length limit, and whether XLA compiles it."""

    beam_size: int = 4  # Beam width; 1 = greedy. Not used when sampling (one draw per step).
    alpha: float = 0.6  # Length penalty exponent α of ((5+|Y|)/6)^α.
    extra_length: int = 50  # Maximum output length = input length + extra_length.
    xla: bool = False  # Compile the whole search with XLA: one compilation per padded batch shape.
    sampling_method: str = (
        "argmax"  # "argmax": the search above; "random": draw each token (t2t_lite/decode/sampling.py).
    )
    sampling_temp: float = 1.0  # Temperature of the draws; 0 = argmax.
    sampling_keep_top_k: int = -1  # Draw among the k most probable tokens; -1 = all.
    sampling_seed: int = 1  # Fixes every draw: the same seed gives the same samples.

    def __post_init__(self):
        if self.beam_size < 1 or self.extra_length < 0:
            raise ValueError(
                f"--decode_hparams: beam_size must be ≥ 1 and extra_length ≥ 0 "
                f"(got beam_size={self.beam_size}, extra_length={self.extra_length})."
            )
        check_length_penalty(self.alpha)
        if self.sampling_method not in SAMPLING_METHODS:
            raise ValueError(f"--decode_hparams: sampling_method={self.sampling_method}: use argmax or random.")
        if not 0 <= self.sampling_temp < math.inf or self.sampling_keep_top_k == 0 or self.sampling_keep_top_k < -1:
            raise ValueError(
                f"--decode_hparams: sampling_temp must be ≥ 0 and finite and sampling_keep_top_k ≥ 1 or -1 (all) "
                f"(got {self.sampling_temp}, {self.sampling_keep_top_k})."
            )
        if not 0 <= self.sampling_seed <= MAX_INT32:
            raise ValueError(
                f"--decode_hparams: sampling_seed={self.sampling_seed}: must be from 0 to {MAX_INT32} "
                f"(2**31 - 1), the draws' int32 seed."
            )
        for name in ("beam_size", "extra_length"):
            if getattr(self, name) > MAX_INT32:
                raise ValueError(
                    f"--decode_hparams: {name}={getattr(self, name)}: must be at most {MAX_INT32} (2**31 - 1): "
                    f"the search counts in int32."
                )

    @property
    def samples(self) -> bool:
        """Whether each token is drawn (sampling_method=random) rather than searched for."""
        return self.sampling_method == "random"

    @property
    def beam_width(self) -> int:
        """The hypotheses kept per sentence: beam_size, or 1 when sampling."""
        return 1 if self.samples else self.beam_size

    def sampling(self, seed=None, sample=0):
        """The draws of sample number `sample` (a `Sampling`), or None for the search.

        `seed` (default: sampling_seed) and `sample` may be int32 tensors, so that one traced search takes
        them as arguments and serves every seed and sample.
        """
        if not self.samples:
            return None
        seed = self.sampling_seed if seed is None else seed
        return Sampling(self.sampling_temp, max(self.sampling_keep_top_k, 0), seed, sample)

    def traced(self) -> "SearchSettings":
        """What a compiled search depends on: these settings without the seed, which it takes as an argument."""
        return dataclasses.replace(self, sampling_seed=0)


def check_given(search: SearchSettings, given) -> None:
    """Refuses a setting named in `--decode_hparams` (`given`: the names) that the chosen mode never reads."""
    unused = [name for name in UNUSED_IN_MODE[search.sampling_method] if name in given]
    if unused:
        other = "random" if search.sampling_method == "argmax" else "argmax"
        raise ValueError(
            f"--decode_hparams: {', '.join(unused)} {'has' if len(unused) == 1 else 'have'} no effect with "
            f"sampling_method={search.sampling_method} (only with sampling_method={other}): "
            f"leave {'it' if len(unused) == 1 else 'them'} out, or set sampling_method={other}."
        )


def check_vocabulary(search: SearchSettings, vocab_size: int) -> None:
    """Refuses a sampling_keep_top_k above the vocabulary's size, known from the data before the model loads."""
    if search.sampling_keep_top_k > vocab_size:
        raise ValueError(
            f"--decode_hparams: sampling_keep_top_k={search.sampling_keep_top_k} is more than the model's "
            f"{vocab_size} tokens: give at most {vocab_size}, or -1 to keep all."
        )


def check_length_penalty(alpha: float) -> None:
    """Refuses an α of the length penalty that is negative, infinite or NaN (`--decode_hparams`)."""
    if not 0.0 <= alpha < math.inf:  # NaN fails every comparison
        raise ValueError(
            f"--decode_hparams: alpha={alpha}: the length penalty's exponent must be a finite number ≥ 0 "
            f"(0 = no penalty; the paper's 0.6)."
        )
