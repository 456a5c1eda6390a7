"""§3.1: LayerNorm(x + Sublayer(x)) (post, the paper) and x + Sublayer(LayerNorm(x)) (pre)."""

import numpy as np

from t2t_lite.model.sublayer import ResidualNorm


def layer_norm(x, epsilon=1e-6):
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon)


def test_post_norm_normalises_the_residual_sum():
    residual = ResidualNorm("post", dropout=0.0)
    residual.build((2, 3, 8))
    x, y = np.random.default_rng(0).normal(size=(2, 2, 3, 8)).astype("float32")
    assert np.allclose(residual.sublayer_input(x), x)
    np.testing.assert_allclose(residual(x, y), layer_norm(x + y), atol=1e-5)


def test_pre_norm_normalises_the_sublayer_input_only():
    residual = ResidualNorm("pre", dropout=0.0)
    residual.build((2, 3, 8))
    x, y = np.random.default_rng(1).normal(size=(2, 2, 3, 8)).astype("float32")
    np.testing.assert_allclose(residual.sublayer_input(x), layer_norm(x), atol=1e-5)
    np.testing.assert_allclose(residual(x, y), x + y, atol=1e-6)


def test_dropout_only_in_training():
    residual = ResidualNorm("pre", dropout=0.5)
    x = np.zeros((1, 4, 64), "float32")
    y = np.ones((1, 4, 64), "float32")
    np.testing.assert_allclose(residual(x, y, training=False), y)
    dropped = np.asarray(residual(x, y, training=True))
    assert 0.2 < (dropped == 0).mean() < 0.8 and np.allclose(dropped[dropped != 0], 2.0)
