"""Pins every value of the paper's hparam sets, so a released set never changes silently.

Values are those of Vaswani et al. 2017: Table 3 ("base", "big"), §5 (optimizer, schedule,
batching, regularization) and §6 (decoding, EN-FR dropout, parsing).
"""

import dataclasses

import pytest

from t2t_lite import registry
from t2t_lite.cli import flags
from t2t_lite.hparam import HParams
from t2t_lite.train import schedule

BASE = {
    "hidden_size": 512,
    "filter_size": 2048,
    "num_heads": 8,
    "num_hidden_layers": 6,
    "num_encoder_layers": 0,
    "num_decoder_layers": 0,
    "attention_key_channels": 0,
    "attention_value_channels": 0,  # d_k = d_v = 512 / 8 = 64
    "pos": "timing",
    "self_attention_type": "dot_product",
    "max_relative_position": 20,
    "norm_position": "post",
    "layer_norm_epsilon": 1e-6,
    "shared_embedding_and_softmax_weights": True,
    "layer_prepostprocess_dropout": 0.1,
    "attention_dropout": 0.0,
    "relu_dropout": 0.0,
    "symbol_dropout": 0.0,
    "label_smoothing": 0.1,
    "guided_alignment_weight": 0.0,  # guided alignment off; its layer and heads, should it be turned on
    "guided_alignment_layer": -2,
    "guided_alignment_heads": 1,
    "learning_rate": 1.0,
    "learning_rate_warmup_steps": 4000,
    "learning_rate_decay_steps": 0,
    "optimizer_adam_beta1": 0.9,
    "optimizer_adam_beta2": 0.98,
    "optimizer_adam_epsilon": 1e-9,
    "clip_grad_norm": 0.0,
    "batch_size": 4096,
    "tokens_per_step": 25000,
    "max_length": 256,
    "min_length_bucket": 8,
    "length_bucket_step": 1.1,
    "activation_dtype": "float32",
    "xla_compile": False,
    "beam_size": 4,
    "alpha": 0.6,
    "extra_length": 50,
}
BIG = {**BASE, "hidden_size": 1024, "filter_size": 4096, "num_heads": 16, "layer_prepostprocess_dropout": 0.3}
BIG_ENFR = {**BIG, "layer_prepostprocess_dropout": 0.1}
# §6.3: "all other parameters remained unchanged from the English-to-German base translation model".
PARSING = {
    **BASE,
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "layer_prepostprocess_dropout": 0.2,
    "attention_dropout": 0.2,
    "max_length": 512,
    "beam_size": 21,
    "alpha": 0.3,
    "extra_length": 300,
}
TINY = {
    **BASE,
    "hidden_size": 128,
    "filter_size": 512,
    "num_heads": 4,
    "num_hidden_layers": 2,
    "learning_rate_warmup_steps": 1000,
    "batch_size": 2048,
    "tokens_per_step": 0,
    "max_length": 128,
}
MULTI30K = {**TINY, "hidden_size": 256, "filter_size": 1024, "num_hidden_layers": 3, "learning_rate": 0.5}
MULTI30K_HOUR = {
    **MULTI30K,
    "layer_prepostprocess_dropout": 0.2,
    "learning_rate": 1.0,
    "learning_rate_warmup_steps": 2000,
    "activation_dtype": "bfloat16",
}
MULTI30K_SMALL = {
    **MULTI30K_HOUR,
    "hidden_size": 192,
    "filter_size": 768,
    "learning_rate_warmup_steps": 1000,
    "learning_rate_decay_steps": 2000,
    "activation_dtype": "float32",
    "xla_compile": True,
}
MULTI30K_HOUR_SLOW_CPU = {
    **MULTI30K_HOUR,
    "learning_rate": 0.7071,
    "learning_rate_warmup_steps": 1000,
    "learning_rate_decay_steps": 800,
    "norm_position": "pre",
    "activation_dtype": "float32",
    "xla_compile": True,
}

