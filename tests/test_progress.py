"""The trainer's progress lines (t2t_lite.train.progress): the early estimate of the run's time and the ETA."""

import tensorflow as tf

from t2t_lite.train.progress import SETTLING_UPDATES, TIMED_UPDATES, WINDOW_UPDATES, Progress


def run(progress, step, end, seconds, first_seconds=None):
    """Feeds updates until `step`, each taking `seconds` (the settling ones `first_seconds`); returns the clock."""
    now = progress.started
    for update in range(progress.start_step + 1, step + 1):
        settling = update - progress.start_step <= SETTLING_UPDATES
        now += first_seconds if settling and first_seconds else seconds
        progress.updated(update, 100.0, end, now)
    return now


def test_the_estimate_leaves_out_the_settling_updates_and_says_when_the_clock_ends_the_run_first(tmp_path):
    lines = []
    progress = Progress(200, train_minutes=0, writer=None, log=lines.append, now=0.0)
    run(progress, 200 + SETTLING_UPDATES + TIMED_UPDATES, end=1200, seconds=0.25, first_seconds=5.0)
    assert lines == [
        "On this machine: 0.25 s per update (updates 211-250), so the 950 updates left take about 0:03:57. "
        "The model is the same on any host; only this time is the machine's."
    ]
    lines.clear()
    bounded = Progress(0, train_minutes=1, writer=None, log=lines.append, now=0.0)
    run(bounded, SETTLING_UPDATES + TIMED_UPDATES, end=1000, seconds=0.5)
    assert lines[0].endswith("take about 0:07:55; --train_minutes=1 stops it sooner. " + lines[0].split(". ")[-1])


def test_the_estimate_is_the_typical_update_not_the_ones_that_compiled_a_new_batch_shape():
    # With XLA, an update that meets a new length bucket compiles the step again: here every fourth
    # of the timed updates takes 3 s, the others 0.4 s (their mean would be 1.05 s).
    lines = []
    progress = Progress(0, train_minutes=0, writer=None, log=lines.append, now=0.0)
    now = run(progress, SETTLING_UPDATES, end=1000, seconds=5.0)
    for update in range(SETTLING_UPDATES + 1, SETTLING_UPDATES + TIMED_UPDATES + 1):
        now += 3.0 if update % 4 == 0 else 0.4
        progress.updated(update, 100.0, 1000, now)
    assert lines[0].startswith(
        f"On this machine: 0.4 s per update (updates {SETTLING_UPDATES + 1}-{SETTLING_UPDATES + TIMED_UPDATES}), "
        f"so the {1000 - SETTLING_UPDATES - TIMED_UPDATES:,} updates left take about 0:06:20. "
    ), lines


def test_a_line_shows_tokens_per_second_since_the_last_line_and_the_eta_from_the_timed_updates(tmp_path):
    lines = []
    progress = Progress(
        0, train_minutes=0, writer=tf.summary.create_file_writer(str(tmp_path)), log=lines.append, now=0.0
    )
    now = run(progress, 100, end=300, seconds=0.5, first_seconds=4.0)
    progress.line(100, 300, loss=3.25, learning_rate=0.001, now=now)
    # 10 settling updates of 4 s, then 90 of 0.5 s: 10,000 tokens in 85 s; 200 left at 0.5 s each.
    assert lines[-1] == "step 100/300  loss 3.2500  learning_rate 0.001  tokens/s 118  ETA 0:01:40"
    now = run_from(progress, 100, 150, 1.0, now)
    progress.line(150, 300, loss=3.0, learning_rate=0.001, now=now)
    # Slower updates since: 5,000 tokens in 50 s; the ETA follows the last 100 updates (50 of 0.5 s,
    # 50 of 1 s: 0.75 s each), 150 left.
    assert WINDOW_UPDATES == 100
    assert lines[-1] == "step 150/300  loss 3.0000  learning_rate 0.001  tokens/s 100  ETA 0:01:52"


def test_the_eta_leaves_out_updates_that_compiled_and_spreads_evaluations_over_the_updates(tmp_path, monkeypatch):
    # An XLA run: every fifth update after the settling ones compiles a new batch shape (3 s, the
    # others 0.4 s), and after update 110 an evaluation pauses the run for 20 s. Compilations stop
    # once every length bucket has been met; evaluations recur. So the ETA is 0.4 s per update plus
    # the pause's 20 s over the 200 timed updates: 0.5 s for each of the 1,000 updates left (the mean
    # of all 200 timed updates, as the ETA was before, would say 1.02 s: 0:17:00).
    lines = []
    progress = Progress(
        0, train_minutes=0, writer=tf.summary.create_file_writer(str(tmp_path)), log=lines.append, now=0.0
    )
    now = run(progress, SETTLING_UPDATES, end=1210, seconds=5.0)
    for update in range(SETTLING_UPDATES + 1, 211):
        now += 3.0 if update % 5 == 0 else 0.4
        if update == 111:
            clock = iter([0.0, 20.0])  # the clock at the evaluation's start and end
            monkeypatch.setattr("t2t_lite.train.progress.time.time", lambda: next(clock))
            with progress.pause():
                pass
            now += 20.0
        progress.updated(update, 100.0, 1210, now)
    progress.line(210, 1210, loss=2.0, learning_rate=0.001, now=now)
    assert lines[-1].endswith("ETA 0:08:20"), lines[-1]


def run_from(progress, step, until, seconds, now):
    for update in range(step + 1, until + 1):
        now += seconds
        progress.updated(update, 100.0, 300, now)
    return now
