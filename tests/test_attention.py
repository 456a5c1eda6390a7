"""Eq. 1 and §3.2.2 against a numpy transcription of the paper, and masking by perturbation."""

import numpy as np

from t2t_lite.model.attention import MultiHeadAttention, causal_bias, padding_bias, scaled_dot_product_attention

RNG = np.random.default_rng(0)


def numpy_attention(q, k, v, allowed=None):
    """softmax(Q Kᵀ / √d_k) V, written from eq. 1."""
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ v, weights


def test_equation_1():
    q, k, v = (RNG.normal(size=(2, 3, 5, 8)).astype("float32") for _ in range(3))
    output, weights = scaled_dot_product_attention(q, k, v)
    expected_output, expected_weights = numpy_attention(q, k, v)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-5)
    np.testing.assert_allclose(output, expected_output, atol=1e-5)


def test_padding_and_causal_bias_give_zero_weight():
    q, k, v = (RNG.normal(size=(1, 1, 4, 8)).astype("float32") for _ in range(3))
    mask = np.array([[True, True, True, False]])
    _, weights = scaled_dot_product_attention(q, k, v, padding_bias(mask) + causal_bias(4))
    allowed = np.tril(np.ones((4, 4), bool)) & mask[:, None, None, :]
    _, expected = numpy_attention(q, k, v, allowed)
    np.testing.assert_allclose(weights, expected, atol=1e-6)
    assert np.all(np.asarray(weights)[0, 0][~allowed[0, 0]] == 0.0)


def test_multi_head_is_concat_of_heads_then_output_projection():
    layer = MultiHeadAttention(num_heads=2, key_channels=8, value_channels=6, output_size=10)
    x = RNG.normal(size=(1, 3, 10)).astype("float32")
    memory = RNG.normal(size=(1, 4, 10)).astype("float32")
    output, _, _ = layer(x, memory)
    w_q, w_k, w_v, w_o = (
        np.asarray(p.kernel)
        for p in (layer.query_projection, layer.key_projection, layer.value_projection, layer.output_projection)
    )
    heads = []
    for head in range(2):
        q = x @ w_q[:, head * 4 : (head + 1) * 4]
        k = memory @ w_k[:, head * 4 : (head + 1) * 4]
        v = memory @ w_v[:, head * 3 : (head + 1) * 3]
        heads.append(numpy_attention(q, k, v)[0])
    np.testing.assert_allclose(output, np.concatenate(heads, -1) @ w_o, atol=1e-5)
    assert all(
        not p.use_bias
        for p in (layer.query_projection, layer.key_projection, layer.value_projection, layer.output_projection)
    )


def test_memory_shared_by_groups_of_query_rows_is_attention_per_row():
    """memory_kv with one row per sentence serves that sentence's 3 beams, with its padding mask."""
    layer = MultiHeadAttention(num_heads=2, key_channels=8, value_channels=6, output_size=10)
    queries = RNG.normal(size=(6, 2, 10)).astype("float32")  # 2 sentences × 3 beams, 2 positions
    memory = RNG.normal(size=(2, 5, 10)).astype("float32")
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    layer(queries[:1], memory[:1])  # builds the projections
    shared = layer.project_memory(memory)
    output, weights, _ = layer(queries, memory_kv=shared, bias=padding_bias(mask), return_weights=True)
    for row in range(6):
        sentence = row // 3
        expected, expected_weights, _ = layer(
            queries[row : row + 1],
            memory[sentence : sentence + 1],
            bias=padding_bias(mask[sentence : sentence + 1]),
            return_weights=True,
        )
        np.testing.assert_allclose(output[row], expected[0], atol=1e-5)
        np.testing.assert_allclose(weights[row], expected_weights[0], atol=1e-6)
    assert np.all(np.asarray(weights)[3:, :, :, 3:] == 0.0)  # sentence 1's padding


def test_only_decoding_groups_query_rows(monkeypatch):
    """Training and scoring attend row by row: the regrouping of a sentence's beams onto one row of keys is
    decoding's alone (in a one-layer train step it traced a sixth more ops)."""
    from t2t_lite.model import attention

    layer = MultiHeadAttention(num_heads=2, key_channels=8, value_channels=6, output_size=10)
    x = RNG.normal(size=(2, 3, 10)).astype("float32")
    memory = RNG.normal(size=(2, 4, 10)).astype("float32")
    layer(x, memory)  # builds the projections
    grouped_calls, regroup = [], attention._shared_memory_attention

    def counted(*args, **kwargs):
        grouped_calls.append(1)
        return regroup(*args, **kwargs)

    monkeypatch.setattr(attention, "_shared_memory_attention", counted)
    layer(x, training=True)
    layer(x, memory, training=True)
    assert grouped_calls == []
    layer(x, memory_kv=layer.project_memory(memory))  # decoding's encoder-decoder attention
    assert grouped_calls == [1]
