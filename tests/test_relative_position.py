"""Relative position representations against Shaw et al. (2018): eq. 5's clipped distances by hand, eq. 3
and 4 as a numpy loop over positions, and what relative positions imply: a model without absolute
positions gives a sentence's words the same encoding wherever the sentence starts in a padded batch."""

import numpy as np
import pytest

from t2t_lite import registry
from t2t_lite.hparam import HParamsError
from t2t_lite.model.attention import MultiHeadAttention, causal_bias
from t2t_lite.model.relative_position import relation_indices
from t2t_lite.model.transformer import Transformer

RNG = np.random.default_rng(0)


def test_distances_are_clipped_to_plus_minus_k_and_shifted_to_table_rows():
    # Row r of a table is distance r - k; key j minus query i, clipped to ±2, for 5 positions.
    expected = np.array(
        [
            [2, 3, 4, 4, 4],
            [1, 2, 3, 4, 4],
            [0, 1, 2, 3, 4],
            [0, 0, 1, 2, 3],
            [0, 0, 0, 1, 2],
        ]
    )
    np.testing.assert_array_equal(relation_indices(np.arange(5), np.arange(5), 2), expected)
    # One decoding step at position 3 against keys 0..3: the last row of the causal matrix.
    np.testing.assert_array_equal(relation_indices(np.array([3]), np.arange(4), 2), [[0, 0, 1, 2]])


def numpy_relative_self_attention(x, w_q, w_k, w_v, w_o, table_k, table_v, heads, k, allowed):
    """Eq. 3-5 of Shaw et al. written as loops over heads, i and j."""
    length, depth = x.shape[0], w_q.shape[1] // heads
    outputs = []
    for head in range(heads):
        q = x @ w_q[:, head * depth : (head + 1) * depth]
        keys = x @ w_k[:, head * depth : (head + 1) * depth]
        values = x @ w_v[:, head * depth : (head + 1) * depth]
        z = np.zeros((length, depth))
        for i in range(length):
            row = [int(np.clip(j - i, -k, k)) + k for j in range(length)]
            e = np.array([q[i] @ (keys[j] + table_k[row[j]]) / np.sqrt(depth) for j in range(length)])
            e = np.where(allowed[i], e, -np.inf)
            alpha = np.exp(e - e.max())
            alpha /= alpha.sum()
            z[i] = sum(alpha[j] * (values[j] + table_v[row[j]]) for j in range(length))
        outputs.append(z)
    return np.concatenate(outputs, -1) @ w_o


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_self_attention_is_equations_3_to_5(causal):
    length, k = 6, 2  # distances up to ±5 clipped to ±2
    layer = MultiHeadAttention(num_heads=2, key_channels=8, value_channels=8, output_size=8, max_relative_position=k)
    x = RNG.normal(size=(1, length, 8)).astype("float32")
    layer.build(x.shape)
    # Random tables, so that every row matters (the initial ones are random too, but say so).
    layer.relative_positions.keys.assign(RNG.normal(size=(2 * k + 1, 4)))
    layer.relative_positions.values.assign(RNG.normal(size=(2 * k + 1, 4)))
    allowed = np.tril(np.ones((length, length), bool)) if causal else np.ones((length, length), bool)
    output, _, _ = layer(x, bias=causal_bias(length) if causal else None)
    weights = [
        np.asarray(w)
        for w in (
            layer.query_projection.kernel,
            layer.key_projection.kernel,
            layer.value_projection.kernel,
            layer.output_projection.kernel,
            layer.relative_positions.keys,
            layer.relative_positions.values,
        )
    ]
    expected = numpy_relative_self_attention(x[0], *weights, heads=2, k=k, allowed=allowed)
    np.testing.assert_allclose(output[0], expected, atol=1e-5)


def test_the_tables_are_shared_by_the_heads_one_pair_per_self_attention_layer():
    hp = registry.hparams("transformer_relative_tiny")
    model = Transformer(hp, vocab_size=50)
    tables = [v for v in model.weights if "relative_positions" in v.path]
    # 2 encoder + 2 decoder self-attention layers, keys and values each: [2k + 1, d_k = 128 / 4].
    assert len(tables) == 8 and all(tuple(v.shape) == (41, 32) for v in tables)
    assert not any("encoder_decoder_attention" in v.path for v in tables)
    assert {"relative_positions_keys", "relative_positions_values"} == {v.name for v in tables}


def test_without_absolute_positions_a_shifted_sentence_encodes_the_same():
    """pos=none: only differences of positions enter the model, so a sentence padded on the left encodes
    its words exactly as unpadded (padding keys masked; the distances between real words unchanged).
    With absolute sinusoids added, the same shift changes the encoding."""

    def encodings(**changes):
        hp = registry.hparams("transformer_relative_tiny").replace(hidden_size=32, filter_size=64, **changes)
        model = Transformer(hp, vocab_size=50)
        sentence = np.array([[5, 9, 3, 7, 1]], "int32")
        shifted = np.pad(sentence, ((0, 0), (3, 0)))
        return np.asarray(model.encode(sentence)[0])[0], np.asarray(model.encode(shifted)[0])[0, 3:]

    plain, shifted = encodings()
    np.testing.assert_allclose(shifted, plain, atol=1e-5)
    plain, shifted = encodings(pos="timing")
    assert not np.allclose(shifted, plain, atol=1e-3)


@pytest.mark.parametrize("value", [0, -3])
def test_max_relative_position_below_1_is_refused_by_name(value):
    with pytest.raises(HParamsError, match=rf"hparam max_relative_position={value}: must be at least 1"):
        registry.hparams("transformer_relative").override(f"max_relative_position={value}")


def test_an_unknown_self_attention_type_names_the_valid_ones():
    with pytest.raises(HParamsError, match=r"self_attention_type='relative': must be one of .*dot_product_relative"):
        registry.hparams("transformer_base").replace(self_attention_type="relative")
