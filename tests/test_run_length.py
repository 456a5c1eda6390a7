"""A run's length fitted to --train_minutes, so the linear decay ends inside the bound (t2t_lite.train.run_length)."""

import json

import pytest

from t2t_lite.train import run_length, schedule


def fitted(train_steps=10**6, decay_steps=20, train_minutes=10.0):
    """A fitting RunLength whose updates started at 0 s, and a list for the lines it logs."""
    lines = []
    steps = run_length.RunLength(train_steps, decay_steps, train_minutes, fit=True)
    steps.start_clock(0.0)
    return steps, lines


def test_the_count_fills_the_bound_less_the_reserve_and_is_fixed_once_the_decay_begins(tmp_path):
    steps, lines = fitted()
    bound = 600 * (1 - run_length.RESERVE)  # 588 s of the 10 minutes
    # (step, seconds since the start) -> the count. Updates are timed from the first measurement after
    # the settling tenth (60 s): step 10 at 100 s; then step + ⌊(588 − now) / (seconds per update since)⌋.
    for step, now, count in [
        (5, 50.0, 10**6),  # settling: the first updates (start-up, compilations) are not timed
        (10, 100.0, 10**6),  # timed from here
        (20, 200.0, 20 + int((bound - 200) / 10)),  # 10 s per update: 58, decay from 39
        (30, 330.0, 30 + int((bound - 330) / 11.5)),  # a slower stretch: 52, decay from 33
        (32, 345.0, 32 + int((bound - 345) / (245 / 22))),  # 53, decay from 34
        (40, 420.0, 53),
    ]:  # the decay began at step 34, between measurements: 53 stays
        steps.measure(step, now, str(tmp_path), lines.append)
        assert steps.end == count == int(steps.variable.numpy()), step
    assert steps.fixed and steps.decay_start == 34
    steps.measure(50, 1000.0, str(tmp_path), lines.append)  # over time now: moving the end would jump the rate
    assert steps.end == 53
    assert json.loads((tmp_path / run_length.PLAN_FILE).read_text())["train_steps"] == 53
    assert "ends at step 58" in lines[0]
    assert "The decay began at step 34 and ends the run at step 53" in lines[-1]
    assert "--train_steps=53 without --fit_train_steps_to_minutes" in lines[-1] and len(lines) == 2


def test_the_first_estimate_waits_for_a_twentieth_of_the_bound_of_timed_updates(tmp_path):
    steps, lines = fitted()
    steps.measure(60, 60.0, str(tmp_path), lines.append)  # timed from here
    steps.measure(61, 61.0, str(tmp_path), lines.append)  # one update timed: noise, not an estimate
    steps.measure(80, 89.0, str(tmp_path), lines.append)  # 29 s timed: still less than 30 s (600 / 20)
    assert steps.end == 10**6 and not lines
    steps.measure(81, 90.0, str(tmp_path), lines.append)  # 30 s for 21 updates
    assert steps.end == 81 + int((588 - 90) / (30 / 21)) and "ends at step 429 " in lines[0]


def test_the_count_never_exceeds_train_steps(tmp_path):
    steps, lines = fitted(train_steps=300)
    steps.measure(60, 60.0, str(tmp_path), lines.append)
    steps.measure(100, 100.0, str(tmp_path), lines.append)  # 1 s per update: 588 would fit
    assert steps.end == 300 and not steps.fixed and "ends at step 300 " in lines[0]


def test_without_fitting_the_count_is_train_steps_and_never_moves(tmp_path):
    steps = run_length.RunLength(500, 100)
    steps.start_clock(0.0)
    steps.measure(10, 1000.0, str(tmp_path), print)
    assert steps.end == 500 and steps.fixed and steps.variable is None  # the schedule reads --train_steps


@pytest.mark.parametrize("minutes, decay", [(0.0, 100), (10.0, 0)])
def test_fitting_needs_a_time_bound_and_a_decay(minutes, decay):
    with pytest.raises(ValueError, match="--fit_train_steps_to_minutes.*--train_minutes.*learning_rate_decay_steps"):
        run_length.RunLength(1000, decay, minutes, fit=True)


def test_a_decay_longer_than_the_time_left_starts_at_once_with_a_warning(tmp_path):
    steps, lines = fitted()
    steps.measure(10, 100.0, str(tmp_path), lines.append)  # timed from here
    steps.measure(20, 500.0, str(tmp_path), lines.append)  # 40 s per update: the 88 s left hold 2 updates
    assert steps.end == 22 and steps.fixed
    assert "holds only 2 more updates, fewer than learning_rate_decay_steps=20" in lines[1]
    assert "starts now at 0.10 of eq. 3" in lines[1] and "The decay began at step 20 " in lines[2]


