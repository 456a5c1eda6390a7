"""bench/input_dependence.py: the NLL against a hand log-softmax, and a collapsed encoder read as one."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import input_dependence  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402

VOCAB = 20


def random_pairs(count, seed):
    rng = np.random.default_rng(seed)
    return [
        (
            np.append(rng.integers(3, VOCAB, rng.integers(2, 7)), 1).astype(np.int32),
            np.append(rng.integers(3, VOCAB, rng.integers(1, 6)), 1).astype(np.int32),
        )
        for _ in range(count)
    ]


@pytest.fixture(scope="module")
def model():
    hparams = registry.hparams("transformer_tiny").override(
        "hidden_size=16,filter_size=32,num_heads=2,num_hidden_layers=1,layer_prepostprocess_dropout=0.0"
    )
    return Transformer(hparams, vocab_size=VOCAB)


def test_the_nll_is_the_mean_gold_log_softmax_over_real_target_tokens(model):
    pairs = random_pairs(20, seed=1)  # two batches of BATCH = 16, the second part-full
    total, tokens = 0.0, 0
    for source, target in pairs:
        logits = model({"inputs": source[None], "targets": target[None]}).numpy()[0].astype(np.float64)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total -= log_probs[np.arange(len(target)), target].sum()
        tokens += len(target)
    assert input_dependence.nll_per_token(model, pairs) == pytest.approx(total / tokens, rel=1e-5)


def test_each_target_is_given_the_next_pairs_source_and_the_last_the_first():
    pairs = [("x0", "y0"), ("x1", "y1"), ("x2", "y2")]
    assert input_dependence.shifted(pairs) == [("x1", "y0"), ("x2", "y1"), ("x0", "y2")]


def test_a_model_whose_encoder_writes_one_vector_everywhere_does_not_depend_on_its_source(model):
    pairs = random_pairs(12, seed=2)
    # A random encoder reads its source: the shifted sources change the NLL, and its output varies.
    assert (
        abs(
            input_dependence.nll_per_token(model, input_dependence.shifted(pairs))
            - input_dependence.nll_per_token(model, pairs)
        )
        > 1e-3
    )
    assert input_dependence.encoder_spread(model, pairs) > 0.1
    # Post-LN: the encoder's last operation is its last layer norm; gamma 0 makes every position output beta.
    # Keras numbers a process's later models (transformer_1/...), so the path is matched by its end.
    last_norm = "encoder/layer_0/feed_forward_residual/layer_norm/"
    gamma, beta = ([w for w in model.weights if w.path.endswith(last_norm + name)][0] for name in ("gamma", "beta"))
    saved = gamma.numpy(), beta.numpy()
    try:
        gamma.assign(np.zeros_like(saved[0]))
        beta.assign(np.linspace(-1.0, 1.0, len(saved[1])).astype(np.float32))
        own = input_dependence.nll_per_token(model, pairs)
        assert input_dependence.nll_per_token(model, input_dependence.shifted(pairs)) == pytest.approx(own, abs=1e-6)
        assert input_dependence.encoder_spread(model, pairs) < 1e-6
    finally:
        gamma.assign(saved[0])
        beta.assign(saved[1])
