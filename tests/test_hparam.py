"""HParams: overrides with tensor2tensor's syntax, errors that list valid names, JSON round trip."""

import dataclasses

import pytest

from t2t_lite.hparam import HParams, HParamsError


def test_override_returns_new_value_and_leaves_original():
    base = HParams()
    changed = base.override("num_heads=16,layer_prepostprocess_dropout=0.3")
    assert (changed.num_heads, changed.layer_prepostprocess_dropout) == (16, 0.3)
    assert (base.num_heads, base.layer_prepostprocess_dropout) == (8, 0.1)


def test_override_parses_each_type():
    hp = HParams().override(
        "hidden_size=1024, pos=emb, shared_embedding_and_softmax_weights=false, "
        "learning_rate_warmup_steps=8e3, xla_compile=True"
    )
    assert hp.hidden_size == 1024 and hp.pos == "emb"
    assert hp.shared_embedding_and_softmax_weights is False and hp.xla_compile is True
    assert hp.learning_rate_warmup_steps == 8000


def test_unknown_name_lists_valid_names_and_suggests():
    with pytest.raises(HParamsError) as error:
        HParams().override("num_head=16")
    message = str(error.value)
    assert "num_head" in message and "Did you mean num_heads" in message
    assert "hidden_size" in message and "filter_size" in message  # the full list of valid names


@pytest.mark.parametrize("override", ["num_heads=many", "hidden_size=3.5", "xla_compile=maybe", "num_heads"])
def test_unparsable_value_names_the_hparam(override):
    with pytest.raises(HParamsError) as error:
        HParams().override(override)
    assert "num_heads" in str(error.value) or "hidden_size" in str(error.value) or "xla_compile" in str(error.value)


@pytest.mark.parametrize(
    "override",
    [
        "pos=rotary",
        "norm_position=middle",
        "num_heads=7",
        "layer_prepostprocess_dropout=1.5",
        "activation_dtype=int8",
        "learning_rate=0",
        "learning_rate=nan",
        "optimizer_adam_beta1=1.0",
        "optimizer_adam_beta2=-0.1",
        "optimizer_adam_epsilon=0",
        "clip_grad_norm=-1",
        "learning_rate_decay_steps=-1",
        "alpha=-1",
        "alpha=nan",
        "alpha=inf",
        "length_bucket_step=nan",
        "layer_norm_epsilon=0",
        "min_length_bucket=0",
    ],
)
def test_out_of_range_values_are_rejected(override):
    with pytest.raises(HParamsError, match=override.split("=")[0]):  # the message names the hparam
        HParams().override(override)


def test_a_name_given_twice_is_an_error():
    with pytest.raises(HParamsError, match="num_heads is given twice"):
        HParams().override("num_heads=16,hidden_size=1024,num_heads=8")


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HParams().hidden_size = 3


def test_json_round_trip():
    hp = HParams().override("num_heads=16,pos=emb,alpha=0.3")
    assert HParams.from_json(hp.to_json()) == hp


def test_json_with_unknown_name_is_an_error():
    with pytest.raises(HParamsError):
        HParams.from_json('{"hidden_sise": 3}')


@pytest.mark.parametrize(
    "text, message",
    [
        ("", r"not JSON \(Expecting value: line 1 column 1"),
        ('{"hidden_size": 512', "not JSON"),
        ("[512, 2048]", "holds an array, not a JSON object of hparam names and values"),
        ('"transformer_base"', "holds a string, not a JSON object"),
        ('{"hidden_size": "big"}', 'hparam hidden_size="big": expected a whole number'),
        ('{"hidden_size": 128.5}', "hparam hidden_size=128.5: expected a whole number"),
        ('{"xla_compile": 1}', "hparam xla_compile=1: expected true or false"),
        ('{"pos": null}', "hparam pos=null: expected a string"),
        ('{"alpha": "0.6"}', 'hparam alpha="0.6": expected a number'),
        ('{"hidden_size": -512}', "hparam hidden_size=-512: must be positive"),
    ],
)
def test_json_that_is_not_hparams_names_what_is_wrong(text, message):
    """What a damaged or hand-edited hparams.json holds: the error names the field (the file: model_info)."""
    with pytest.raises(HParamsError, match=message):
        HParams.from_json(text)


def test_json_numbers_take_the_fields_types():
    """JSON has one number type: 128.0 is a whole number for an int field, 1 a number for a float one."""
    hp = HParams.from_json('{"hidden_size": 128.0, "alpha": 1, "learning_rate_warmup_steps": 4e3}')
    assert (hp.hidden_size, hp.alpha, hp.learning_rate_warmup_steps) == (128, 1.0, 4000)
    assert type(hp.hidden_size) is int and type(hp.alpha) is float


def test_zero_means_hidden_size_for_key_and_value_channels():
    hp = HParams(hidden_size=256, num_heads=8)
    assert (hp.key_channels, hp.value_channels) == (256, 256)
    assert HParams(attention_key_channels=128).key_channels == 128


def test_separate_encoder_decoder_layer_counts():
    hp = HParams(num_hidden_layers=6, num_decoder_layers=2)
    assert (hp.encoder_layers, hp.decoder_layers) == (6, 2)
