"""How many updates a run makes: --train_steps, or as many as --train_minutes holds, so that the
learning rate's linear decay (schedule.py) ends inside a time bound on a host of unknown speed.

The decay falls to its end at `train_steps`. A run bounded by the clock that reaches the bound
first stops with the rate still high, and which step count fits an hour depends on the CPU (several
times as many updates on one host as on another: docs/results.md, Hosts). With
`--fit_train_steps_to_minutes` the trainer chooses `train_steps` from the time per update it
measures in this process once the first tenth of the bound has passed (start-up and XLA's
compilations of the first batch shapes make the first updates look several times slower than
the rest):

    train_steps = step + ⌊(started + 60·train_minutes − reserve − now) / ((now − t₀) / (step − s₀))⌋

where (t₀, s₀) is the time and step of the first update to end after that tenth, reserve = 2 % of
the bound, and never more than --train_steps. The first estimate waits until the timed updates span
a twentieth of the bound; it is re-estimated after every update until the decay's first step, then
fixed and written to `output_dir/fitted_train_steps.json`, so that a resumed run ends the decay it
began. A re-estimate can move the decay's first step behind the current one by a few updates (the
seconds of an evaluation join the average at once, and on a slow CPU an evaluation lasts several
updates); when the whole bound, reserve included, holds the decay from the current step, it starts
there from 1; only a time left that cannot hold the decay starts it part-way, with a warning. The
time is taken after every update, not at log lines only: a bound shorter than about two log
intervals would otherwise run out before any fit. The evaluations fall inside the average, as they
will in the time left. The log names the count chosen: `--train_steps=N` without the flag replays
the run on any host; a run the clock stops before its fitted end says how far its decay got. Not in
tensor2tensor, whose runs were bounded by steps.

Any run bounded by the clock, fitted or not, is also checked against eq. 3's warm-up: once the
first estimate exists, a bound that holds fewer updates than learning_rate_warmup_steps is warned
of, because the run will stop with the rate still rising, at step/warmup_steps of the peak the
hparams set was chosen with, and score far below a run that completes it (docs/results.md,
ablations). A shorter warm-up W with learning_rate × √(W / warmup_steps) keeps eq. 3's peak
(transformer_quickstart does so).
"""

import json
import os
import time

import tensorflow as tf

from t2t_lite.run_dir.checkpoints import SET_ASIDE
from t2t_lite.train.schedule import decay_start

PLAN_FILE = "fitted_train_steps.json"
RESERVE = 0.02  # of the time bound: room for updates that grow slower after the count is fixed
SETTLING = 0.1  # of the time bound, before the updates are timed: start-up and the first compilations
FIRST_ESTIMATE = 0.05  # of the time bound, timed before the first estimate: one update's time is noise


def check_fit(fit: bool, train_minutes: float, decay_steps: int) -> None:
    """Fitting needs a time bound and a decay to fit; ValueError naming both otherwise."""
    if fit and not (train_minutes > 0 and decay_steps > 0):
        raise ValueError(
            f"--fit_train_steps_to_minutes fits the learning rate's decay to --train_minutes, so it needs "
            f"--train_minutes > 0 (got {train_minutes:g}) and hparam learning_rate_decay_steps > 0 (got "
            f"{decay_steps}); set both, or drop the flag."
        )


