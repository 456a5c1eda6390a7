"""The paper's hyperparameter sets (Vaswani et al. 2017, Table 3 and §6), and named variants.

Each set is a few plain lines: the paper's own sets state their values outright;
a variant names only what it changes from its parent, which it never mutates.
`tests/test_hparams_sets.py` pins every value, so a released set never changes
silently. Table 3's other rows are `--hparams` overrides of `transformer_base`:

    (A) num_heads=1,attention_key_channels=512,attention_value_channels=512 (h=1, d_k=d_v=512);
        num_heads=4 | 16 | 32  (d_k = d_v = 512/h follow from hidden_size)
    (B) attention_key_channels=128 (d_k=16) | attention_key_channels=256 (d_k=32)
    (C) num_hidden_layers=2|4|8;  hidden_size=256 | hidden_size=1024 (d_k=d_v scale with it);
        filter_size=1024 | filter_size=4096
    (D) layer_prepostprocess_dropout=0.0|0.2;  label_smoothing=0.0|0.2
    (E) pos=emb

Shaw et al. (2018)'s relative positions are `transformer_relative*` (`relative`).
"""

from t2t_lite.hparam import HParams
from t2t_lite.registry import register_hparams


@register_hparams
def transformer_base() -> HParams:
    """Table 3 "base": N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1, ε_ls=0.1."""
    return HParams(
        hidden_size=512,
        filter_size=2048,
        num_heads=8,
        num_hidden_layers=6,
        attention_key_channels=0,  # h·d_k = 8·64 = d_model
        attention_value_channels=0,
        pos="timing",
        norm_position="post",
        shared_embedding_and_softmax_weights=True,
        layer_prepostprocess_dropout=0.1,
        attention_dropout=0.0,
        relu_dropout=0.0,
        label_smoothing=0.1,
        learning_rate=1.0,
        learning_rate_warmup_steps=4000,
        optimizer_adam_beta1=0.9,
        optimizer_adam_beta2=0.98,
        optimizer_adam_epsilon=1e-9,
        batch_size=4096,
        tokens_per_step=25000,
        max_length=256,
        beam_size=4,
        alpha=0.6,
        extra_length=50,
    )


@register_hparams
def transformer_big() -> HParams:
    """Table 3 "big": d_model=1024, d_ff=4096, h=16, P_drop=0.3 (EN-DE)."""
    return transformer_base().replace(
        hidden_size=1024,
        filter_size=4096,
        num_heads=16,
        layer_prepostprocess_dropout=0.3,
    )


@register_hparams
def transformer_big_enfr() -> HParams:
    """§6.1: the big model for EN-FR used P_drop=0.1 instead of 0.3."""
    return transformer_big().replace(layer_prepostprocess_dropout=0.1)


@register_hparams
def transformer_parsing() -> HParams:
    """§6.3: a 4-layer Transformer with d_model=1024 for WSJ constituency parsing.

    The paper states 4 layers, d_model 1024, beam 21, α=0.3, max output length
    input+300, and that "all other parameters remained unchanged from the
    English-to-German base translation model": so d_ff=2048 and h=8 (d_k=d_v=128),
    as in tensor2tensor's transformer_parsing_base. Attention and residual dropout
    were tuned on Section 22 without their values given; we take 0.2 for both,
    tensor2tensor's value. The learning rate, also tuned and unstated, stays eq. 3.
    """
    return transformer_base().replace(
        hidden_size=1024,
        num_hidden_layers=4,
        layer_prepostprocess_dropout=0.2,
        attention_dropout=0.2,
        max_length=512,
        beam_size=21,
        alpha=0.3,
        extra_length=300,
    )


@register_hparams
def transformer_parsing_small() -> HParams:
    """The parsing recipe: `bench/parsing.sh` trains it 2,000 updates; §6.3's model at a quarter width.

    Not a paper setting. Values not listed are transformer_parsing's (§6.3: 4 layers, dropout 0.2,
    beam 21, α 0.3, output length input + 300). Updates, seeds and F1: docs/results.md, Parsing.

    * hidden_size 256, filter_size 512: §6.3's 1024 and 2048 at a quarter, so one update of a
      4,096-token batch takes about a second on a 2-core CPU; h = 4 keeps d_k = d_v = 64, the base
      model's.
    * batch_size 4096, tokens_per_step 0: one micro-batch an update (the paper's 25K tokens would be
      six), so the 2,000 updates (about 30 passes over the sample's 3,600 trees) fit a 2-core hour.
    * learning_rate_warmup_steps 1000 (eq. 3 peaks at 2.0e-3 for d_model 256) and
      learning_rate_decay_steps 1000: tensor2tensor's linear decay over the run's second half, as the
      Multi30k recipe decays over its last third.
    * max_length 256: a training tree of over 256 subwords is dropped (the sample's 99th percentile is
      144; its longest, 574, would set the size of a batch alone).
    * activation_dtype float32, xla_compile: the same model on every host, a faster float32 step.
    """
    return transformer_parsing().replace(
        hidden_size=256,
        filter_size=512,
        num_heads=4,
        batch_size=4096,
        tokens_per_step=0,
        learning_rate_warmup_steps=1000,
        learning_rate_decay_steps=1000,
        max_length=256,
        activation_dtype="float32",
        xla_compile=True,
    )


