"""Label-smoothed cross-entropy over non-padding target tokens (§5.4, "Label Smoothing").

The paper trains with label smoothing of value ε_ls = 0.1. As in tensor2tensor, the
smoothed target puts confidence 1 - ε on the gold token and ε / (V - 1) on each of the
other V - 1 tokens, so for a token with logits z and gold index g

    loss = -(1-ε)·log p_g - ε/(V-1)·Σ_{j≠g} log p_j,      log p_j = z_j - logsumexp(z)
         = -[(1-ε-ε/(V-1))·(z_g - lse) + ε/(V-1)·(Σ_j z_j - V·lse)].

The second line needs only the gold logit, the sum of the logits and their logsumexp,
so no one-hot (or smoothed) tensor of the whole vocabulary is built per token.
tensor2tensor also subtracts the (constant) entropy of the smoothed target so that a
perfect model scores 0; we report the cross-entropy itself, as Keras'
`CategoricalCrossentropy` does, which changes no gradient.

Losses are *summed* over non-padding target tokens (id 0 is padding) and divided by
their count, never averaged over padding. The functions here return sums and counts so
that gradient accumulation and several replicas can divide by the count of the whole
step (see `t2t_lite/train/trainer.py`). Written with `keras.ops`, so it is backend-neutral.
"""

import math

from keras import ops

PADDING_ID = 0


def token_cross_entropies(logits, targets, label_smoothing):
    """Per-token smoothed cross-entropy and plain negative log-likelihood.

    Args:
      logits: float [..., vocab] (cast to float32 here).
      targets: int [...], gold ids.
      label_smoothing: ε_ls, a Python float in [0, 1).

    Returns:
      (smoothed, nll), both float32 [...]; padding positions are not masked here.
    """
    logits = ops.cast(logits, "float32")
    shape = ops.shape(targets)
    vocab_size = ops.shape(logits)[-1]
    both = _smoothed_and_nll(
        ops.reshape(logits, (-1, vocab_size)), ops.reshape(ops.cast(targets, "int32"), (-1,)), label_smoothing
    )
    return ops.reshape(both[:, 0], shape), ops.reshape(both[:, 1], shape)


def _smoothed_and_nll(logits, targets, label_smoothing):
    """[tokens, vocab] logits, [tokens] ids -> [tokens, 2]: (smoothed loss, NLL), with a hand-written gradient.

    Automatic differentiation of the formula above would scatter the gold logits' gradient
    into a zero tensor of the logits' size and add several more full-size passes (time and
    memory: docs/benchmarks.md, Training); the derivative of a cross-entropy against the
    smoothed target q is simply softmax(z) - q, written here in one pass plus an update of the
    gold positions:

        ∂smoothed/∂z_j = p_j - ε/(V-1) - [j = g]·(1 - ε - ε/(V-1)),    ∂nll/∂z_j = p_j - [j = g].
    """
    vocab_size = ops.shape(logits)[-1]
    low = label_smoothing / ops.cast(vocab_size - 1, "float32")
    gold_weight = 1.0 - label_smoothing - low
    rows = ops.stack([ops.arange(ops.shape(targets)[0], dtype="int32"), targets], axis=1)

    @ops.custom_gradient
    def smoothed_and_nll(logits):
        log_normalizer = ops.logsumexp(logits, axis=-1)
        gold_logit = ops.squeeze(ops.take_along_axis(logits, ops.expand_dims(targets, -1), axis=-1), -1)
        nll = log_normalizer - gold_logit
        sum_log_probs = ops.sum(logits, axis=-1) - ops.cast(vocab_size, "float32") * log_normalizer
        smoothed = gold_weight * nll - low * sum_log_probs

        def gradient(*args, upstream=None):
            if upstream is None:  # the TensorFlow backend passes it positionally, JAX by name
                (upstream,) = args
            smoothed_grad, nll_grad = upstream[:, 0], upstream[:, 1]
            probs = ops.exp(logits - ops.expand_dims(log_normalizer, -1))
            grad = probs * ops.expand_dims(smoothed_grad + nll_grad, -1) - ops.expand_dims(low * smoothed_grad, -1)
            gold_grad = (
                ops.exp(gold_logit - log_normalizer) * (smoothed_grad + nll_grad)
                - low * smoothed_grad
                - gold_weight * smoothed_grad
                - nll_grad
            )
            return ops.scatter_update(grad, rows, gold_grad)

        return ops.stack([smoothed, nll], axis=1), gradient

    return smoothed_and_nll(logits)


def padded_cross_entropy(logits, targets, label_smoothing):
    """Sums over non-padding tokens: (smoothed loss sum, NLL sum, token count), all float32 scalars.

    Divide the first by the last for the training loss; exp(NLL sum / count) is the perplexity.
    """
    smoothed, nll = token_cross_entropies(logits, targets, label_smoothing)
    weights = ops.cast(ops.not_equal(targets, PADDING_ID), "float32")
    return ops.sum(smoothed * weights), ops.sum(nll * weights), ops.sum(weights)


def eval_sums(logits, targets, label_smoothing):
    """Sums for the dev-split metrics of one batch; add them over batches, then call `eval_metrics`.

    `sequences_correct` counts target sequences whose every non-padding token is the argmax
    (teacher-forced), the per-sequence accuracy of the algorithmic problems.
    """
    loss_sum, nll_sum, tokens = padded_cross_entropy(logits, targets, label_smoothing)
    real = ops.not_equal(targets, PADDING_ID)
    hit = ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), ops.cast(targets, "int32"))
    wrong_in_sequence = ops.sum(ops.cast(ops.logical_and(real, ops.logical_not(hit)), "float32"), axis=-1)
    return {
        "loss_sum": loss_sum,
        "nll_sum": nll_sum,
        "tokens": tokens,
        "tokens_correct": ops.sum(ops.cast(ops.logical_and(real, hit), "float32")),
        "sequences": ops.cast(ops.shape(targets)[0], "float32"),
        "sequences_correct": ops.sum(ops.cast(ops.equal(wrong_in_sequence, 0.0), "float32")),
    }


def eval_metrics(sums):
    """Loss, perplexity and accuracies from `eval_sums` added over the dev split (plain floats)."""
    tokens = max(float(sums["tokens"]), 1.0)
    nll = float(sums["nll_sum"]) / tokens
    return {
        "loss": float(sums["loss_sum"]) / tokens,
        "neg_log_perplexity": -nll,
        "perplexity": math.exp(min(nll, 700.0)),  # exp overflows a float beyond ~709
        "accuracy": float(sums["tokens_correct"]) / tokens,
        "accuracy_per_sequence": float(sums["sequences_correct"]) / max(float(sums["sequences"]), 1.0),
    }