# tensor2tensor's transformer_relative*: pos = None, self_attention_type = "dot_product_relative",
# max_relative_position = 20 over their absolute parents.
RELATIVE = {"pos": "none", "self_attention_type": "dot_product_relative", "max_relative_position": 20}


def test_every_field_is_pinned():
    assert set(BASE) == {field.name for field in dataclasses.fields(HParams)}


def test_transformer_base_is_the_paper():
    assert registry.hparams("transformer_base").values() == BASE
    hp = registry.hparams("transformer_base")
    assert hp.key_channels // hp.num_heads == 64 and hp.value_channels // hp.num_heads == 64


def test_transformer_big_is_the_paper():
    assert registry.hparams("transformer_big").values() == BIG
    hp = registry.hparams("transformer_big")
    assert hp.key_channels // hp.num_heads == 64


def test_transformer_big_enfr_uses_dropout_0_1():
    assert registry.hparams("transformer_big_enfr").values() == BIG_ENFR


def test_transformer_parsing_is_section_6_3():
    assert registry.hparams("transformer_parsing").values() == PARSING
    hp = registry.hparams("transformer_parsing")
    # The base model's d_ff and h, with d_model 1024: d_k = d_v = 1024 / 8.
    assert (hp.filter_size, hp.num_heads, hp.key_channels // hp.num_heads) == (2048, 8, 128)


def test_transformer_parsing_small_is_section_6_3_at_a_quarter_width():
    changes = {
        "hidden_size": 256,  # §6.3's 1024 / 4
        "filter_size": 512,  # §6.3's 2048 / 4
        "num_heads": 4,  # d_k = d_v = 64, the base model's
        "batch_size": 4096,
        "tokens_per_step": 0,
        "learning_rate_warmup_steps": 1000,
        "learning_rate_decay_steps": 1000,
        "max_length": 256,
        "activation_dtype": "float32",
        "xla_compile": True,
    }
    assert registry.hparams("transformer_parsing_small").values() == {**PARSING, **changes}
    hp = registry.hparams("transformer_parsing_small")
    assert (hp.num_hidden_layers, hp.beam_size, hp.alpha, hp.extra_length) == (4, 21, 0.3, 300)  # §6.3's
    # Eq. 3's peak, as the docstring states it: 256^-0.5 * 1000^-0.5.
    assert hp.hidden_size**-0.5 * hp.learning_rate_warmup_steps**-0.5 == pytest.approx(2.0e-3, rel=0.02)


def test_transformer_tiny():
    assert registry.hparams("transformer_tiny").values() == TINY


def test_transformer_multi30k():
    assert registry.hparams("transformer_multi30k").values() == MULTI30K
    hp = registry.hparams("transformer_multi30k")
    assert hp.key_channels // hp.num_heads == 64  # d_k as in the paper


def test_transformer_multi30k_hour():
    assert registry.hparams("transformer_multi30k_hour").values() == MULTI30K_HOUR


def test_transformer_multi30k_small():
    assert registry.hparams("transformer_multi30k_small").values() == MULTI30K_SMALL
    hp = registry.hparams("transformer_multi30k_small")
    assert (hp.num_heads, hp.key_channels // hp.num_heads) == (4, 48)  # h kept, so d_k shrinks with d_model
    # The same model on every host: no dtype that some CPUs round in hardware and others emulate.
    assert hp.activation_dtype == "float32"


def test_transformer_table3_base_is_table_3_base_at_half_width_and_depth():
    changes = {
        "hidden_size": 256,  # Table 3 base's 512 / 2
        "filter_size": 1024,  # 2048 / 2
        "num_hidden_layers": 3,  # N = 6 / 2
        "batch_size": 2048,
        "tokens_per_step": 0,
        "max_length": 128,
        "learning_rate": 0.7071,
        "learning_rate_warmup_steps": 400,
        "learning_rate_decay_steps": 400,
        "activation_dtype": "float32",
        "xla_compile": True,
    }
    assert registry.hparams("transformer_table3_base").values() == {**BASE, **changes}
    hp = registry.hparams("transformer_table3_base")
    assert (hp.num_heads, hp.key_channels // hp.num_heads, hp.value_channels // hp.num_heads) == (8, 32, 32)


def test_the_time_bound_multi30k_sets_are_retired_with_a_warning_that_names_the_recipe(capsys):
    assert registry.hparams("transformer_multi30k_hour_float32").values() == MULTI30K_SMALL
    assert "former name of transformer_multi30k_small" in registry.retired_note("transformer_multi30k_hour_float32")
    for name in ("transformer_multi30k_hour", "transformer_multi30k_hour_slow_cpu"):
        assert "transformer_multi30k_small for 5,841 updates" in registry.retired_note(name)
    for name in ("transformer_base", "transformer_tiny", "transformer_multi30k", "transformer_multi30k_small"):
        assert registry.retired_note(name) is None

    flags.FLAGS.unparse_flags()
    flags.FLAGS(["t2t-trainer", "--hparams_set=transformer_multi30k_hour_slow_cpu", "--hparams=num_heads=2"])
    assert flags.hparams_from_flags().num_heads == 2  # still usable, as the rows that name it ran it
    assert capsys.readouterr().err.startswith(
        "WARNING: --hparams_set=transformer_multi30k_hour_slow_cpu: a retired recipe, fitted to one CPU type's hour"
    )
    flags.FLAGS(["t2t-trainer", "--hparams_set=transformer_multi30k_small"])
    flags.hparams_from_flags()
    assert capsys.readouterr().err == ""
    flags.FLAGS.unparse_flags()


def test_transformer_multi30k_hour_slow_cpu():
    assert registry.hparams("transformer_multi30k_hour_slow_cpu").values() == MULTI30K_HOUR_SLOW_CPU


@pytest.mark.parametrize(
    "name, peak",
    [
        ("transformer_multi30k", 9.9e-4),
        ("transformer_multi30k_hour", 1.4e-3),
        ("transformer_multi30k_hour_slow_cpu", 1.4e-3),
        ("transformer_multi30k_small", 2.3e-3),
        ("transformer_table3_base", 2.2e-3),
    ],
)
def test_multi30k_peak_learning_rates_are_the_ones_their_docstrings_state(name, peak):
    # Eq. 3 peaks at step = warm-up: multiplier · d_model^-0.5 · warm-up^-0.5.
    hp = registry.hparams(name)
    rate = schedule.learning_rate_schedule(hp, train_steps=10**6)  # a decay far past these steps
    at_peak = float(rate(hp.learning_rate_warmup_steps - 1))  # Keras counts updates from 0
    expected = hp.learning_rate * hp.hidden_size**-0.5 * hp.learning_rate_warmup_steps**-0.5
    assert at_peak == pytest.approx(expected, rel=1e-6)
    assert at_peak == pytest.approx(peak, rel=0.01)
    assert float(rate(hp.learning_rate_warmup_steps + 999)) < at_peak > float(rate(hp.learning_rate_warmup_steps // 2))


@pytest.mark.parametrize(
    "name,absolute",
    [
        ("transformer_relative", BASE),
        ("transformer_relative_big", BIG),
        ("transformer_relative_tiny", TINY),
        ("transformer_multi30k_small_relative", MULTI30K_SMALL),
    ],
)
def test_relative_sets_are_their_parents_with_tensor2tensors_relative_positions(name, absolute):
    assert registry.hparams(name).values() == {**absolute, **RELATIVE}
    assert registry.hparams(name).relative_positions == 20


def test_sets_are_fresh_copies():
    assert registry.hparams("transformer_base") is not registry.hparams("transformer_base")
    registry.hparams("transformer_big")
    assert registry.hparams("transformer_base").hidden_size == 512  # deriving never mutates the parent
