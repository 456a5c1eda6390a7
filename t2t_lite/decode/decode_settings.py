"""t2t-decoder's settings (`--decode_hparams`): the search, and how a run feeds it and writes its results.

`DecodeHParams` composes the `SearchSettings` (t2t_lite/decode/search_settings.py) with what only a
decoding run has: its batch size, the n-best and sample counts, the input cut, the products'
precision, and the word alignments (`AlignmentSettings`, t2t_lite/decode/alignment.py). One flat
namespace of names, as tensor2tensor's `--decode_hparams="beam_size=4,alpha=0.6"`, each defined once
by the class it belongs to; `decode_hparams` merges them in the decoder's precedence: the hparams set's
defaults (§6.1: beam 4, α 0.6; a model trained with guided alignment, its supervised layer and heads),
then the problem's (parsing, §6.3: beam 21, α 0.3, +300), then the flag.
"""

import dataclasses

from t2t_lite.decode import quantization
from t2t_lite.decode.alignment import AlignmentSettings
from t2t_lite.decode.search_settings import SearchSettings, check_given
from t2t_lite.hparam import Composed, HParamsError, compose, parse_overrides


@dataclasses.dataclass(frozen=True)
class DecodeHParams(Composed):
    """Settings of one decoding run (`--decode_hparams="beam_size=4,alpha=0.6"`)."""

    search: SearchSettings = SearchSettings()  # Beam, α, extra length, XLA, sampling: passed whole to the search.
    batch_size: int = 32  # Sentences decoded together.
    return_beams: bool = False  # Write every beam with its score (n-best), not only the best.
    max_input_size: int = 0  # Longer inputs are cut to this many ids (EOS included), and named; 0 = no cut.
    # "int8" or "bfloat16" product weights after restoring (t2t_lite/decode/quantization.py); "" = float32.
    quantize: str = ""
    score_per_token: bool = False  # --score_file: each subword's log-probability after the sum.
    num_samples: int = 1  # With sampling_method=random: samples per input, written like return_beams.
    # write_alignment, alignment_layer, alignment_heads: each hypothesis' word links (t2t_lite/decode/alignment.py).
    alignment: AlignmentSettings = AlignmentSettings()

    def __post_init__(self):
        quantization.check_mode(self.quantize)
        cut_ok = self.max_input_size == 0 or self.max_input_size >= 2
        if self.batch_size < 1 or not cut_ok:
            raise ValueError(
                f"--decode_hparams: batch_size must be ≥ 1 and max_input_size 0 (no cut) or ≥ 2 (a token and EOS) "
                f"(got batch_size={self.batch_size}, max_input_size={self.max_input_size})."
            )
        if self.num_samples < 1 or (self.num_samples > 1 and not self.search.samples):
            raise ValueError(
                f"--decode_hparams: num_samples={self.num_samples}: at least 1, and above 1 only with "
                f"sampling_method=random (argmax gives the same translation every time)."
            )

    @property
    def searches(self) -> int:
        """How many times each batch is searched: once, or once per sample."""
        return self.num_samples if self.search.samples else 1

    @property
    def writes_several(self) -> bool:
        """Whether an output line holds several hypotheses with their scores (return_beams or samples)."""
        return self.return_beams or self.num_samples > 1


def decode_hparams(hparams, problem, overrides: str = "") -> DecodeHParams:
    """The hparams' decode defaults, then the problem's, then `overrides` (--decode_hparams).

    A setting `overrides` names that the chosen mode never reads (sampling_temp without
    sampling_method=random, beam_size with it) is refused rather than ignored.
    """
    values = {"beam_size": hparams.beam_size, "alpha": hparams.alpha, "extra_length": hparams.extra_length}
    values.update(alignment_defaults(hparams))
    values.update(problem.decode_defaults())
    settings = from_decode_hparams(DecodeHParams, values, overrides)
    try:  # a decoding run reads one mode's settings (an export's `sample` signature reads both)
        check_given(settings.search, parse_overrides(DecodeHParams, overrides))
    except ValueError as error:
        raise HParamsError(str(error)) from None
    return checked_alignment(settings, hparams)


def alignment_defaults(hparams) -> dict:
    """A model trained with guided alignment aligns with the heads it trained (t2t_lite/train/guided_alignment.py):
    its layer and heads are the alignment_layer and alignment_heads unless --decode_hparams names others."""
    if not hparams.guided_alignment_weight:
        return {}
    return {"alignment_layer": hparams.guided_alignment_layer, "alignment_heads": hparams.guided_alignment_heads}


def checked_alignment(settings, hparams):
    """`settings` (with an `alignment`), once its layer and heads are known to exist in the model of `hparams`."""
    try:
        settings.alignment.check_model(hparams)
    except ValueError as error:  # it names --decode_hparams
        raise HParamsError(str(error)) from None
    return settings


def from_decode_hparams(config_class, defaults: dict, overrides: str):
    """`config_class` (composed settings) from flat `defaults`, then `--decode_hparams` `overrides`.

    Every error, an unknown name or a value out of range, is an HParamsError that names the flag.
    """
    values = dict(defaults)
    try:
        values.update(parse_overrides(config_class, overrides))
        return compose(config_class, values)
    except ValueError as error:  # HParamsError too: say which flag to fix
        message = str(error)
        raise HParamsError(
            message if message.startswith("--decode_hparams") else f"--decode_hparams: {message}"
        ) from None
