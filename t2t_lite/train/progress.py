"""The trainer's progress lines: how long the run takes on this machine, then loss, rate, tokens/s and ETA.

A run is defined by what determines its result (hparams, update count, seed, data), so the
same command gives the same model on any host; how long the updates take is the host's.
The trainer says so early, from updates timed after the first few (tracing and the first
batch shapes make those several times slower than the rest):

    seconds per update = median(u_s for s₀ < s ≤ s₀ + k),    time left = seconds per update × (end - step)

with u_s the time update s took, s₀ = the first step + SETTLING_UPDATES and k = TIMED_UPDATES.
The median, not the mean: with XLA every new batch shape (a length bucket met for the first
time) compiles the step again, which makes that update several times slower, and many of the
first updates meet a new shape. Every summary line then shows the time left as

    ETA = (end - step) × (mean of the last WINDOW_UPDATES updates' u_s, those that compiled left out
                          + seconds paused for evaluations and checkpoints ÷ updates since s₀)

An update over COMPILED times the window's median compiled a shape; compilations end once every
length bucket has been met, so they are not projected into the rest of the run, while evaluations
and checkpoints recur on their schedule, so their cost per update so far is. The window follows
the host's speed if it changes (another job starting on the machine).
"""

import collections
import contextlib
import statistics
import time

from t2t_lite.run_dir.scalars import write_scalars
from t2t_lite.train.run_length import duration

SETTLING_UPDATES = 10  # not timed: tracing, XLA's compilations, the first batch shapes
TIMED_UPDATES = 40  # timed before the first estimate
WINDOW_UPDATES = 100  # the ETA's typical update is the mean of the last this many
COMPILED = 3.0  # an update over this many times the window's median compiled a new batch shape


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
        self.timed_from = None  # the step after which updates are timed (s₀)
        self.previous = self.started  # when the last update ended
        self.timed = []  # the seconds of each of the first TIMED_UPDATES updates after the settling ones
        self.recent = collections.deque(maxlen=WINDOW_UPDATES)  # the seconds of the last updates
        self.pending_pause = 0.0  # seconds paused since the last update ended
        self.paused_since_timed = 0.0  # seconds paused for evaluations and checkpoints since s₀
        self.window_start, self.window_tokens = self.started, 0.0  # for tokens/s since the last line

    @contextlib.contextmanager
    def pause(self):
        """Counts the time inside as an evaluation or a checkpoint, not as part of the next update."""
        began = time.time()
        try:
            yield
        finally:
            self.pending_pause += time.time() - began

    def updated(self, step: int, target_tokens: float, end: int, now: float = None) -> None:
        """Counts one update's tokens; after the first timed updates, says how long the run will take."""
        now = time.time() if now is None else now
        self.window_tokens += target_tokens
        done = step - self.start_step
        seconds = now - self.previous - self.pending_pause
        if done > SETTLING_UPDATES:
            self.recent.append(seconds)
            self.paused_since_timed += self.pending_pause
            if done <= SETTLING_UPDATES + TIMED_UPDATES:
                self.timed.append(seconds)
        self.previous, self.pending_pause = now, 0.0
        if done == SETTLING_UPDATES:
            self.timed_from = step
        elif done == SETTLING_UPDATES + TIMED_UPDATES and step < end:
            per_update = statistics.median(self.timed)
            bounded = self.train_minutes and self.started + 60.0 * self.train_minutes - now < per_update * (end - step)
            bound = f"; --train_minutes={self.train_minutes:g} stops it sooner" if bounded else ""
            self.log(
                f"On this machine: {per_update:.3g} s per update (updates {self.timed_from + 1:,}-{step:,}), so "
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
        if not self.recent:  # too early to leave the first updates out
            return (now - self.started) / max(step - self.start_step, 1)
        typical = COMPILED * statistics.median(self.recent)
        update = statistics.fmean(seconds for seconds in self.recent if seconds <= typical)
        updates_since_timed = step - self.timed_from  # ≥ 1: `recent` holds updates after s₀
        return update + self.paused_since_timed / updates_since_timed
