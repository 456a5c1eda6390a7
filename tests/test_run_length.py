"""A run's length fitted to --train_minutes, so the linear decay ends inside the bound (t2t_lite.run_length)."""

import json

import pytest

from t2t_lite import run_length


def fitted(train_steps=10**6, decay_steps=20, train_minutes=10.0):
    """A fitting RunLength whose clock started at 0 s, step 0, and a list for the lines it logs."""
    lines = []
    steps = run_length.RunLength(train_steps, decay_steps, train_minutes, fit=True)
    steps.start_clock(0, 0.0)
    return steps, lines


def test_the_count_fills_the_bound_less_the_reserve_and_is_fixed_once_the_decay_begins(tmp_path):
    steps, lines = fitted()
    bound = 600 * (1 - run_length.RESERVE)  # 588 s of the 10 minutes
    # (step, seconds since the start) -> the count: step + ⌊(588 − now) / (now / step)⌋, decay start = count − 19
    for step, now, count in [(10, 100.0, 10 + int((bound - 100) / 10)),       # 10 s per update: 58
                             (20, 250.0, 20 + int((bound - 250) / 12.5)),      # a slower stretch: 47
                             (25, 280.0, 25 + int((bound - 280) / 11.2)),      # faster again: 52, decay from 33
                             (35, 400.0, 52)]:  # the decay began at step 33, between measurements: 52 stays
        steps.measure(step, now, str(tmp_path), lines.append)
        assert steps.end == count == int(steps.variable.numpy()), step
    assert steps.fixed and steps.decay_start == 33
    steps.measure(50, 1000.0, str(tmp_path), lines.append)  # over time now: moving the end would jump the rate
    assert steps.end == 52
    assert json.loads((tmp_path / run_length.PLAN_FILE).read_text())["train_steps"] == 52
    assert "ends at step 58" in lines[0] and "--train_steps=52 without --fit_train_steps_to_minutes" in lines[-1]
    assert len(lines) == 2


def test_the_count_never_exceeds_train_steps(tmp_path):
    steps, lines = fitted(train_steps=30)
    steps.measure(10, 10.0, str(tmp_path), lines.append)  # 1 s per update: 588 would fit
    assert steps.end == 30 and not steps.fixed


def test_without_fitting_the_count_is_train_steps_and_never_moves(tmp_path):
    steps = run_length.RunLength(500, 100)
    steps.start_clock(0, 0.0)
    steps.measure(10, 1000.0, str(tmp_path), print)
    assert steps.end == 500 == int(steps.variable.numpy()) and steps.fixed
    assert run_length.RunLength(500, 0).variable is None  # no decay: the schedule has nothing to read


@pytest.mark.parametrize("minutes, decay", [(0.0, 100), (10.0, 0)])
def test_fitting_needs_a_time_bound_and_a_decay(minutes, decay):
    with pytest.raises(ValueError, match="--fit_train_steps_to_minutes.*--train_minutes.*learning_rate_decay_steps"):
        run_length.RunLength(1000, decay, minutes, fit=True)


@pytest.mark.parametrize("restored, taken_up", [(40, True), (33, True), (32, False)])
def test_a_resumed_run_ends_the_decay_an_earlier_process_began(tmp_path, restored, taken_up):
    (tmp_path / run_length.PLAN_FILE).write_text(json.dumps({"train_steps": 52}))
    steps, lines = fitted()
    steps.resume(str(tmp_path), restored, lines.append)
    assert (steps.end == 52 and steps.fixed) is taken_up
    assert ("Resuming inside the decay" in lines[0]) is taken_up


def test_a_damaged_plan_is_named_and_the_run_fitted_anew(tmp_path):
    (tmp_path / run_length.PLAN_FILE).write_text('{"train_ste')
    steps, lines = fitted()
    steps.resume(str(tmp_path), 40, lines.append)
    assert lines[0].startswith(f"WARNING: {tmp_path / run_length.PLAN_FILE} cannot be read")
    assert not steps.fixed
    steps.measure(41, 100.0, str(tmp_path), lines.append)
    assert steps.end > 41


def test_a_run_resumed_without_fitting_says_which_count_it_follows(tmp_path):
    (tmp_path / run_length.PLAN_FILE).write_text(json.dumps({"train_steps": 52}))
    lines = []
    run_length.RunLength(60, 20).resume(str(tmp_path), 40, lines.append)
    assert "fitted this run to 52 steps" in lines[0] and "--train_steps=60" in lines[0]
