"""Chunked top-k against tf.math.top_k: the same values and indices, ties and -inf included."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.decode import top_k


@pytest.mark.parametrize("seed", range(6))
def test_chunked_top_k_is_exactly_top_k_ties_and_minus_infinity_included(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        rows, k, chunk_size = int(rng.integers(1, 5)), int(rng.integers(1, 9)), int(rng.integers(1, 40))
        n = int(rng.integers(k, 3000))
        scores = rng.integers(-3, 3, size=(rows, n)).astype(np.float32)  # few distinct values: many ties
        scores[rng.random(scores.shape) < 0.3] = -np.inf
        values, indices = top_k.chunked_top_k(tf.constant(scores), k, chunk_size=chunk_size)
        expected_values, expected_indices = tf.math.top_k(scores, k=k)
        np.testing.assert_array_equal(values.numpy(), expected_values.numpy())
        np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())


@pytest.mark.parametrize("seed", range(6))
def test_offset_top_k_is_exactly_top_k_of_the_sum_ties_and_minus_infinity_included(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        rows, groups, k, chunk_size = (
            int(rng.integers(1, 4)),
            int(rng.integers(1, 5)),
            int(rng.integers(1, 9)),
            int(rng.integers(2, 40)),
        )
        # Half the draws have a chunk size near chunk_size that divides n (the path without the sum).
        n = chunk_size * int(rng.integers(k, 60)) if rng.random() < 0.5 else int(rng.integers(k, 2000))
        scores = rng.integers(-3, 3, size=(rows, groups, n)).astype(np.float32) / 4  # few values: many ties
        scores[rng.random(scores.shape) < 0.3] = -np.inf
        offsets = rng.integers(-2, 2, size=(rows, groups)).astype(np.float32) / 4
        offsets[rng.random(offsets.shape) < 0.2] = -np.inf  # beams that are no longer alive
        values, indices = top_k.offset_top_k(tf.constant(scores), tf.constant(offsets), k, chunk_size=chunk_size)
        expected_values, expected_indices = tf.math.top_k((scores + offsets[:, :, None]).reshape(rows, -1), k=k)
        np.testing.assert_array_equal(values.numpy(), expected_values.numpy())
        np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
