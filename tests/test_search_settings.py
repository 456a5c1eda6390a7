"""The search's one settings object (t2t_lite/decode/search_settings.py): defined once, composed by the decoder's and
the export's settings, checked once, and the key of the compiled searches."""

import dataclasses

import numpy as np
import pytest

from t2t_lite import registry
from t2t_lite.decode import batch_decoding
from t2t_lite.decode.alignment import AlignmentSettings
from t2t_lite.decode.decode_settings import DecodeHParams, decode_hparams
from t2t_lite.decode.search_settings import SearchSettings, check_vocabulary
from t2t_lite.hparam import HParams, HParamsError, compose, field_types, flat_values
from t2t_lite.model.transformer import Transformer
from t2t_lite.serve.export_settings import ExportSettings, export_settings


def test_each_setting_is_defined_once_and_the_decoder_and_export_take_the_same_names():
    search = {field.name for field in dataclasses.fields(SearchSettings)}
    aligning = {field.name for field in dataclasses.fields(AlignmentSettings)}
    assert not search & aligning
    for composed in (DecodeHParams, ExportSettings):
        own = {field.name for field in dataclasses.fields(composed)} - {"search", "alignment"}
        assert not own & (search | aligning), composed  # no setting of the search or the alignment restated
        assert set(field_types(composed)) == own | search | aligning  # one flat --decode_hparams namespace
    assert {"beam_size", "alpha", "extra_length", "xla", "sampling_method", "sampling_temp"} <= search


def test_the_flag_fills_the_search_whole_and_a_flat_record_rebuilds_it():
    base, files = registry.hparams("transformer_base"), registry.problem("translate_files")
    settings = decode_hparams(base, files, "beam_size=5,batch_size=8,xla=true")
    assert settings.search == SearchSettings(beam_size=5, alpha=0.6, extra_length=50, xla=True)
    assert settings.batch_size == 8
    assert compose(DecodeHParams, flat_values(settings)) == settings
    drawn = decode_hparams(base, files, "sampling_method=random,sampling_seed=9")
    assert compose(DecodeHParams, flat_values(drawn)) == drawn
    exported = export_settings(base, files, "beam_size=5,xla=true,sampling_seed=9")  # the `sample` signature's seed
    assert exported.search == dataclasses.replace(settings.search, sampling_seed=9)  # the decoder's, as given


@pytest.mark.parametrize(
    "overrides, message",
    [
        ("beam_size=0", "--decode_hparams: beam_size must be ≥ 1"),
        ("alpha=nan", "--decode_hparams: alpha=nan"),
        ("sampling_temp=-1", "--decode_hparams: sampling_temp must be ≥ 0"),
        ("sampling_method=nucleus", "--decode_hparams: sampling_method=nucleus"),
        # The draws take an int32 seed: a larger one would wrap onto another's samples (2**63 and beyond
        # were a traceback), and a negative one is no seed the user can reproduce by name.
        (f"sampling_seed={2**31}", r"--decode_hparams: sampling_seed=2147483648: must be from 0 to 2147483647"),
        ("sampling_seed=-1", r"--decode_hparams: sampling_seed=-1: must be from 0"),
        (f"sampling_seed={2**64}", r"--decode_hparams: sampling_seed=18446744073709551616: must be from 0"),
        (f"extra_length={2**31}", r"--decode_hparams: extra_length=2147483648: must be at most 2147483647"),
        (f"beam_size={2**63}", r"--decode_hparams: beam_size=9223372036854775808: must be at most 2147483647"),
    ],
)
def test_a_bad_search_setting_is_refused_in_the_same_words_by_the_decoder_and_the_export(overrides, message):
    base, files = registry.hparams("transformer_base"), registry.problem("translate_files")
    for settings_of in (decode_hparams, export_settings):
        with pytest.raises(HParamsError, match=message):
            settings_of(base, files, overrides)


def test_an_export_refuses_sampling_as_its_search_and_says_where_it_samples():
    with pytest.raises(HParamsError, match="sampling_method=random: an export searches in serving_default"):
        export_settings(
            registry.hparams("transformer_base"), registry.problem("translate_files"), "sampling_method=random"
        )


def test_equal_settings_share_one_compiled_search_and_the_seed_is_no_part_of_its_key():
    hparams = HParams(hidden_size=16, filter_size=32, num_heads=2, num_hidden_layers=1)
    model = Transformer(hparams, vocab_size=12)
    inputs = np.array([[3, 4, 1]], np.int32)
    first = batch_decoding.decode_batch(model, inputs, SearchSettings(beam_size=2, alpha=0.6, extra_length=2))
    again = batch_decoding.decode_batch(model, inputs, SearchSettings(beam_size=2, alpha=0.6, extra_length=2))
    np.testing.assert_array_equal(first[0], again[0])
    assert len(batch_decoding._COMPILED[model]) == 1
    for seed in (1, 2, 3):
        drawing = SearchSettings(beam_size=2, extra_length=2, sampling_method="random", sampling_seed=seed)
        batch_decoding.decode_batch(model, inputs, drawing)
    assert len(batch_decoding._COMPILED[model]) == 2  # one search, one sampling: the seeds share its trace
    assert hash(SearchSettings(beam_size=2)) == hash(SearchSettings(beam_size=2))


@pytest.mark.parametrize(
    "overrides, unused",
    [
        ("sampling_temp=0.7", "sampling_temp has no effect with sampling_method=argmax"),
        ("sampling_keep_top_k=5,sampling_seed=3", "sampling_keep_top_k, sampling_seed have no effect"),
        ("sampling_temp=1.0", "sampling_temp has no effect"),  # even at its default: it was given for nothing
        ("sampling_method=random,beam_size=8", "beam_size has no effect with sampling_method=random"),
    ],
)
def test_a_setting_the_chosen_mode_never_reads_is_refused_naming_it(overrides, unused):
    base, files = registry.hparams("transformer_base"), registry.problem("translate_files")
    with pytest.raises(HParamsError, match=f"^--decode_hparams: {unused}.*leave"):
        decode_hparams(base, files, overrides)
    decode_hparams(base, files, "sampling_method=random,sampling_temp=0.7,sampling_keep_top_k=5,sampling_seed=3")
    # An export reads both: its search, and the draws of its `sample` signature.
    export_settings(base, files, "beam_size=8,sampling_temp=0.7,sampling_keep_top_k=5")


def test_top_k_beyond_the_vocabulary_is_refused_before_any_model_is_built():
    search = SearchSettings(sampling_method="random", sampling_keep_top_k=13)
    with pytest.raises(ValueError, match="sampling_keep_top_k=13 is more than the model's 12 tokens: give at most 12"):
        check_vocabulary(search, 12)
    check_vocabulary(dataclasses.replace(search, sampling_keep_top_k=12), 12)  # all of them: allowed
    check_vocabulary(dataclasses.replace(search, sampling_keep_top_k=-1), 12)
