"""One update of §5: k accumulated micro-batches equal one big batch; k reaches tokens_per_step."""

import keras
import numpy as np
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.data import input_pipeline
from t2t_lite.run_dir import model_info
from t2t_lite.train import train_step

SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,learning_rate_warmup_steps=10"


def test_accumulated_micro_batches_equal_one_big_batch(reverse_data):
    """k micro-batches, normalised by all their tokens, make the same update as their concatenation."""
    hparams = registry.hparams("transformer_tiny").override(SMALL + ",layer_prepostprocess_dropout=0")
    problem = registry.problem("algorithmic_reverse")
    first, second = input_pipeline.batched_dataset(problem, "dev", reverse_data, hparams).take(2)
    length = max(first["targets"].shape[1], second["targets"].shape[1])
    pad = lambda batch: {k: tf.pad(v, [[0, 0], [0, length - v.shape[1]]]) for k, v in batch.items()}  # noqa: E731
    big = {k: tf.concat([pad(first)[k], pad(second)[k]], 0) for k in first}

    def updated_weights(feed):
        keras.utils.set_random_seed(0)
        model = model_info.build_model(hparams, problem.vocab_size(reverse_data))
        steps = train_step.StepFunctions(model, keras.optimizers.SGD(1.0), hparams, tf.distribute.get_strategy())
        feed(steps)
        return [v.numpy() for v in model.trainable_variables]

    def accumulate(steps):
        steps.build_accumulators()
        steps.accumulate_step(first)
        steps.accumulate_step(second)
        steps.apply_step()

    # Independently: the gradient of the big batch's mean loss over its non-padding tokens.
    keras.utils.set_random_seed(0)
    model = model_info.build_model(hparams, problem.vocab_size(reverse_data))
    before = [v.numpy() for v in model.trainable_variables]
    with tf.GradientTape() as tape:
        logits = model(big, training=True)
        real = tf.cast(big["targets"] > 0, tf.float32)
        smoothed = tf.keras.losses.categorical_crossentropy(
            tf.one_hot(big["targets"], logits.shape[-1]) * (1 - 0.1 - 0.1 / (logits.shape[-1] - 1))
            + 0.1 / (logits.shape[-1] - 1),
            logits,
            from_logits=True,
        )
        mean_loss = tf.reduce_sum(smoothed * real) / tf.reduce_sum(real)
    expected = [
        w - g.numpy() if not isinstance(g, tf.IndexedSlices) else w - tf.convert_to_tensor(g).numpy()
        for w, g in zip(before, tape.gradient(mean_loss, model.trainable_variables))
    ]

    for got_accumulated, got_big, want in zip(
        updated_weights(accumulate), updated_weights(lambda steps: steps.train_step(big)), expected
    ):
        np.testing.assert_allclose(got_accumulated, want, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got_big, want, rtol=1e-4, atol=1e-6)


def test_micro_batches_per_step_reach_tokens_per_step():
    base = registry.hparams("transformer_base")  # 4,096 tokens per micro-batch, 25,000 per step
    assert train_step.micro_batches_per_step(base, 1) == 7  # ceil(25000 / 4096)
    assert train_step.micro_batches_per_step(base, 8) == 1  # §5.2: 8 GPUs already hold 32,768
    assert train_step.micro_batches_per_step(base.replace(tokens_per_step=0), 1) == 1
