"""§3.4: embeddings multiplied by √d_model, one matrix shared with the pre-softmax projection."""

import numpy as np

from t2t_lite.model.embedding import SharedEmbedding


def test_embedding_scaled_by_sqrt_d_model_and_padding_is_zero():
    layer = SharedEmbedding(vocab_size=10, hidden_size=16)
    out = np.asarray(layer(np.array([[3, 0]])))
    matrix = np.asarray(layer.embeddings)
    np.testing.assert_allclose(out[0, 0], matrix[3] * 4.0, rtol=1e-6)
    assert np.all(out[0, 1] == 0.0)


def test_logits_use_the_same_matrix_transposed():
    layer = SharedEmbedding(vocab_size=10, hidden_size=16)
    layer.build()
    hidden = np.random.default_rng(0).normal(size=(2, 16)).astype("float32")
    np.testing.assert_allclose(layer.logits(hidden), hidden @ np.asarray(layer.embeddings).T, rtol=1e-5, atol=1e-6)