def test_a_decay_start_an_estimate_moves_behind_the_step_starts_from_1_when_the_reserve_holds_it(tmp_path):
    steps, lines = fitted()
    steps.measure(10, 100.0, str(tmp_path), lines.append)  # timed from here
    steps.measure(37, 370.0, str(tmp_path), lines.append)  # 10 s per update: ends at 58, decay from 39
    assert steps.end == 58 and steps.decay_start == 39 and not steps.fixed
    # An evaluation's 15 s: 295 s / 28 updates; less the reserve the 193 s left hold 18 updates (decay from
    # 37, behind step 38), the whole 205 s hold 19: the decay starts at step 38 from 1 and ends at 57.
    steps.measure(38, 395.0, str(tmp_path), lines.append)
    assert steps.fixed and steps.end == 57 and steps.decay_start == 38
    assert not any("WARNING" in line for line in lines)
    assert "The decay began at step 38 and ends the run at step 57" in lines[-1]


def test_a_decay_start_moved_behind_the_step_further_than_the_reserve_holds_starts_part_way(tmp_path):
    steps, lines = fitted()
    steps.measure(10, 100.0, str(tmp_path), lines.append)
    steps.measure(37, 370.0, str(tmp_path), lines.append)  # ends at 58, decay from 39
    steps.measure(38, 420.0, str(tmp_path), lines.append)  # 320 s / 28: even the whole 180 s left hold only 15
    assert steps.fixed and steps.end == 38 + int((588 - 420) / (320 / 28)) == 52
    assert "holds only 14 more updates, fewer than learning_rate_decay_steps=20" in lines[-2]
    assert "The decay began at step 38 and ends the run at step 52" in lines[-1]


def plan_in(directory, text):
    (directory / run_length.PLAN_FILE).write_text(text)


@pytest.mark.parametrize("restored", [40, 33])
def test_a_resumed_run_ends_the_decay_an_earlier_process_began(tmp_path, restored):
    plan_in(tmp_path, json.dumps({"train_steps": 52}))  # decay of 20: from step 33
    steps, lines = fitted()
    steps.resume(str(tmp_path), restored, lines.append)
    assert steps.end == 52 == int(steps.variable.numpy()) and steps.fixed
    assert "Resuming inside the decay fitted by an earlier process: the run ends at step 52" in lines[0]


def test_a_lower_train_steps_on_resume_ends_the_run_there_and_says_so(tmp_path):
    plan_in(tmp_path, json.dumps({"train_steps": 52}))
    steps, lines = fitted(train_steps=45)
    steps.resume(str(tmp_path), 40, lines.append)
    assert steps.end == 45 and "--train_steps=45 ends it before the 52 fitted" in lines[0]


@pytest.mark.parametrize(
    "text, restored, reason",
    [
        (json.dumps({"train_steps": 52}), 32, "step 32 comes before the decay it fixed (52 steps)"),
        (json.dumps({"train_steps": 52}), 0, "step 0 comes before the decay"),  # no checkpoint: a stale plan
        ('{"train_ste', 40, "it cannot be read"),
    ],
)
def test_a_plan_not_taken_up_is_moved_aside_and_the_run_fitted_anew(tmp_path, text, restored, reason):
    plan_in(tmp_path, text)
    steps, lines = fitted()
    steps.resume(str(tmp_path), restored, lines.append)
    assert not steps.fixed and not (tmp_path / run_length.PLAN_FILE).exists()
    assert [path.read_text() for path in tmp_path.glob(f"set_aside/*/{run_length.PLAN_FILE}")] == [text]
    assert lines[0].startswith(f"Moved {tmp_path / run_length.PLAN_FILE} to ") and reason in lines[0]
    steps.measure(restored + 60, 60.0, str(tmp_path), lines.append)
    steps.measure(restored + 100, 100.0, str(tmp_path), lines.append)
    assert steps.end == restored + 100 + 488  # 1 s per update, 488 s left


def said(warnings):
    """The warnings of stopped_by_the_clock as one text."""
    return " | ".join(warnings)


