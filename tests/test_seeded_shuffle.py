"""A tensor seed shuffles as the same integer seed does, under any global seed (0 included)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.data import seeded_shuffle

SEED_MODULUS = 2**31 - 1
SEEDS = (0, 5, SEED_MODULUS, SEED_MODULUS + 5)  # 0 and the modulus: the pair TensorFlow remaps away from (0, 0)


def integer_seed_orders(seeds):
    """Dataset.shuffle with each Python integer seed: TensorFlow's own order for it."""
    return [list(tf.data.Dataset.range(20).shuffle(20, seed=seed).as_numpy_iterator()) for seed in seeds]


def tensor_seed_orders(seeds, shuffle):
    """The same seeds as tensors inside flat_map, as the trainer's epochs have them."""
    seeds = tf.data.Dataset.from_tensor_slices(tf.constant(seeds, tf.int64))
    flat = seeds.flat_map(lambda seed: shuffle(tf.data.Dataset.range(20), 20, seed))
    return np.split(np.array(list(flat.as_numpy_iterator())), len(SEEDS))


@pytest.mark.parametrize("global_seed", [0, SEED_MODULUS, 1])
def test_a_tensor_seed_gives_the_integer_seeds_order(global_seed):
    keras.utils.set_random_seed(global_seed % 2**32)
    want = integer_seed_orders(SEEDS)
    assert len({tuple(order) for order in want}) == len(SEEDS) - 2  # s and s + modulus: one seed
    got = tensor_seed_orders(SEEDS, seeded_shuffle.shuffle)
    assert [order.tolist() for order in got] == want


def test_dataset_shuffle_itself_fails_there_and_is_used_unchanged_elsewhere():
    keras.utils.set_random_seed(0)
    with pytest.raises(TypeError, match="bool"):  # TensorFlow 2.21: a symbolic tensor asked for a truth value
        tensor_seed_orders(SEEDS, lambda dataset, size, seed: dataset.shuffle(size, seed=seed))
    keras.utils.set_random_seed(3)
    unchanged = tensor_seed_orders(SEEDS, lambda dataset, size, seed: dataset.shuffle(size, seed=seed))
    assert [order.tolist() for order in unchanged] == [
        order.tolist() for order in tensor_seed_orders(SEEDS, seeded_shuffle.shuffle)
    ]


def test_every_element_once_with_the_dataset_s_structure():
    keras.utils.set_random_seed(0)
    pairs = tf.data.Dataset.from_tensor_slices({"a": tf.range(6), "b": tf.strings.as_string(tf.range(6))})
    flat = tf.data.Dataset.range(1).flat_map(lambda seed: seeded_shuffle.shuffle(pairs, 6, seed + 7))
    assert flat.element_spec == pairs.element_spec
    got = list(flat.as_numpy_iterator())
    assert sorted(int(element["a"]) for element in got) == list(range(6))
    assert all(element["b"].decode() == str(element["a"]) for element in got)
