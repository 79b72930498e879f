"""Successive halving decisions, hand-computed."""

from __future__ import annotations

from themis.runtime.loop.halving import decide, next_stop, review
from themis.runtime.state.appfile import Halving

H = Halving("loss", "min", 2, 10)
TRIALS = ["a", "b", "c", "d"]


def test_rung_waits_for_every_entrant() -> None:
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9}}
    got = decide(H, 40, TRIALS, values, set())
    assert got.stops == {} and got.decided == ()
    assert next_stop(H, 40, 10, got.decided) == 20
    assert next_stop(H, 40, 3, got.decided) == 10  # d must pause at 10 first


def test_worst_half_stopped_then_next_rung() -> None:
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9, "d": 0.3}}
    got = decide(H, 40, TRIALS, values, set())
    assert got.stops == {"a": 10, "c": 10} and got.decided == (10,)
    assert next_stop(H, 40, 10, got.decided) == 20
    # Rung 20 is entered by b and d only; a and c's values there do not matter.
    values[20] = {"b": 0.05, "d": 0.2, "a": 0.0}
    got = decide(H, 40, TRIALS, values, set())
    assert got.stops == {"a": 10, "c": 10, "d": 20} and got.decided == (10, 20)
    assert next_stop(H, 40, 20, got.decided) == 40  # b runs to its budget


def test_ended_trials_do_not_block_and_odd_counts_round_up() -> None:
    # d failed before rung 10: 3 values, keep ceil(3/2) = 2.
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9}}
    assert decide(H, 40, TRIALS, values, {"d"}).stops == {"c": 10}


def test_max_mode_and_ties_go_to_the_earlier_trial() -> None:
    h = Halving("acc", "max", 2, 10)
    values = {10: {"a": 0.7, "b": 0.7, "c": 0.9, "d": 0.1}}
    assert decide(h, 40, TRIALS, values, set()).stops == {"b": 10, "d": 10}


def test_no_rung_at_or_beyond_the_budget() -> None:
    assert H.rungs(10) == []
    assert H.rungs(41) == [10, 20, 40]
    assert decide(H, 10, TRIALS, {10: {"a": 1.0}}, set()).stops == {}
    assert next_stop(H, 10, 0, ()) == 10
    assert next_stop(None, 10, 0, ()) == 10


def test_review_stops_losers_promotes_parked_winners_and_stops_the_silent() -> None:
    states = {"a": "parked", "b": "parked", "c": "parked", "d": "running"}
    steps = {"a": 10, "b": 10, "c": 10, "d": 7}
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9}}
    # d has not reached rung 10: nothing is decided, nobody moves.
    got = review(H, 40, TRIALS, states, steps, values)
    assert (got.decided, got.stop, got.promote) == ((), (), ())
    # d pauses at 10 too, with a value: a and c lose, b and d go on.
    states["d"], steps["d"] = "parked", 10
    values[10]["d"] = 0.3
    got = review(H, 40, TRIALS, states, steps, values)
    assert got.decided == (10,)
    assert [t for t, _ in got.stop] == ["a", "c"]
    assert "at step 10: loss 0.5 not in the best 1/2 of 4" in got.stop[0][1]
    assert got.promote == ("b", "d")
    # Once stopped, a trial is not named again.
    states.update(a="stopped-early", c="stopped-early", b="running", d="parked")
    steps["d"] = 20  # d paused at 20 without reporting: it cannot be ranked
    got = review(H, 40, TRIALS, states, steps, values)
    assert got.stop == (("d", "stopped: no loss reported at its rung"),)
    assert got.promote == ()


def test_a_trial_stopped_for_silence_never_blocks_its_rung() -> None:
    """The deadlock: a trial that paused before its rung without a value (its function
    returned early) is stopped; the rung must then stay decided without it, or every
    other trial stays parked forever while the app holds nothing."""
    states = {"a": "parked", "b": "parked", "c": "parked", "d": "parked"}
    steps = {"a": 10, "b": 10, "c": 10, "d": 7}
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9}}
    got = review(H, 40, TRIALS, states, steps, values)
    assert dict(got.stop)["d"] == "stopped: no loss reported at its rung"
    # The next tick: c and d are stopped now. Rung 10 stays decided and a, b go on.
    states.update(c="stopped-early", d="stopped-early")
    got = review(H, 40, TRIALS, states, steps, values)
    assert got.decided == (10,)
    assert got.stop == () and got.promote == ("a", "b")


def test_losers_of_an_earlier_rung_do_not_change_later_decisions() -> None:
    states = {"a": "stopped-early", "b": "parked", "c": "stopped-early", "d": "parked"}
    steps = {"a": 10, "b": 20, "c": 10, "d": 20}
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9, "d": 0.3}, 20: {"b": 0.05, "d": 0.2}}
    got = review(H, 40, TRIALS, states, steps, values)
    assert got.decided == (10, 20)
    assert [t for t, _ in got.stop] == ["d"] and got.promote == ("b",)
