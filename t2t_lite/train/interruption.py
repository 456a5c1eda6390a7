"""Stopping a run cleanly on SIGINT (Ctrl-C) or SIGTERM (a job manager, `docker stop`, `kill`).

The first signal asks the training loop to stop after the update in progress: it saves a
checkpoint of the step it reached, releases the run's lock and ends with one line, and
t2t-trainer exits 128 + the signal's number (130, 143), as a shell reports a process that a
signal ended. The run resumes exactly from that checkpoint. A second signal ends the process
at once, without saving: the next run resumes from the last checkpoint written.

Under TF_CONFIG a checkpoint needs every worker, so the first signal already ends the worker at
once, without saving; the others stop when they find it gone (`distribution.lost_worker_message`),
and relaunching all of them resumes from the chief's last checkpoint.
"""

import os
import signal
import threading

from t2t_lite.train import tf_config

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The run stopped on a signal, its step saved; `exit_code` is 128 + the signal's number."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.exit_code = 128 + signal_number


class StopSignals:
    """A context in which SIGINT and SIGTERM set `received` (the first) instead of ending the process.

    Installed only in the main thread (where Python runs signal handlers); elsewhere, and outside the
    context, signals act as they did before.
    """

    def __init__(self):
        self.received = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in SIGNALS}
        return self

    def __exit__(self, *exc_info):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _handle(self, number, frame):
        name = signal.Signals(number).name
        if self.received is None and not tf_config.is_multi_worker():
            self.received = number
            _say(
                f"t2t-trainer: {name}: stopping after this update, with a checkpoint (again: at once, without saving)."
            )
            return
        why = "under TF_CONFIG the workers save together" if self.received is None else "as asked"
        _say(
            f"t2t-trainer: {name}: stopped at once, without saving ({why}); the next run resumes from the last "
            f"checkpoint written{', once every worker is relaunched' if tf_config.is_multi_worker() else ''}."
        )
        os._exit(128 + number)

    def stop(self, step: int, latest_checkpoint: str) -> None:
        """Raises Interrupted when a signal came: call once the step reached is saved."""
        if self.received is None:
            return
        name = signal.Signals(self.received).name
        resumes = f"rerun the same command to resume from {latest_checkpoint}" if latest_checkpoint else "nothing saved"
        raise Interrupted(f"stopped by {name} at step {step}; {resumes}.", self.received)


def _say(line: str) -> None:
    # os.write, not print: a signal handler may run while print holds sys.stderr's lock.
    os.write(2, (line + "\n").encode())
