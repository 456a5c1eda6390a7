"""bench/screen_gpu.py's batching and schedule, the parts that must match t2t-trainer (no JAX needed here).

The training itself runs under JAX on an accelerator; these check that its batches hold the pairs
that t2t_lite's buckets would put together, and that its learning rate is eq. 3 with the linear decay.
"""

import importlib.util
import os

import numpy as np
import pytest

from t2t_lite import registry
from t2t_lite.data import input_pipeline

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "screen_gpu.py")


@pytest.fixture(scope="module")
def screen():
    spec = importlib.util.spec_from_file_location("screen_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configs_name_their_overrides_and_may_set_their_own_update_count(screen):
    assert screen.split_config("d192:hidden_size=192,filter_size=768@4750", 7500) == (
        "d192",
        "hidden_size=192,filter_size=768",
        4750,
    )
    assert screen.split_config("base:", 7500) == ("base", "", 7500)


@pytest.mark.parametrize("max_length", [128, 64, 20])
def test_bucket_lengths_are_the_trainers(screen, max_length):
    hparams = registry.hparams("transformer_multi30k_hour").replace(max_length=max_length)
    assert screen.bucket_lengths(hparams) == input_pipeline.bucket_lengths(hparams)


def test_a_batch_holds_one_buckets_pairs_as_the_trainer_groups_them_padded_to_a_few_shapes(screen):
    hparams = registry.hparams("transformer_multi30k_hour").replace(batch_size=64)
    rng = np.random.default_rng(0)
    # Pairs of every length 1..40 on the longer side, ids ≥ 3 (0 pad, 1 EOS, 2 unknown), ending in EOS.
    pairs = [([5] * (n - 1) + [1], [7] * (max(1, n - 3)) + [1]) for n in range(1, 41) for _ in range(8)]
    lengths = input_pipeline.bucket_lengths(hparams)
    stream = screen.batches(pairs, hparams, rng)
    shapes = set()
    for _ in range(100):
        inputs, targets = next(stream)
        shapes.add(inputs.shape)
        assert inputs.shape == targets.shape and inputs.shape[1] in screen.SCREEN_LENGTHS
        real = [row for row in range(inputs.shape[0]) if inputs[row].any()]
        longer = [max(np.count_nonzero(inputs[row]), np.count_nonzero(targets[row])) for row in real]
        # One trainer bucket per batch, with batch_size // its length pairs: the trainer's batch.
        buckets = {next(b for b, length in enumerate(lengths) if n <= length) for n in longer}
        assert len(buckets) == 1
        assert len(real) == hparams.batch_size // lengths[buckets.pop()]
        # The rows beyond are padding alone, so they carry no loss (padded_cross_entropy weighs id 0 by 0).
        assert not inputs[len(real) :].any() and not targets[len(real) :].any()
    assert len(shapes) <= len(screen.SCREEN_LENGTHS)


def test_the_learning_rate_is_eq3_with_the_linear_decay(screen):
    jnp = pytest.importorskip("jax.numpy")  # CI has no JAX: the formula is checked where JAX is installed
    hparams = registry.hparams("transformer_multi30k_hour").replace(
        hidden_size=256, learning_rate=1.0, learning_rate_warmup_steps=1000, learning_rate_decay_steps=100
    )
    rate = screen.eq3_with_decay(hparams, 2000)
    peak = 256**-0.5 * 1000**-0.5
    assert float(rate(jnp.asarray(999))) == pytest.approx(peak, rel=1e-6)  # step 1,000: the peak
    assert float(rate(jnp.asarray(1899))) == pytest.approx(256**-0.5 * 1900**-0.5, rel=1e-6)  # decay not begun
    assert float(rate(jnp.asarray(1999))) == pytest.approx(256**-0.5 * 2000**-0.5 / 100, rel=1e-5)  # last: 1/100