@register_hparams
def transformer_tiny() -> HParams:
    """A CPU-sized variant for smoke runs and the offline quick start (not a paper setting)."""
    return transformer_base().replace(
        hidden_size=128,
        filter_size=512,
        num_heads=4,
        num_hidden_layers=2,
        learning_rate_warmup_steps=1000,
        batch_size=2048,
        tokens_per_step=0,
        max_length=128,
    )


@register_hparams
def transformer_quickstart() -> HParams:
    """README command one's recipe: transformer_tiny trained 1,600 updates (not a paper setting).

    Values not listed are transformer_tiny's; each was one run of the recipe on the gettext test split
    (docs/results.md, the quickstart), kept where it raised the score.

    * learning_rate_warmup_steps 400 with learning_rate 0.6325 (= √(400/1000)): eq. 3's peak of
      transformer_tiny (2.8e-3) reached in a quarter of the run instead of most of it.
    * learning_rate_decay_steps 600: tensor2tensor's linear decay over the run's last 600 updates, so
      the run ends cooled down and its last checkpoint beats an average.
    * layer_prepostprocess_dropout 0.0: 1,600 updates are about two passes over the data, too few to
      overfit, and an update without dropout is cheaper.
    """
    return transformer_tiny().replace(
        learning_rate=0.6325,
        learning_rate_warmup_steps=400,
        learning_rate_decay_steps=600,
        layer_prepostprocess_dropout=0.0,
    )


@register_hparams
def transformer_multi30k() -> HParams:
    """A variant sized for Multi30k (~30k short sentence pairs) and one hour of a 2-core CPU (not a paper setting).

    Values not listed are transformer_base's, the paper's. Scores: docs/results.md, Multi30k.

    * hidden_size 256, filter_size 1024, num_heads 4 (d_k = 64 as in the paper), num_hidden_layers 3:
      between tiny and base, for captions of ~13 words (less capacity overfits less) and the hour's compute.
    * batch_size 2048, tokens_per_step 0: smaller batches give more updates per CPU-hour, which matters
      more than gradient noise at this scale.
    * learning_rate_warmup_steps 1000: the warm-up shortened to match a run of a few thousand updates.
    * learning_rate 0.5: eq. 3 at d_model 256 with 1,000 warm-up steps would peak at 2.0e-3, twice base's
      peak with batches twelve times smaller than its 25,000 tokens; ×0.5 halves the curve (peak 9.9e-4).
    * max_length 128: transformer_tiny's; Multi30k's sentences are far shorter.
    """
    return transformer_base().replace(
        hidden_size=256,
        filter_size=1024,
        num_heads=4,
        num_hidden_layers=3,
        learning_rate=0.5,
        learning_rate_warmup_steps=1000,
        batch_size=2048,
        tokens_per_step=0,
        max_length=128,
    )


@register_hparams
def transformer_multi30k_small() -> HParams:
    """The Multi30k recipe: `bench/multi30k.sh` trains it 5,841 updates; the same model on any x86-64 CPU.

    Not a paper setting. Updates → val sacreBLEU per seed and host, and each value's ablation:
    docs/results.md, Multi30k. Values not listed are transformer_multi30k's.

    * hidden_size 192, filter_size 768 (h = 4, so d_k = d_v = 48): cheaper updates than d_model 256.
    * layer_prepostprocess_dropout 0.2: chosen on Multi30k val over 0.1 and 0.3.
    * learning_rate 1.0, learning_rate_warmup_steps 1000 (eq. 3 peaks at 2.3e-3): the best of three schedules.
    * learning_rate_decay_steps 2000: tensor2tensor's linear decay over the run's last 2,000 updates,
      after which the last checkpoint beats an average.
    * activation_dtype float32: bfloat16 is rounded in hardware on some CPUs and emulated on others, so
      the model would depend on the host.
    * xla_compile: a faster float32 step; it changes the speed, not the model.
    """
    return transformer_multi30k().replace(
        hidden_size=192,
        filter_size=768,
        layer_prepostprocess_dropout=0.2,
        learning_rate=1.0,
        learning_rate_warmup_steps=1000,
        learning_rate_decay_steps=2000,
        activation_dtype="float32",
        xla_compile=True,
    )


def relative(hparams: HParams) -> HParams:
    """`hparams` with tensor2tensor's relative positions instead of absolute ones (Shaw et al. 2018).

    Self-attention gets learned relative position representations clipped to ±20 (k = 20,
    `model/relative_position.py`), and the embeddings no position encoding (pos=none), as
    tensor2tensor's transformer_relative sets. `--hparams pos=timing` combines the two.
    """
    return hparams.replace(pos="none", self_attention_type="dot_product_relative", max_relative_position=20)


