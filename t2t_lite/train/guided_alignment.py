"""Guided alignment (Garg et al. 2019, "Jointly Learning to Align and Translate with Transformer Models", §4).

One layer's encoder-decoder attention, averaged over its first H heads, is trained toward the
training pairs' word links (`t2t-datagen --train_alignments`, mapped to subwords by
`t2t_lite.data.word_alignment`) beside the translation loss:

    L = L_ce + λ·L_a,        L_a = −(1/|T|) Σ_{t ∈ T_G} Σ_s G(t, s) · log A(t, s)

    A(t, s) = 1/H Σ_{h<H} softmax(q_t^{l,h} · K^{l,h}ᵀ / √d_k)(s)     (l = guided_alignment_layer,
                                                                       H = guided_alignment_heads)
    G(t, s) = M(t, s) / Σ_s' M(t, s')                                  (M: the links, 0/1)

λ is hparams.guided_alignment_weight. G is the links row-normalised: a target subword linked to k
source subwords asks for 1/k of its attention on each; T_G are the target subwords with at least one
link (the others, EOS among them, are not supervised), and |T| is the step's count of target tokens
that divides the cross-entropy (`t2t_lite.train.train_step`), so gradient accumulation and replicas
sum the alignment term exactly as they sum the cross-entropy. Row t of A is the decoder position
that predicts target subword t (its input is subword t − 1): the row `t2t_lite.decode.alignment`
reads for target subword t, so a model decodes its alignments from the attention that was trained
(`t2t-decoder --decode_hparams=write_alignment=true` takes this layer and these heads by default).
A is the attention before dropout (attention_dropout acts on what the values see, not on A).
"""

import tensorflow as tf

from t2t_lite.data import datagen, word_alignment
from t2t_lite.data.word_alignment import ALIGNMENT

# log A is taken of at least this: a linked source position the attention gives no weight costs −log(1e-9), not ∞.
_SMALLEST_PROBABILITY = 1e-9


def is_on(hparams) -> bool:
    return hparams.guided_alignment_weight > 0


def supervised_attention(attention: dict, hparams) -> tf.Tensor:
    """A(t, s) float32 [batch, target length, source length] from a model's `return_attention` weights."""
    weights = tf.cast(attention["encoder_decoder"][hparams.guided_alignment_layer], tf.float32)
    return tf.reduce_mean(weights[:, : hparams.guided_alignment_heads], axis=1)


def alignment_loss_sum(attention_probabilities, alignment) -> tf.Tensor:
    """−Σ_t Σ_s G(t, s) · log A(t, s) over a batch, a float32 scalar (the module docstring, before ÷ |T|).

    attention_probabilities: A [batch, t, s]; alignment: the links M, bool [batch, t, s] (padding False).
    """
    links = tf.cast(alignment, tf.float32)
    per_row = tf.reduce_sum(links, axis=-1, keepdims=True)
    gold = links / tf.maximum(per_row, 1.0)  # rows without links stay 0
    log_attention = tf.math.log(tf.maximum(attention_probabilities, _SMALLEST_PROBABILITY))
    return -tf.reduce_sum(gold * log_attention)


def weighted_loss_sum(attention: dict, batch: dict, hparams) -> tf.Tensor:
    """λ · (−Σ G log A) of a training batch: what the step adds to its summed cross-entropy."""
    probabilities = supervised_attention(attention, hparams)
    return hparams.guided_alignment_weight * alignment_loss_sum(probabilities, batch[ALIGNMENT])


def check_data(problem, data_dir: str, hparams) -> None:
    """With guidance on, the training shards must hold links: else one line naming the hparam and the flag."""
    if not is_on(hparams):
        return
    files = datagen.complete_shards(data_dir, problem.base_name, "train")
    if files and not word_alignment.records_have_links(files):
        raise ValueError(
            f"hparam guided_alignment_weight={hparams.guided_alignment_weight} trains toward the training pairs' "
            f"word links, and the {problem.name} training files in --data_dir={data_dir} hold none. Write them "
            f"with t2t-datagen --train_alignments=FILE (Pharaoh links, one line per training pair; "
            f"bench/eflomal_align.py makes one), or set guided_alignment_weight=0."
        )
