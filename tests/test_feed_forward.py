"""Eq. 2: FFN(x) = max(0, x W1 + b1) W2 + b2."""

import numpy as np

from t2t_lite.model.feed_forward import FeedForward


def test_equation_2():
    layer = FeedForward(filter_size=12, hidden_size=6)
    x = np.random.default_rng(0).normal(size=(2, 3, 6)).astype("float32")
    out = layer(x)
    w1, b1 = np.asarray(layer.inner.kernel), np.asarray(layer.inner.bias)
    w2, b2 = np.asarray(layer.outer.kernel), np.asarray(layer.outer.bias)
    np.testing.assert_allclose(out, np.maximum(0, x @ w1 + b1) @ w2 + b2, atol=1e-5)
