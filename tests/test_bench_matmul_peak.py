"""bench/matmul_peak.py --step_shapes: its products are those of one training step of the model."""

import importlib.util
import os

import pytest

from t2t_lite import registry
from t2t_lite.train import flops

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
spec = importlib.util.spec_from_file_location("matmul_peak", os.path.join(BENCH, "matmul_peak.py"))
matmul_peak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matmul_peak)


@pytest.mark.parametrize(
    "hparams_set, tokens, vocab",
    [("transformer_base", 512, 37000), ("transformer_tiny", 2048, 8000), ("transformer_big", 4096, 32000)],
)
def test_step_shapes_are_the_forward_and_backward_products_of_a_step(hparams_set, tokens, vocab):
    hparams = registry.hparams(hparams_set)
    shapes = matmul_peak.step_shapes(hparams, vocab, tokens)
    products = sum(count * 2 * m * k * n for _, m, k, n, _, _, count in shapes)
    # Forward and two backward products per weight matrix: 6 FLOPs per weight and token (§5 estimate).
    assert products == 6 * tokens * flops.matmul_parameters(hparams, vocab)
    for forward, weight_gradient, input_gradient in zip(shapes[0::3], shapes[1::3], shapes[2::3]):
        _, m, k, n, transposed_a, transposed_b, count = forward
        # Y = X·W [tokens, n]; dW = Xᵀ·dY has W's shape; dX = dY·Wᵀ has X's; equal counts.
        if forward[0].startswith("vocabulary"):  # h·Eᵀ: the weight is E [vocab, d], used transposed
            assert (m, k, n, transposed_a, transposed_b) == (tokens, hparams.hidden_size, vocab, False, True)
            assert weight_gradient[1:6] == (vocab, tokens, k, True, False)  # dE = dzᵀ·h
            assert input_gradient[1:6] == (tokens, vocab, k, False, False)  # dh = dz·E
        else:
            assert (m, transposed_a, transposed_b) == (tokens, False, False)
            assert weight_gradient[1:6] == (k, tokens, n, True, False)
            assert input_gradient[1:6] == (tokens, n, k, False, True)
        assert weight_gradient[6] == input_gradient[6] == count


def test_base_step_has_the_papers_products():
    shapes = matmul_peak.step_shapes(registry.hparams("transformer_base"), 37000, 512)
    counts = {name.split(",")[0].replace(" X·W", ""): count for name, *_, count in shapes}
    # 6 encoder layers × 1 attention + 6 decoder layers × 2, each with Q, K, V and O; 12 FFNs.
    assert counts == {
        "query and key projections": 36,
        "value projection": 18,
        "output projection": 18,
        "FFN inner": 12,
        "FFN outer": 12,
        "vocabulary projection h·Eᵀ": 1,
        "vocabulary": 1,
    }


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tokens=4096", "--xla"], "--xla, --tokens: only with --step_shapes"),
        (["--step_shapes", "--tokens=0"], "--tokens=0: must be a positive number"),
    ],
)
def test_misused_step_flags_are_named(argv, message, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["matmul_peak.py", *argv])
    with pytest.raises(SystemExit):
        matmul_peak.main()
    assert message in capsys.readouterr().err
