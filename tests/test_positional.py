"""§3.5: the sinusoid table equals PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""

import math

import numpy as np

from t2t_lite.model.positional import PositionEncoding, sinusoid_table


def test_sinusoid_table_is_the_formula():
    length, depth = 50, 16
    table = np.asarray(sinusoid_table(np.arange(length), depth))
    for pos in range(length):
        for i in range(depth // 2):
            angle = pos / 10000 ** (2 * i / depth)
            assert math.isclose(table[pos, 2 * i], math.sin(angle), abs_tol=1e-5)
            assert math.isclose(table[pos, 2 * i + 1], math.cos(angle), abs_tol=1e-5)


def test_offset_start_is_a_later_position():
    layer = PositionEncoding(8)
    x = np.zeros((1, 1, 8), "float32")
    np.testing.assert_allclose(layer(x, start=7)[0, 0], sinusoid_table(np.arange(8), 8)[7], atol=1e-6)


def test_learned_positions_are_trainable_weights():
    layer = PositionEncoding(8, kind="emb", max_positions=20)
    x = np.zeros((2, 5, 8), "float32")
    out = np.asarray(layer(x))
    np.testing.assert_allclose(out[0], np.asarray(layer.table)[:5])
    assert len(layer.trainable_weights) == 1


def test_no_positions_leave_the_embeddings_unchanged_and_add_no_weight():
    """pos=none (tensor2tensor's transformer_relative: positions enter only through relative self-attention)."""
    layer = PositionEncoding(8, "none", 16)
    layer.build()
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    np.testing.assert_array_equal(layer(x, start=3), x)
    assert layer.weights == []