def test_a_run_the_clock_stops_says_how_far_its_decay_got(tmp_path):
    steps, _ = fitted()
    assert "ran out at step 5, before the decay began (the run was not fitted yet)" in said(
        steps.stopped_by_the_clock(5)
    )
    steps.measure(10, 100.0, str(tmp_path), print)
    steps.measure(20, 200.0, str(tmp_path), print)  # 10 s per update: the run ends at 58, the decay from 39
    assert "before the decay began (the run was fitted to 58 steps)" in said(steps.stopped_by_the_clock(30))
    steps.measure(39, 390.0, str(tmp_path), print)  # the decay's first step fixes the count
    assert steps.fixed and steps.end == 58
    # Update 54 took (58 + 1 - 54) / 20 of eq. 3; the fitted run's last takes 1/20.
    [note] = steps.stopped_by_the_clock(54)
    assert "ran out at step 54 of the 58 fitted, with the decay at 0.25 of eq. 3's rate instead of 1/20" in note
    assert steps.stopped_by_the_clock(58) == []


def test_an_unfitted_run_stopped_by_the_clock_past_its_warmup_has_nothing_to_say():
    steps = run_length.RunLength(500, 100, 10.0, warmup_steps=8)
    assert steps.stopped_by_the_clock(10) == []


def unfitted(train_steps=10**6, warmup_steps=100, train_minutes=10.0):
    """A RunLength bounded by the clock but not fitted (no decay), its updates started at 0 s."""
    steps = run_length.RunLength(train_steps, 0, train_minutes, warmup_steps=warmup_steps)
    steps.start_clock(0.0)
    return steps


def test_a_bound_that_ends_the_run_inside_the_warmup_is_warned_of_at_the_first_estimate(tmp_path):
    steps, lines = unfitted(), []
    steps.measure(6, 60.0, str(tmp_path), lines.append)  # the settling tenth has passed: timed from here
    steps.measure(8, 80.0, str(tmp_path), lines.append)  # 20 s timed: less than a twentieth of the bound
    assert not lines
    # 10 s per update, 510 s left: 9 + 51 = 60 updates, and eq. 3 rises until step 100.
    steps.measure(9, 90.0, str(tmp_path), lines.append)
    [warning] = lines
    assert warning.startswith(
        "WARNING: at 10 s per update --train_minutes=10 holds about 60 updates, fewer "
        "than eq. 3's learning_rate_warmup_steps=100"
    ), warning
    assert "never rise above 0.60 of the peak" in warning and "sqrt(W/100)" in warning
    steps.measure(20, 200.0, str(tmp_path), lines.append)  # said once
    assert len(lines) == 1 and steps.end == 10**6  # an unfitted run's length does not move


@pytest.mark.parametrize("train_steps, warmup_steps", [(10**6, 60), (80, 100)])
def test_no_warning_when_the_bound_holds_the_warmup_or_train_steps_ends_inside_it(tmp_path, train_steps, warmup_steps):
    """The bound holds 60 updates: a 60-step warm-up ends inside it; a --train_steps of 80 inside a
    100-step warm-up is the user's choice (a smoke run), not the clock's doing."""
    steps, lines = unfitted(train_steps, warmup_steps), []
    for step, now in [(6, 60.0), (9, 90.0), (20, 200.0)]:
        steps.measure(step, now, str(tmp_path), lines.append)
    assert lines == []


def test_a_run_the_clock_stops_inside_the_warmup_says_how_far_eq_3_rose():
    steps = unfitted(warmup_steps=100)
    [warning] = steps.stopped_by_the_clock(40)
    # Eq. 3 rises linearly to its peak at step 100: update 40 took 40/100 of the peak.
    noam = schedule.NoamSchedule(hidden_size=256, warmup_steps=100)
    assert float(noam(39)) / float(noam(99)) == pytest.approx(0.40)
    assert warning == (
        "WARNING: --train_minutes=10 ran out at step 40, inside eq. 3's 100-step warm-up: the "
        "learning rate was still rising, at 0.40 of its peak."
    )
    assert steps.stopped_by_the_clock(100) == []


def test_a_fitted_run_stopped_inside_the_warmup_gives_both_warnings(tmp_path):
    steps = run_length.RunLength(10**6, 20, 10.0, fit=True, warmup_steps=100)
    steps.start_clock(0.0)
    lines = []
    steps.measure(6, 60.0, str(tmp_path), lines.append)
    steps.measure(9, 90.0, str(tmp_path), lines.append)  # fitted to 9 + 498 / 10 = 58 steps, inside the warm-up
    assert "ends at step 58 " in lines[0] and "holds about 60 updates" in lines[1]
    warmup, decay = steps.stopped_by_the_clock(30)
    assert "inside eq. 3's 100-step warm-up" in warmup and "before the decay began" in decay
