"""The optimizer and learning-rate schedule of §5.3 (eq. 3).

Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9 and

    lrate = learning_rate · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)     (eq. 3)

rising linearly for the first `warmup_steps` steps, then decaying with the inverse
square root of the step. `learning_rate` (tensor2tensor's multiplier, 1.0 = the paper)
scales the whole curve.

Not in the paper, and off unless `learning_rate_decay_steps` > 0: tensor2tensor's
"linear_decay" factor, which multiplies eq. 3 by

    min(1, (train_steps - step + 1) / learning_rate_decay_steps)

so the rate falls linearly over the last `learning_rate_decay_steps` updates of a run of
`train_steps`, its last update taking 1/learning_rate_decay_steps of eq. 3 (zero would be a
wasted update). A run whose length is fixed in advance then ends on a cooled-down model
instead of eq. 3's slow inverse-square-root tail.

Keras optimizers count `iterations` from 0 and call the schedule with that count
before incrementing it, so the schedule reads its argument as the number of updates
already made and evaluates eq. 3 at step = iterations + 1: the first update uses
step 1, never the zero learning rate of step 0.
"""

import keras
import tensorflow as tf
from keras import ops


class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Eq. 3 ("Noam" in tensor2tensor), called with the optimizer's 0-based `iterations`.

    Args:
      hidden_size: d_model.
      warmup_steps: warmup_steps of eq. 3.
      learning_rate: constant multiplier on eq. 3 (1.0 = the paper).
      decay_steps: the linear decay's length in updates; 0 = eq. 3 alone (the paper).
      train_steps: the update count at which the decay reaches zero (needed with decay_steps); an
        integer, or a variable holding one (`t2t_lite.train.run_length`: a count fitted to the clock).

    Example:
      schedule = NoamSchedule(512, 4000)
      schedule(0)     # eq. 3 at step 1: 512**-0.5 * 4000**-1.5
    """

    def __init__(self, hidden_size, warmup_steps, learning_rate=1.0, decay_steps=0, train_steps=0):
        if decay_steps and _count(train_steps) <= 0:
            raise ValueError(
                f"learning_rate_decay_steps={decay_steps} decays toward train_steps, "
                f"which must be positive (got {train_steps})."
            )
        self.hidden_size = hidden_size
        self.warmup_steps = warmup_steps
        self.learning_rate = learning_rate
        self.decay_steps = decay_steps
        self.train_steps = train_steps

    def __call__(self, iterations):
        step = ops.cast(iterations, "float32") + 1.0
        warmup = float(max(self.warmup_steps, 1))
        rate = self.learning_rate * self.hidden_size**-0.5 * ops.minimum(ops.rsqrt(step), step * warmup**-1.5)
        if self.decay_steps:
            remaining = (ops.cast(self.train_steps, "float32") + 1.0 - step) / float(self.decay_steps)
            rate = rate * ops.clip(remaining, 0.0, 1.0)
        return rate

    def get_config(self):
        return {
            "hidden_size": self.hidden_size,
            "warmup_steps": self.warmup_steps,
            "learning_rate": self.learning_rate,
            "decay_steps": self.decay_steps,
            "train_steps": _count(self.train_steps),
        }


def _count(train_steps) -> int:
    # A variable under a MirroredStrategy has no int(); reading it as a tensor works for every kind.
    return int(train_steps) if isinstance(train_steps, int) else int(tf.convert_to_tensor(train_steps).numpy())


def decay_start(train_steps: int, decay_steps: int) -> int:
    """The linear decay's first step: the last update at factor 1, the updates after it take less."""
    return max(train_steps - decay_steps + 1, 1)


def learning_rate_schedule(hparams, train_steps=0) -> NoamSchedule:
    """Eq. 3 with d_model, warmup_steps and the multiplier taken from the hparams.

    `train_steps` (the trainer's --train_steps) is read only when learning_rate_decay_steps > 0.
    """
    return NoamSchedule(
        hparams.hidden_size,
        hparams.learning_rate_warmup_steps,
        hparams.learning_rate,
        hparams.learning_rate_decay_steps,
        train_steps,
    )


