"""The FLOPs estimate of a training step, counted by hand from §3's layer shapes."""

from t2t_lite import registry
from t2t_lite.train import flops


def test_flops_estimate_of_the_base_model():
    # Base, V = 37,000: per token 6·(6·(4·512² + 2·512·2048) + 6·(8·512² + 2·512·2048) + 512·37000) matmul FLOPs.
    base = registry.hparams("transformer_base")
    per_token_matmul = 6 * (6 * (4 * 512**2 + 2 * 512 * 2048) + 6 * (8 * 512**2 + 2 * 512 * 2048) + 512 * 37000)
    per_token_attention = 6 * 20 * 18 * (512 + 512)  # n = 20 positions, 6 + 2·6 attention layers
    assert flops.flops_per_step(base, 37000, tokens=1000, length=20) == 1000 * (per_token_matmul + per_token_attention)
