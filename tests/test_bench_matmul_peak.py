"""bench/matmul_peak.py --step_shapes: its list of products is one transformer_base step's."""

import importlib.util
import os

from t2t_lite import registry, trainer

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
spec = importlib.util.spec_from_file_location("matmul_peak", os.path.join(BENCH, "matmul_peak.py"))
matmul_peak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matmul_peak)


def test_step_shapes_are_the_forward_and_backward_products_of_a_base_step():
    hparams = registry.hparams("transformer_base")
    tokens, vocab = 512, 37000
    flops = sum(count * 2 * m * k * n for _, m, k, n, _, _, count in matmul_peak.STEP_SHAPES)
    # Forward and two backward products per weight matrix: 6 FLOPs per weight and token (§5 estimate).
    assert flops == 6 * tokens * trainer.matmul_parameters(hparams, vocab)
    # Every product appears as forward, dW and dX, in equal numbers.
    for family in ("projection", "FFN inner", "FFN outer", "vocabulary"):
        counts = [count for name, *_, count in matmul_peak.STEP_SHAPES if name.startswith(family)]
        assert len(counts) == 3 and len(set(counts)) == 1, family
