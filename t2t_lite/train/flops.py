"""The arithmetic of a training step, for achieved FLOP/s (printed by t2t-trainer, and by bench/).

    FLOPs/step = 6 · tokens · P_matmul + 6 · tokens · n · (N_enc + 2 · N_dec) · (d_k·h + d_v·h)

P_matmul counts the weights used in matrix products per token (attention and feed-forward
kernels of every layer, plus the d_model × V pre-softmax projection; the embedding lookups
are not products), 6 = 2 FLOPs per multiply-add × (forward + 2× backward), and the second
term is QKᵀ and the weighted sum of values over n positions (source and target lengths
taken equal to the padded target length n).
"""


def matmul_parameters(hparams, vocab_size: int) -> int:
    """P_matmul: weights used in matrix products per token (see the module docstring)."""
    d, kc, vc, ff = hparams.hidden_size, hparams.key_channels, hparams.value_channels, hparams.filter_size
    attention = d * kc * 2 + d * vc * 2  # query and key, value and output projections
    feed_forward = 2 * d * ff
    return (
        hparams.encoder_layers * (attention + feed_forward)
        + hparams.decoder_layers * (2 * attention + feed_forward)
        + d * vocab_size
    )


def flops_per_step(hparams, vocab_size: int, tokens: float, length: int) -> float:
    """Estimated training FLOPs for `tokens` target tokens padded to `length` (module docstring)."""
    attention_layers = hparams.encoder_layers + 2 * hparams.decoder_layers
    channels = hparams.key_channels + hparams.value_channels
    return 6.0 * tokens * (matmul_parameters(hparams, vocab_size) + length * attention_layers * channels)
