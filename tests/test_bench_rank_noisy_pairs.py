"""bench/rank_noisy_pairs.py: the noise pairs it makes and the two figures it reports."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import rank_noisy_pairs  # noqa: E402


@pytest.mark.parametrize("count", [2, 3, 50])
def test_every_mismatched_pair_takes_another_pairs_target(count):
    order = rank_noisy_pairs.derangement(count, np.random.default_rng(count))
    assert sorted(order) == list(range(count)) and not np.any(order == np.arange(count))


def test_figures_count_the_top_half_and_the_chance_a_true_pair_outranks_a_mismatched_one():
    is_true = np.array([True, True, True, False, False, False])
    # True scores 5, 3, 1; mismatched 4, 2, 0: the top three hold two true pairs, and of the nine
    # (true, mismatched) comparisons the true pair wins 3 + 2 + 1 = 6.
    top, auc = rank_noisy_pairs.ranking_figures(np.array([5.0, 3.0, 1.0, 4.0, 2.0, 0.0]), is_true)
    assert top == 2 and auc == pytest.approx(6 / 9)
    top, auc = rank_noisy_pairs.ranking_figures(np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), is_true)
    assert auc == pytest.approx(0.5)  # ties count half
