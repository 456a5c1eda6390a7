"""Attention heat-maps are written per kind, layer and head, as PNG files."""

import numpy as np
import pytest

from t2t_lite.insights.attention_plot import plot_attention

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def random_weights(heads, queries, keys, seed):
    weights = np.random.default_rng(seed).random((heads, queries, keys))
    return weights / weights.sum(-1, keepdims=True)


def test_writes_one_png_per_kind_layer_and_head(tmp_path):
    source, target = ["▁Die", "▁Katze", "</s>"], ["▁The", "▁cat", "▁sat", "</s>"]
    attention = {
        "encoder_self": [random_weights(2, 3, 3, seed) for seed in range(2)],
        "decoder_self": [np.tril(random_weights(2, 4, 4, seed)) for seed in range(2)],
        "encoder_decoder": [random_weights(2, 4, 3, seed) for seed in range(2)],
    }
    paths = plot_attention(source, target, attention, str(tmp_path / "pngs"))
    assert len(paths) == 3 * 2 * 2
    assert sorted(path.name for path in (tmp_path / "pngs").iterdir()) == sorted(
        f"{kind}_layer{layer}_head{head}.png" for kind in attention for layer in range(2) for head in range(2)
    )
    for path in paths:
        with open(path, "rb") as file:
            assert file.read(8) == PNG_SIGNATURE


def test_a_subset_and_a_shape_that_does_not_fit_the_tokens(tmp_path):
    attention = {"encoder_decoder": [random_weights(4, 2, 3, seed=0)]}
    paths = plot_attention(["a", "b", "c"], ["x", "y"], attention, str(tmp_path), heads=[1, 3])
    assert [path.rsplit("/", 1)[1] for path in paths] == [
        "encoder_decoder_layer0_head1.png",
        "encoder_decoder_layer0_head3.png",
    ]
    with pytest.raises(ValueError, match=r"encoder_decoder layer 0: .* \[heads, 3 query tokens, 3 key tokens\]"):
        plot_attention(["a", "b", "c"], ["x", "y", "z"], attention, str(tmp_path))