@register_hparams
def transformer_relative() -> HParams:
    """transformer_base with relative positions (tensor2tensor's transformer_relative; Shaw et al. Table 1)."""
    return relative(transformer_base())


@register_hparams
def transformer_relative_big() -> HParams:
    """transformer_big with relative positions (tensor2tensor's transformer_relative_big)."""
    return relative(transformer_big())


@register_hparams
def transformer_relative_tiny() -> HParams:
    """transformer_tiny with relative positions: tensor2tensor's transformer_relative_tiny's architecture
    (2 layers, d_model 128, d_ff 512, 4 heads), trained as transformer_tiny is here."""
    return relative(transformer_tiny())


@register_hparams
def transformer_multi30k_small_relative() -> HParams:
    """The Multi30k recipe's set (transformer_multi30k_small) with relative positions (not a paper setting)."""
    return relative(transformer_multi30k_small())


@register_hparams
def transformer_table3_base() -> HParams:
    """Table 3's base row in miniature: `bench/table3.sh` trains it and each of the paper's rows scaled alike.

    Not a paper setting. Values not listed are transformer_base's (Table 3 "base"). The rows, as
    overrides of this set and of transformer_base side by side, and the paper's figures for each:
    bench/table3_rows.py; the recipe and the command: docs/results.md, Table 3 in miniature.

    The scale: every width at 1/2 and the depth at 1/2; head counts, dropout, label smoothing and
    the positions as the paper's, so that each row changes what the paper's row changes.

    * hidden_size 256, filter_size 1024: Table 3 base's 512 and 2048 × 1/2.
    * num_heads 8 (d_k = d_v = 32): base's h, so d_k = 64 × 1/2 follows from d_model.
    * num_hidden_layers 3: base's N = 6 × 1/2.
    * batch_size 2048, tokens_per_step 0, max_length 128: transformer_multi30k's batching for
      Multi30k's short captions, one micro-batch an update.
    * learning_rate_warmup_steps 400, learning_rate 0.7071 (eq. 3 peaks at 2.2e-3, the Multi30k
      recipe's 2.3e-3): a warm-up a third of the run's 1,200 updates instead of base's 4,000.
    * learning_rate_decay_steps 400: tensor2tensor's linear decay over the run's last 400 updates, so
      every row ends cooled down and its last checkpoint, decoded without averaging, is comparable.
    * activation_dtype float32, xla_compile: transformer_multi30k_small's, the same model on every host.

    1,200 updates: the Multi30k recipe's d_model 192 model makes an update in about 0.4 s on a 2-core
    CPU; this one's layers cost (256/192)^2 ≈ 1.8 times as much, so a row trains in about 15 minutes.
    """
    return transformer_base().replace(
        hidden_size=256,
        filter_size=1024,
        num_heads=8,
        num_hidden_layers=3,
        batch_size=2048,
        tokens_per_step=0,
        max_length=128,
        learning_rate=0.7071,
        learning_rate_warmup_steps=400,
        learning_rate_decay_steps=400,
        activation_dtype="float32",
        xla_compile=True,
    )


def _retired(note: str):
    """Marks a set the tools warn of when it is named (`registry.retired_note`), with what to use instead."""

    def mark(make_hparams):
        make_hparams.retired = note
        return make_hparams

    return mark


_TIME_BOUND = (
    "a retired recipe, fitted to one CPU type's hour, whose result depends on the host; the Multi30k "
    "recipe is transformer_multi30k_small for 5,841 updates (bench/multi30k.sh, docs/results.md)."
)


@register_hparams
@_retired(_TIME_BOUND)
def transformer_multi30k_hour() -> HParams:
    """transformer_multi30k with P_drop 0.2, eq. 3 × 1.0 over 2,000 warm-up steps, bfloat16 (retired)."""
    return transformer_multi30k().replace(
        layer_prepostprocess_dropout=0.2,
        learning_rate=1.0,
        learning_rate_warmup_steps=2000,
        activation_dtype="bfloat16",
    )


@register_hparams
@_retired("the former name of transformer_multi30k_small, whose values it keeps.")
def transformer_multi30k_hour_float32() -> HParams:
    """transformer_multi30k_small under its former name (retired)."""
    return transformer_multi30k_small()


@register_hparams
@_retired(_TIME_BOUND)
def transformer_multi30k_hour_slow_cpu() -> HParams:
    """transformer_multi30k_hour: eq. 3 × 0.7071, 1,000 warm-up steps, decay 800, pre-LN, float32 (retired)."""
    return transformer_multi30k_hour().replace(
        learning_rate=0.7071,
        learning_rate_warmup_steps=1000,
        learning_rate_decay_steps=800,
        norm_position="pre",
        activation_dtype="float32",
        xla_compile=True,
    )
