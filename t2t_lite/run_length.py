"""How many updates a run makes: --train_steps, or as many as --train_minutes holds, so that the
learning rate's linear decay (schedule.py) ends inside a time bound on a host of unknown speed.

The decay falls to its end at `train_steps`. A run bounded by the clock that reaches the bound
first stops with the rate still high, and which step count fits an hour depends on the CPU (a
third as many updates on one host as on another, docs/results.md). With
`--fit_train_steps_to_minutes` the trainer chooses `train_steps` from the time per update
measured so far in this process:

    train_steps = step + ⌊(started + 60·train_minutes − reserve − now) / ((now − started) / (step − start_step))⌋

with reserve = 2 % of the bound (the final checkpoint and evaluation), and never more than
--train_steps. It is re-estimated at every log line until the decay's first step, then fixed and
written to `output_dir/fitted_train_steps.json`, so that a resumed run ends the decay it began.
The average includes XLA's compilations and the evaluations, so it errs towards fewer updates.
The log names the count chosen: `--train_steps=N` without the flag replays the run on any host.
Not in tensor2tensor, whose runs were bounded by steps.
"""

import json
import os

import tensorflow as tf

PLAN_FILE = "fitted_train_steps.json"
RESERVE = 0.02  # of the time bound, left for the last checkpoint and evaluation


def check_fit(fit: bool, train_minutes: float, decay_steps: int) -> None:
    """Fitting needs a time bound and a decay to fit; ValueError naming both otherwise."""
    if fit and not (train_minutes > 0 and decay_steps > 0):
        raise ValueError(
            f"--fit_train_steps_to_minutes fits the learning rate's decay to --train_minutes, so it needs "
            f"--train_minutes > 0 (got {train_minutes:g}) and hparam learning_rate_decay_steps > 0 (got "
            f"{decay_steps}); set both, or drop the flag.")


class RunLength:
    """The update count a run ends at, shared with the learning-rate schedule.

    Args:
      train_steps: --train_steps: the run's length, or, when fitting, its upper bound.
      decay_steps: hparams.learning_rate_decay_steps (0: no decay, nothing to fit).
      train_minutes: --train_minutes (needed when fitting).
      fit: --fit_train_steps_to_minutes.

    `variable` is what the schedule reads when there is a decay (None otherwise): create the
    object under the distribution strategy's scope, before the optimizer.
    """

    def __init__(self, train_steps: int, decay_steps: int, train_minutes: float = 0.0, fit: bool = False):
        check_fit(fit, train_minutes, decay_steps)
        self.limit = train_steps
        self.decay_steps = decay_steps
        self.train_minutes = train_minutes
        self.fitting = fit
        self.end = train_steps
        self.variable = tf.Variable(train_steps, dtype=tf.int64, trainable=False) if decay_steps else None
        self.fixed = not fit  # True once the decay has begun: the count no longer moves
        self._planned = False  # whether a count has been fitted
        self._clock = None  # (started, start_step) of this process's updates

    @property
    def decay_start(self) -> int:
        """The decay's first step (factor 1; the updates after it take less)."""
        return max(self.end - self.decay_steps + 1, 1)

    def resume(self, output_dir: str, step: int, log) -> None:
        """Takes up the count an earlier process fixed, if the restored `step` is inside its decay."""
        path = os.path.join(output_dir, PLAN_FILE)
        if not self.decay_steps or not tf.io.gfile.exists(path):
            return
        try:
            with tf.io.gfile.GFile(path) as plan:
                fixed = int(json.load(plan)["train_steps"])
        except (ValueError, KeyError, TypeError, tf.errors.OpError) as error:
            log(f"WARNING: {path} cannot be read ({error}); the run's length is fitted anew.")
            return
        if not self.fitting:
            if fixed != self.limit:
                log(f"Note: an earlier process fitted this run to {fixed:,} steps ({path}); this one ends its "
                    f"decay at --train_steps={self.limit:,}.")
            return
        if step >= fixed - self.decay_steps + 1:
            self._set(fixed)
            self.fixed = True
            log(f"Resuming inside the decay fitted by an earlier process: the run ends at step {fixed:,} ({path}).")
        else:
            log(f"{path} fixed {fixed:,} steps, but step {step:,} comes before that decay: fitted anew.")

    def start_clock(self, step: int, now: float) -> None:
        """Marks the start of this process's updates (after any restore)."""
        self._clock = (now, step)

    def measure(self, step: int, now: float, output_dir: str, log) -> None:
        """After update `step`: fits the count to the time left, until the decay has begun.

        The trainer calls it at each log line, and at the decay's first step, which fixes the count.
        """
        started, start_step = self._clock
        if self.fixed or step <= start_step:
            return
        per_step = (now - started) / (step - start_step)
        if not (self._planned and step >= self.decay_start):
            seconds_left = started + 60.0 * self.train_minutes * (1.0 - RESERVE) - now
            fitted = min(self.limit, step + max(int(seconds_left / per_step), 0))
            if not self._planned:
                log(f"Fitting the run to --train_minutes={self.train_minutes:g}: {per_step:.3g} s per update so "
                    f"far, so it ends at step {fitted:,} (re-estimated until its decay begins).")
            self._set(fitted)
        if step >= self.decay_start:  # the decay has begun: moving its end now would jump the rate
            self.fixed = True
            self._write(output_dir, per_step)
            log(f"The decay began at step {self.decay_start:,} and ends the run at step {self.end:,} "
                f"({per_step:.3g} s per update); --train_steps={self.end:,} without --fit_train_steps_to_minutes "
                f"replays it on any host.")

    def _set(self, end: int) -> None:
        self._planned = True
        self.end = end
        self.variable.assign(end)

    def _write(self, output_dir: str, per_step: float) -> None:
        # Written whole, then renamed: a process killed meanwhile leaves the old file or none.
        path = os.path.join(output_dir, PLAN_FILE)
        with tf.io.gfile.GFile(path + ".tmp", "w") as plan:
            json.dump({"train_steps": self.end, "learning_rate_decay_steps": self.decay_steps,
                       "seconds_per_update": round(per_step, 4), "train_minutes": self.train_minutes}, plan)
        tf.io.gfile.rename(path + ".tmp", path, overwrite=True)
