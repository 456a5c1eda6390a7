"""The smoothed cross-entropy of §5.4 against dense numpy soft targets and against Keras."""

import keras
import numpy as np
import pytest

from t2t_lite.train import loss

VOCAB = 11


def dense_smoothed_cross_entropy(logits, targets, epsilon):
    """Independent reference: build tensor2tensor's soft targets explicitly (one-hot, numpy)."""
    soft = np.full(logits.shape, epsilon / (logits.shape[-1] - 1))
    np.put_along_axis(soft, targets[..., None], 1.0 - epsilon, axis=-1)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    per_token = -(soft * log_probs).sum(-1)
    real = targets != 0
    return per_token[real].sum() / real.sum(), -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0][real]


def random_batch(seed, batch=3, length=5):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(batch, length, VOCAB)).astype("float32") * 3
    targets = rng.integers(1, VOCAB, size=(batch, length)).astype("int32")
    targets[0, 3:] = 0  # padding at the end of the first sequence
    targets[2, 1:] = 0
    return logits, targets


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_matches_dense_soft_targets(epsilon):
    logits, targets = random_batch(0)
    loss_sum, nll_sum, tokens = loss.padded_cross_entropy(logits, targets, epsilon)
    expected_loss, expected_nll = dense_smoothed_cross_entropy(logits.astype("float64"), targets, epsilon)
    assert float(tokens) == (targets != 0).sum()
    np.testing.assert_allclose(float(loss_sum) / float(tokens), expected_loss, rtol=1e-5)
    np.testing.assert_allclose(float(nll_sum), expected_nll.sum(), rtol=1e-5)


def test_matches_keras_categorical_crossentropy_where_they_coincide():
    # Keras smooths to (1-ε_k)·onehot + ε_k/V: that is ε = ε_k·(V-1)/V in tensor2tensor's form.
    logits, targets = random_batch(1)
    keras_epsilon = 0.2
    real = targets != 0
    reference = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=keras_epsilon)(
        keras.ops.one_hot(targets[real], VOCAB), logits[real]
    )
    loss_sum, _, tokens = loss.padded_cross_entropy(logits, targets, keras_epsilon * (VOCAB - 1) / VOCAB)
    np.testing.assert_allclose(float(loss_sum) / float(tokens), float(reference), rtol=1e-5)


def test_padding_does_not_change_the_loss():
    logits, targets = random_batch(2)
    loss_sum, nll_sum, tokens = loss.padded_cross_entropy(logits, targets, 0.1)
    # Longer padding, with arbitrary logits at the padded positions.
    rng = np.random.default_rng(3)
    padded_logits = np.concatenate([logits, rng.normal(size=(3, 4, VOCAB)).astype("float32") * 50], axis=1)
    padded_targets = np.concatenate([targets, np.zeros((3, 4), "int32")], axis=1)
    padding = padded_targets == 0
    padded_logits[padding] = rng.normal(size=padded_logits[padding].shape) * 50
    padded = loss.padded_cross_entropy(padded_logits, padded_targets, 0.1)
    np.testing.assert_allclose([float(x) for x in padded], [float(loss_sum), float(nll_sum), float(tokens)], rtol=1e-6)


def test_eval_metrics_count_tokens_and_whole_sequences():
    targets = np.array([[3, 4, 1, 0], [5, 6, 1, 0]], "int32")
    logits = np.full((2, 4, VOCAB), -5.0, "float32")
    np.put_along_axis(logits, targets[..., None], 5.0, axis=-1)
    logits[1, 1, 6] = -5.0  # the second sequence gets one token wrong
    logits[:, 3, 7] = 50.0  # a wrong argmax at padding counts for nothing
    metrics = loss.eval_metrics(loss.eval_sums(logits, targets, 0.1))
    assert metrics["accuracy"] == pytest.approx(5 / 6)
    assert metrics["accuracy_per_sequence"] == pytest.approx(1 / 2)
    expected_loss, nll = dense_smoothed_cross_entropy(logits.astype(np.float64), targets, 0.1)
    assert metrics["loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert metrics["neg_log_perplexity"] == pytest.approx(-nll.mean(), rel=1e-5)  # over the 6 real tokens
    assert metrics["perplexity"] == pytest.approx(np.exp(nll.mean()), rel=1e-5)


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_gradient_is_softmax_minus_the_smoothed_target(epsilon):
    # d/dz of the cross-entropy against a soft target q is softmax(z) - q (per real token).
    import tensorflow as tf

    logits, targets = random_batch(4)
    soft = np.full(logits.shape, epsilon / (VOCAB - 1))
    np.put_along_axis(soft, targets[..., None], 1.0 - epsilon, axis=-1)
    one_hot = np.zeros(logits.shape)
    np.put_along_axis(one_hot, targets[..., None], 1.0, axis=-1)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    real = (targets != 0)[..., None]
    variable = tf.Variable(logits)
    with tf.GradientTape(persistent=True) as tape:
        loss_sum, nll_sum, _ = loss.padded_cross_entropy(variable, targets, epsilon)
        mixed = 2.0 * loss_sum + 3.0 * nll_sum  # both outputs' gradients flow together
    np.testing.assert_allclose(tape.gradient(loss_sum, variable), (probs - soft) * real, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(nll_sum, variable), (probs - one_hot) * real, atol=1e-6)
    np.testing.assert_allclose(
        tape.gradient(mixed, variable), (2 * (probs - soft) + 3 * (probs - one_hot)) * real, atol=1e-5
    )
