"""The trainer's progress lines: how long the run takes on this machine, then loss, rate, tokens/s and ETA.

A run is defined by what determines its result (hparams, update count, seed, data), so the
same command gives the same model on any host; how long the updates take is the host's.
The trainer says so early, from updates timed after the first few (tracing and the first
batch shapes make those several times slower than the rest):

    seconds per update = median(t_{s+1} - t_s for s₀ ≤ s < s₀ + k),    time left = seconds per update × (end - step)

with s₀ = the first step + SETTLING_UPDATES and k = TIMED_UPDATES. The median, not the mean:
with XLA every new batch shape (a length bucket met for the first time) compiles the step
again, which makes that update several times slower, and many of the first updates meet a
new shape. Every summary line then shows as its ETA the mean time of all updates since s₀,
in which compilations, evaluations and checkpoints count as they have happened.
"""

import statistics
import time

from t2t_lite.train.run_length import duration
from t2t_lite.train.scalars import write_scalars

SETTLING_UPDATES = 10  # not timed: tracing, XLA's compilations, the first batch shapes
TIMED_UPDATES = 40  # timed before the first estimate


class Progress:
    """Times the updates of one process and writes its progress lines and TensorBoard scalars.

    Args:
      step: the step this process starts at (0, or the restored one).
      train_minutes: --train_minutes (0: no time bound), which the ETA never passes.
      writer: the run's summary writer; log: the trainer's line printer.
    """

    def __init__(self, step: int, train_minutes: float, writer, log, now: float = None):
        self.started = time.time() if now is None else now
        self.start_step = step
        self.train_minutes = train_minutes
        self.writer, self.log = writer, log
        self.timed_from = None  # (time, step) where the timed updates start
        self.previous = self.started  # when the last update ended
        self.timed = []  # the seconds of each of the first TIMED_UPDATES updates after the settling ones
        self.window_start, self.window_tokens = self.started, 0.0  # for tokens/s since the last line

    def updated(self, step: int, target_tokens: float, end: int, now: float = None) -> None:
        """Counts one update's tokens; after the first timed updates, says how long the run will take."""
        now = time.time() if now is None else now
        self.window_tokens += target_tokens
        done = step - self.start_step
        if SETTLING_UPDATES < done <= SETTLING_UPDATES + TIMED_UPDATES:
            self.timed.append(now - self.previous)
        self.previous = now
        if done == SETTLING_UPDATES:
            self.timed_from = (now, step)
        elif done == SETTLING_UPDATES + TIMED_UPDATES and step < end:
            per_update = statistics.median(self.timed)
            bounded = self.train_minutes and self.started + 60.0 * self.train_minutes - now < per_update * (end - step)
            bound = f"; --train_minutes={self.train_minutes:g} stops it sooner" if bounded else ""
            self.log(
                f"On this machine: {per_update:.3g} s per update (updates {self.timed_from[1] + 1:,}-{step:,}), so "
                f"the {end - step:,} updates left take about {duration(per_update * (end - step))}{bound}. "
                f"The model is the same on any host; only this time is the machine's."
            )

    def line(self, step: int, end: int, loss: float, learning_rate: float, now: float = None) -> None:
        """The step's line (loss, learning rate, tokens/s, ETA) and its scalars."""
        now = time.time() if now is None else now
        values = {
            "loss": loss,
            "learning_rate": learning_rate,
            "tokens_per_second": self.window_tokens / max(now - self.window_start, 1e-9),
        }
        write_scalars(self.writer, step, values)
        remaining = self._seconds_per_update(step, now) * (end - step)
        if self.train_minutes:  # whichever bound comes first
            remaining = max(0.0, min(remaining, self.started + 60.0 * self.train_minutes - now))
        self.log(
            f"step {step}/{end}  loss {loss:.4f}  learning_rate {learning_rate:.3g}  "
            f"tokens/s {values['tokens_per_second']:,.0f}  ETA {duration(remaining)}"
        )
        self.window_start, self.window_tokens = now, 0.0

    def _seconds_per_update(self, step: int, now: float) -> float:
        if self.timed_from and step > self.timed_from[1]:
            since, first = self.timed_from
        else:  # too early to leave the first updates out
            since, first = self.started, self.start_step
        return (now - since) / max(step - first, 1)