def decay_note(hparams, train_steps, train_minutes=0, fitted=False):
    """The trainer's log line saying where the optional linear decay runs; None when it is off."""
    decay = hparams.learning_rate_decay_steps
    if not decay:
        return None
    if fitted:
        return (
            f"Learning rate: eq. 3 times a factor falling linearly from 1 to 1/{decay:,} over the last {decay:,} "
            f"steps (learning_rate_decay_steps={decay:,}) of as many as --train_minutes={train_minutes:g} holds "
            f"(--fit_train_steps_to_minutes; at most {train_steps:,})."
        )
    note = (
        f"Learning rate: eq. 3 times a factor falling linearly from 1 to 1/{decay:,} over steps "
        f"{decay_start(train_steps, decay):,}-{train_steps:,} (learning_rate_decay_steps={decay:,})."
    )
    if train_minutes:  # a time bound that comes first leaves the decay unfinished
        note += (
            f" --train_minutes={train_minutes:g} stops the run early if {train_steps:,} steps take longer; "
            f"the decay follows --train_steps, not the clock."
        )
    return note


class FusedAdam(keras.optimizers.Adam):
    """Keras' Adam in Kingma & Ba's "ε-hat" form (§2: the bias corrections folded into the step
    size, ε added after them; Algorithm 1 adds ε to √v̂ instead), one kernel per variable. It is
    TensorFlow's, Keras' and tensor2tensor's form; at ε = 1e-9 the two differ negligibly.

        m ← m + (1-β1)(g - m);   v ← v + (1-β2)(g² - v)
        θ ← θ - lr · √(1-β2^t)/(1-β1^t) · m / (√v + ε)

    Keras' own update makes several passes over every parameter, its moments and its
    gradient (a subtraction, a multiplication and an assignment per line); on a CPU those
    passes cost about a tenth of a transformer_base step. With the TensorFlow backend this
    runs TensorFlow's fused `ResourceApplyAdam` instead, which makes one pass and computes
    the same formula; the moment variables are Keras' own, so checkpoints are unchanged.
    Other backends, sparse gradients and amsgrad take Keras' path.
    """

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # One update's scalars (β1, β2, β1^t, β2^t, lr, ε) are the same for every variable: made once per
        # update, dtype and device, not a dozen graph ops per variable traced and run at every step.
        self._update_scalars = {}
        try:
            super()._backend_update_step(grads, trainable_variables, learning_rate)
        finally:
            self._update_scalars = None

    def _scalars(self, dtype, device, learning_rate):
        key = (dtype, device)
        scalars = getattr(self, "_update_scalars", None)
        if scalars is not None and key in scalars:
            return scalars[key]
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        made = dict(
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
        )
        if scalars is not None:
            scalars[key] = made
        return made

    def update_step(self, gradient, variable, learning_rate):
        if keras.backend.backend() != "tensorflow" or self.amsgrad or isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        variable = variable.value if isinstance(variable, keras.Variable) else variable
        m, v = (slot.value for slot in (self._momentums[index], self._velocities[index]))
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=m.handle,
            v=v.handle,
            grad=tf.cast(gradient, variable.dtype),
            **self._scalars(variable.dtype, variable.device, learning_rate),
        )


def adam_optimizer(hparams, train_steps=0) -> keras.optimizers.Optimizer:
    """Adam of §5.3 on the eq. 3 schedule; float16 activations get dynamic loss scaling.

    `train_steps` ends the optional linear decay (see `learning_rate_schedule`).

    `clip_grad_norm` > 0 clips the global gradient norm (not in the paper). Under several
    replicas Keras clips each replica's share before summing them, so the trainer refuses it there.
    """
    optimizer = FusedAdam(
        learning_rate=learning_rate_schedule(hparams, train_steps),
        beta_1=hparams.optimizer_adam_beta1,
        beta_2=hparams.optimizer_adam_beta2,
        epsilon=hparams.optimizer_adam_epsilon,
        global_clipnorm=hparams.clip_grad_norm or None,
    )
    if hparams.activation_dtype == "float16":
        # float16 gradients underflow without scaling; bfloat16 has float32's exponent range.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
