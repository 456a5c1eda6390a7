"""§5.4 dropout: each element kept with probability 1 − P_drop and scaled by 1/(1 − P_drop),
independently of the others and of the previous call, whichever generator draws the mask."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.model.dropout import Dropout, SymbolDropout, compiled_by_xla, drop_threshold, hash_dropout, mix


def lowbias32(value: int) -> int:
    """C. Wellons' lowbias32, written out on Python integers."""
    value ^= value >> 16
    value = (value * 0x7FEB352D) & 0xFFFFFFFF
    value ^= value >> 15
    value = (value * 0x846CA68B) & 0xFFFFFFFF
    return value ^ (value >> 16)


def under_xla(layer, x):
    return tf.function(lambda x: layer(x, training=True), jit_compile=True)(x).numpy()


def five_sigma(probability, n):
    return 5 * np.sqrt(probability * (1 - probability) / n)


def test_mix_is_lowbias32():
    values = [0, 1, 2, 12345, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, 0xFFFFFFFF]
    mixed = keras.ops.convert_to_numpy(mix(keras.ops.convert_to_tensor(np.array(values, np.uint32))))
    assert mixed.tolist() == [lowbias32(value) for value in values]


def test_threshold_drops_a_rate_fraction_of_32_bit_integers():
    assert drop_threshold(0.5) == 2**31
    assert drop_threshold(0.1) == round(0.1 * 2**32)
    assert drop_threshold(0.0) == 0


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_hash_masks_keep_each_element_with_probability_one_minus_rate(rate):
    x = np.ones((512, 512), np.float32)
    y = keras.ops.convert_to_numpy(hash_dropout(x, rate, np.array([7, 0], np.int64)))
    kept = y != 0
    assert abs(kept.mean() - (1 - rate)) < five_sigma(1 - rate, kept.size)
    np.testing.assert_allclose(y[kept], 1 / (1 - rate), rtol=1e-6)
    # Rows and columns alike: no position is favoured.
    assert abs(kept.mean(axis=0).std() - np.sqrt(rate * (1 - rate) / 512)) < 0.01
    assert abs(kept.mean(axis=1).std() - np.sqrt(rate * (1 - rate) / 512)) < 0.01


def correlation(a, b):
    return np.corrcoef(a.ravel().astype(np.float64), b.ravel().astype(np.float64))[0, 1]


def test_xla_masks_are_independent_across_positions_and_calls():
    layer = Dropout(0.1, seed=3)
    x = tf.ones((64, 32, 128))
    first, second = under_xla(layer, x) != 0, under_xla(layer, x) != 0
    n = first.size
    bound = 5 / np.sqrt(n)
    assert (first != second).any()
    assert abs(correlation(first, second)) < bound
    assert abs(correlation(first[..., 1:], first[..., :-1])) < bound  # neighbouring channels
    assert abs(correlation(first[:, 1:], first[:, :-1])) < bound  # neighbouring positions
    assert abs(correlation(first[1:], first[:-1])) < bound  # neighbouring sentences


def test_under_xla_the_layer_draws_hash_masks_from_its_seed_generator():
    layer = Dropout(0.2, seed=11)
    x = tf.random.stateless_normal((4, 6, 16), seed=[1, 2])
    seed = layer.seed_generator.state.numpy()
    expected = keras.ops.convert_to_numpy(hash_dropout(x, 0.2, seed))
    np.testing.assert_allclose(under_xla(layer, x), expected, rtol=1e-6)
    assert (layer.seed_generator.state.numpy() != seed).any(), "each call must advance the seed"


def test_xla_mask_is_the_documented_hash_of_index_and_seed():
    """Kept iff h(i, s) = mix(mix(i ⊕ s₀) ⊕ s₁) ≥ round(P_drop · 2³²), kept values scaled by 1/(1 − P_drop)."""
    layer = Dropout(0.2, seed=11)
    x = tf.random.stateless_normal((4, 6, 16), seed=[1, 2]).numpy() + 10.0  # never 0
    s0, s1 = (int(value) & 0xFFFFFFFF for value in layer.seed_generator.state.numpy()[:2])
    threshold = round(0.2 * 2**32)
    keep = np.array([lowbias32(lowbias32(i ^ s0) ^ s1) >= threshold for i in range(x.size)]).reshape(x.shape)
    got = under_xla(layer, x)
    np.testing.assert_array_equal(got != 0, keep)
    np.testing.assert_allclose(got[keep], x[keep] / 0.8, rtol=1e-6)


def test_without_xla_the_layer_is_keras_dropout():
    ours, theirs = Dropout(0.3, seed=5), keras.layers.Dropout(0.3, seed=5)
    x = tf.random.stateless_normal((8, 10, 16), seed=[3, 4])
    for _ in range(2):
        np.testing.assert_array_equal(ours(x, training=True).numpy(), theirs(x, training=True).numpy())
    assert not compiled_by_xla()


def test_gradient_is_the_mask_over_the_keep_probability():
    layer = Dropout(0.25, seed=2)
    x = tf.random.stateless_normal((16, 64), seed=[5, 6])

    @tf.function(jit_compile=True)
    def value_and_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            total = tf.reduce_sum(y)
        return y, tape.gradient(total, x)

    y, gradient = value_and_gradient(x)
    kept = y.numpy() != 0
    np.testing.assert_allclose(gradient.numpy(), np.where(kept, 1 / 0.75, 0.0), rtol=1e-6)


def test_identity_outside_training_and_at_rate_zero():
    x = tf.random.stateless_normal((3, 5), seed=[7, 8])
    np.testing.assert_array_equal(Dropout(0.5)(x, training=False).numpy(), x.numpy())
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True).numpy(), x.numpy())


def test_a_rate_outside_zero_one_names_the_hparams():
    with pytest.raises(ValueError, match="dropout hparams"):
        Dropout(1.0)


@pytest.mark.parametrize("xla", [False, True])
def test_symbol_dropout_turns_a_fraction_rate_of_ids_into_padding_and_keeps_the_rest(xla):
    rate, n = 0.1, 200_000
    ids = np.arange(1, n + 1, dtype=np.int32).reshape(400, 500)
    layer = SymbolDropout(rate, seed=5)
    dropped_ids = under_xla(layer, ids) if xla else layer(ids, training=True).numpy()
    dropped = dropped_ids == 0
    assert abs(dropped.mean() - rate) < five_sigma(rate, n)
    np.testing.assert_array_equal(dropped_ids[~dropped], ids[~dropped])  # kept ids unchanged, not rescaled


def test_symbol_dropout_draws_new_words_each_call_and_none_outside_training():
    ids = np.arange(1, 10_001, dtype=np.int32).reshape(100, 100)
    layer = SymbolDropout(0.2, seed=1)
    first, second = (layer(ids, training=True).numpy() == 0 for _ in range(2))
    assert (first != second).any()
    np.testing.assert_array_equal(layer(ids, training=False), ids)
    np.testing.assert_array_equal(SymbolDropout(0.0)(ids, training=True), ids)