class RunLength:
    """The update count a run ends at (`end`), shared with the learning-rate schedule when fitted.

    Args:
      train_steps: --train_steps: the run's length, or, when fitting, its upper bound.
      decay_steps: hparams.learning_rate_decay_steps.
      train_minutes: --train_minutes (needed when fitting).
      fit: --fit_train_steps_to_minutes.
      warmup_steps: hparams.learning_rate_warmup_steps, for the warning of a bound that ends the
        run inside eq. 3's warm-up (0: no warning).

    When fitting, `variable` holds the count for the schedule to read (None otherwise): create
    the object under the distribution strategy's scope, before the optimizer.
    """

    def __init__(
        self, train_steps: int, decay_steps: int, train_minutes: float = 0.0, fit: bool = False, warmup_steps: int = 0
    ):
        check_fit(fit, train_minutes, decay_steps)
        self.limit = train_steps
        self.decay_steps = decay_steps
        self.train_minutes = train_minutes
        self.fitting = fit
        self.end = train_steps
        self.variable = tf.Variable(train_steps, dtype=tf.int64, trainable=False) if fit else None
        self.fixed = not fit  # True once the decay has begun: the count no longer moves
        self._planned = False  # whether a count has been fitted
        self.warmup_steps = warmup_steps
        self._estimated = False  # whether the timed updates span FIRST_ESTIMATE of the bound yet
        self._started = None  # when this process's updates started
        self._window = None  # (t₀, s₀): where the timed updates start, once SETTLING has passed

    @property
    def decay_start(self) -> int:
        return decay_start(self.end, self.decay_steps)

    def resume(self, output_dir: str, step: int, log) -> None:
        """Takes up the count an earlier process fixed if `step` (0: no checkpoint) is inside its decay."""
        path = os.path.join(output_dir, PLAN_FILE)
        if not self.fitting or not tf.io.gfile.exists(path):
            return
        try:
            with tf.io.gfile.GFile(path) as plan:
                fixed = int(json.load(plan)["train_steps"])
        except (ValueError, KeyError, TypeError, tf.errors.OpError) as error:
            self._set_aside(path, f"it cannot be read ({error})", log)
            return
        if step < decay_start(fixed, self.decay_steps):
            # Kept, a plan for a decay not reached would be taken up by a later resume inside another one.
            self._set_aside(path, f"step {step:,} comes before the decay it fixed ({fixed:,} steps)", log)
            return
        self._set(min(fixed, self.limit))
        self.fixed = True
        log(
            f"Resuming inside the decay fitted by an earlier process: the run ends at step {self.end:,} ({path}"
            + (f"; --train_steps={self.limit:,} ends it before the {fixed:,} fitted)." if fixed > self.limit else ").")
        )

    def start_clock(self, now: float) -> None:
        """Marks the start of this process's updates (after any restore)."""
        self._started = now

    def measure(self, step: int, now: float, output_dir: str, log) -> None:
        """After update `step`: fits the count to the time left, until the decay has begun.

        The trainer calls it after every update; the decay's first step fixes the count. The first
        estimate also checks the bound against eq. 3's warm-up, fitted or not.
        """
        bound = 60.0 * self.train_minutes
        if not bound or (self.fixed and self._estimated):
            return
        if self._window is None:
            if now - self._started >= SETTLING * bound:
                self._window = (now, step)
            return
        timed_since, timed_from = self._window
        if step <= timed_from or (not self._estimated and now - timed_since < FIRST_ESTIMATE * bound):
            return
        per_step = max((now - timed_since) / (step - timed_from), 1e-9)
        first_estimate, self._estimated = not self._estimated, True
        if not self.fixed:
            self._fit(step, now, per_step, output_dir, log)
        if first_estimate:
            self._foresee_warmup(step, now, per_step, log)

    def _fit(self, step: int, now: float, per_step: float, output_dir: str, log) -> None:
        """Sets the count the time left holds at per_step; fixes it once the decay has begun."""
        began = self.decay_start
        if not (self._planned and step >= self.decay_start):
            fitted = min(self.limit, self._holds(step, now, per_step, RESERVE))
            decay_from_now = step + self.decay_steps - 1  # the count whose decay begins at this step
            if fitted < decay_from_now <= min(self.limit, self._holds(step, now, per_step)):
                # The estimate moved the decay's start behind this step (an evaluation's seconds join the
                # average at once): the reserve holds the few updates, so the decay starts now from 1.
                fitted = decay_from_now
            if not self._planned:
                log(
                    f"Fitting the run to --train_minutes={self.train_minutes:g}: {per_step:.3g} s per update so "
                    f"far, so it ends at step {fitted:,} (re-estimated until its decay begins)."
                )
            self._set(fitted)
            began = self.decay_start
            if step > began:  # the time left holds less than the decay: it starts now, part-way
                began = step
                log(
                    f"WARNING: --train_minutes={self.train_minutes:g} holds only {fitted - step:,} more updates, "
                    f"fewer than learning_rate_decay_steps={self.decay_steps:,}: the decay starts now at "
                    f"{(fitted - step) / self.decay_steps:.2f} of eq. 3 instead of falling from 1. Give more minutes "
                    f"or a shorter decay."
                )
        if step >= self.decay_start:  # the decay has begun: moving its end now would jump the rate
            self.fixed = True
            self._write(output_dir, per_step)
            log(
                f"The decay began at step {began:,} and ends the run at step {self.end:,} "
                f"({per_step:.3g} s per update); --train_steps={self.end:,} without --fit_train_steps_to_minutes "
                f"replays it on any host."
            )

    def _holds(self, step: int, now: float, per_step: float, reserve: float = 0.0) -> int:
        """The step the run reaches when the bound, less `reserve` of it, runs out at per_step."""
        seconds_left = self._started + 60.0 * self.train_minutes * (1.0 - reserve) - now
        return step + max(int(seconds_left / per_step), 0)

    def _foresee_warmup(self, step: int, now: float, per_step: float, log) -> None:
        """Warns when the clock, not --train_steps, will stop the run inside eq. 3's warm-up."""
        holds = self._holds(step, now, per_step)
        if holds < self.warmup_steps <= self.limit:  # a --train_steps inside the warm-up is the user's choice
            log(
                f"WARNING: at {per_step:.3g} s per update --train_minutes={self.train_minutes:g} holds about "
                f"{holds:,} updates, fewer than eq. 3's learning_rate_warmup_steps={self.warmup_steps:,}: the "
                f"learning rate will never rise above {holds / self.warmup_steps:.2f} of the peak the hparams set "
                f"was chosen with. Give more minutes, or a shorter warm-up W with learning_rate multiplied by "
                f"sqrt(W/{self.warmup_steps:,}), which keeps eq. 3's peak (docs/results.md, "
                f'"Multi30k in one CPU-hour").'
            )

    def stopped_by_the_clock(self, step: int) -> list:
        """The warnings for a run stopped by --train_minutes at `step`: what it left undone ([] if nothing)."""
        undone = []
        if step < self.warmup_steps <= self.limit:
            undone.append(
                f"WARNING: --train_minutes={self.train_minutes:g} ran out at step {step:,}, inside eq. 3's "
                f"{self.warmup_steps:,}-step warm-up: the learning rate was still rising, at "
                f"{step / self.warmup_steps:.2f} of its peak."
            )
        if not self.fitting or step >= self.end:
            return undone
        if not self.fixed:
            fitted = f"fitted to {self.end:,} steps" if self._planned else "not fitted yet"
            return undone + [
                f"WARNING: --train_minutes={self.train_minutes:g} ran out at step {step:,}, before the decay "
                f"began (the run was {fitted}): it ended at eq. 3's full rate. Give more minutes or a "
                f"shorter learning_rate_decay_steps."
            ]
        factor = (self.end + 1 - step) / self.decay_steps
        return undone + [
            f"WARNING: --train_minutes={self.train_minutes:g} ran out at step {step:,} of the {self.end:,} "
            f"fitted, with the decay at {min(factor, 1.0):.2f} of eq. 3's rate instead of 1/{self.decay_steps:,}: "
            f"updates grew slower than the {RESERVE:.0%} reserve allows after the count was fixed."
        ]

    def _set(self, end: int) -> None:
        self._planned = True
        if end != self.end:
            self.end = end
            self.variable.assign(end)

    def _write(self, output_dir: str, per_step: float) -> None:
        # Written whole, then renamed: a process killed meanwhile leaves the old file or none.
        path = os.path.join(output_dir, PLAN_FILE)
        with tf.io.gfile.GFile(path + ".tmp", "w") as plan:
            json.dump(
                {
                    "train_steps": self.end,
                    "learning_rate_decay_steps": self.decay_steps,
                    "seconds_per_update": round(per_step, 4),
                    "train_minutes": self.train_minutes,
                },
                plan,
            )
        tf.io.gfile.rename(path + ".tmp", path, overwrite=True)

    @staticmethod
    def _set_aside(path: str, reason: str, log) -> None:
        destination = os.path.join(os.path.dirname(path), SET_ASIDE, time.strftime("%Y%m%d-%H%M%S"))
        tf.io.gfile.makedirs(destination)
        tf.io.gfile.rename(path, os.path.join(destination, PLAN_FILE), overwrite=True)
        log(f"Moved {path} to {destination}, as {reason}; the run's length is fitted anew.")


def duration(seconds: float) -> str:
    """h:mm:ss, as the trainer's ETA shows it."""
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"
