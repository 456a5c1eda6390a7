"""The settings an export is made with (`t2t-exporter --decode_hparams`), fixed in its graph and recorded.

`ExportSettings` composes the decoder's `SearchSettings` (beam, α, extra length, XLA, the `sample`
signature's draws; t2t_lite/decode/search_settings.py) with what only an export has: the longest input
its graph takes, its largest batch bucket and its products' precision. `export_settings` merges them in
t2t-decoder's precedence (the hparams set, then the problem's defaults, then the flag), so an export
decodes as the decoder does with the same flag.
"""

import dataclasses

from t2t_lite.decode import quantization
from t2t_lite.decode.alignment import AlignmentSettings
from t2t_lite.decode.decode_settings import alignment_defaults, checked_alignment, decode_hparams, from_decode_hparams
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.hparam import Composed, flat_values
from t2t_lite.model.transformer import DEFAULT_LEARNED_POSITIONS
from t2t_lite.serve import xla_buckets


@dataclasses.dataclass(frozen=True)
class ExportSettings(Composed):
    """Decode settings baked into an export (`--decode_hparams="beam_size=4,max_input_length=256"`)."""

    # The search of serving_default and its siblings; the sampling_* fields are the `sample` signature's draws.
    search: SearchSettings = SearchSettings()
    max_input_length: int = 256  # Model input ids, EOS included; longer inputs are truncated.
    # The largest batch bucket (TF Serving's batching max_batch_size): with xla, more sentences go in chunks of it.
    max_batch_size: int = xla_buckets.DEFAULT_MAX_BATCH_SIZE
    # "int8" or "bfloat16" product weights (t2t_lite/decode/quantization.py); "" = float32 as trained.
    quantize: str = ""
    # write_alignment: the text signatures also return each translation's word links ("alignments"), from the
    # alignment_layer and alignment_heads given (t2t_lite/decode/alignment.py); a CTranslate2 export records them.
    alignment: AlignmentSettings = AlignmentSettings()

    def __post_init__(self):
        quantization.check_mode(self.quantize)
        if self.max_input_length < 1 or self.max_batch_size < 1:
            raise ValueError(
                f"--decode_hparams: max_input_length and max_batch_size must be ≥ 1 "
                f"(got {self.max_input_length}, {self.max_batch_size})."
            )
        if self.search.samples:
            raise ValueError(
                "--decode_hparams: sampling_method=random: an export searches in serving_default and draws in "
                "its `sample` signature, with the sampling_temp, sampling_keep_top_k and sampling_seed given; "
                "leave sampling_method out."
            )


def export_settings(hparams, problem, overrides: str = "") -> ExportSettings:
    """t2t-decoder's precedence (hparams, then the problem's defaults, then `overrides`).

    max_input_length defaults to hparams.max_length, the longest sequence trained on
    (or the learned-position table's size when max_length is 0).
    """
    values = flat_values(decode_hparams(hparams, problem).search)
    values.update(alignment_defaults(hparams))
    values["max_input_length"] = hparams.max_length or DEFAULT_LEARNED_POSITIONS
    return checked_alignment(from_decode_hparams(ExportSettings, values, overrides), hparams)
