"""Eq. 3 of §5.3 at given steps, and the optimizer's first update using step 1."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.train import schedule


def eq3(step, d_model=512, warmup=4000):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 100, 4000, 100_000])
def test_eq3_at_given_steps(step):
    lrate = schedule.learning_rate_schedule(registry.hparams("transformer_base"))
    # The schedule receives Keras' 0-based `iterations`: step - 1 updates have been made.
    np.testing.assert_allclose(float(lrate(step - 1)), eq3(step), rtol=1e-6)


def test_hand_values_and_multiplier():
    lrate = schedule.NoamSchedule(512, 4000, learning_rate=2.0)
    np.testing.assert_allclose(float(lrate(3999)), 2.0 / (512**0.5 * 4000**0.5), rtol=1e-6)  # the peak
    np.testing.assert_allclose(float(lrate(99_999)), 2.0 / (512**0.5 * 100_000**0.5), rtol=1e-6)


def test_config_round_trip():
    lrate = schedule.NoamSchedule(256, 100, learning_rate=0.5)
    again = schedule.NoamSchedule.from_config(lrate.get_config())
    assert float(again(41)) == float(lrate(41))


def test_linear_decay_is_off_in_the_paper_sets():
    for name in ("transformer_base", "transformer_big", "transformer_parsing"):
        hparams = registry.hparams(name)
        assert hparams.learning_rate_decay_steps == 0
        lrate = schedule.learning_rate_schedule(hparams, train_steps=5000)
        np.testing.assert_allclose(float(lrate(4999)), eq3(5000, hparams.hidden_size), rtol=1e-6)


def test_linear_decay_multiplies_eq3_over_the_last_updates():
    # tensor2tensor's linear_decay factor: min(1, (train_steps - step + 1) / decay_steps) at update `step`.
    lrate = schedule.NoamSchedule(256, 100, learning_rate=1.0, decay_steps=200, train_steps=1000)
    for step, factor in [
        (1, 1.0),
        (100, 1.0),
        (801, 1.0),
        (802, 199 / 200),
        (901, 0.5),
        (1000, 1 / 200),
        (1001, 0.0),
        (1500, 0.0),
    ]:
        np.testing.assert_allclose(
            float(lrate(step - 1)), factor * eq3(step, 256, 100), rtol=1e-6, atol=0, err_msg=f"step {step}"
        )


def test_linear_decay_needs_train_steps_and_keeps_its_config():
    with pytest.raises(ValueError, match="train_steps"):
        schedule.learning_rate_schedule(registry.hparams("transformer_tiny").replace(learning_rate_decay_steps=10))
    lrate = schedule.NoamSchedule(256, 100, decay_steps=50, train_steps=300)
    again = schedule.NoamSchedule.from_config(lrate.get_config())
    assert float(again(280)) == float(lrate(280)) < float(schedule.NoamSchedule(256, 100)(280))


def test_linear_decay_follows_a_train_steps_variable_inside_a_compiled_function():
    # A run fitted to the clock (t2t_lite.train.run_length) moves train_steps while the step function stays traced.
    train_steps = tf.Variable(1000, dtype=tf.int64, trainable=False)
    lrate = schedule.NoamSchedule(256, 100, decay_steps=200, train_steps=train_steps)
    rate_at = tf.function(lambda iterations: lrate(iterations), jit_compile=True)
    np.testing.assert_allclose(float(rate_at(tf.constant(900))), 0.5 * eq3(901, 256, 100), rtol=1e-6)
    train_steps.assign(950)
    np.testing.assert_allclose(float(rate_at(tf.constant(900))), 0.25 * eq3(901, 256, 100), rtol=1e-6)
    assert lrate.get_config()["train_steps"] == 950


def test_adam_hparams_and_first_update_uses_step_one():
    hparams = registry.hparams("transformer_base")
    optimizer = schedule.adam_optimizer(hparams)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    variable = keras.Variable(np.zeros(1, "float32"))
    optimizer.apply_gradients([(np.ones(1, "float32"), variable)])
    # Adam's first step moves each weight by lr·m̂/(√v̂+ε) = lr for a unit gradient.
    np.testing.assert_allclose(-float(variable[0]), eq3(1), rtol=1e-4)
    assert float(optimizer.learning_rate) == pytest.approx(eq3(2), rel=1e-6)


def test_float16_gets_loss_scaling():
    hparams = registry.hparams("transformer_tiny").replace(activation_dtype="float16")
    assert isinstance(schedule.adam_optimizer(hparams), keras.optimizers.LossScaleOptimizer)


def adam_reference(gradients, learning_rates, beta_1=0.9, beta_2=0.98, epsilon=1e-9):
    """Kingma & Ba's Algorithm 1 (ε added to √v̂, as Keras and TensorFlow do), in float64."""
    theta = m = v = np.zeros_like(gradients[0], np.float64)
    for t, (g, lr) in enumerate(zip(gradients, learning_rates), start=1):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        theta = theta - lr * np.sqrt(1 - beta_2**t) / (1 - beta_1**t) * m / (np.sqrt(v) + epsilon)
    return theta, m, v


def test_fused_adam_follows_algorithm_1_over_several_steps():
    """Each of several variables, updated together in a compiled step, moves as Algorithm 1 says."""
    hparams = registry.hparams("transformer_tiny").replace(learning_rate_warmup_steps=3)
    optimizer = schedule.adam_optimizer(hparams)
    assert isinstance(optimizer, schedule.FusedAdam)
    rng = np.random.default_rng(0)
    shapes = [(3, 5), (4,)]
    gradients = [[rng.normal(size=shape).astype("float32") for shape in shapes] for _ in range(6)]
    variables = [keras.Variable(np.zeros(shape, "float32")) for shape in shapes]
    update = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)))
    for step_gradients in gradients:
        update(step_gradients)
    lrate = schedule.learning_rate_schedule(hparams)
    for index, variable in enumerate(variables):
        theta, m, v = adam_reference([g[index] for g in gradients], [float(lrate(step)) for step in range(6)])
        np.testing.assert_allclose(variable.numpy(), theta, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(optimizer._momentums[index].numpy(), m, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(optimizer._velocities[index].numpy(), v, rtol=1e-5, atol=1e-9)


def test_fused_adam_makes_an_updates_scalars_once_for_all_variables():
    """β1^t and β2^t are one pair of ops per update, not a pair per variable: a transformer_base step has
    about 180 variables, and every op is traced when a tool starts and run at every update."""
    optimizer = schedule.adam_optimizer(registry.hparams("transformer_tiny"))
    variables = [keras.Variable(np.zeros((2, 2), "float32")) for _ in range(5)]
    optimizer.build(variables)
    update = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)))
    graph = update.get_concrete_function([tf.TensorSpec((2, 2), tf.float32)] * 5).graph
    kinds = [op.type for op in graph.get_operations()]
    assert kinds.count("ResourceApplyAdam") == 5
    assert kinds.count("Pow") == 2
