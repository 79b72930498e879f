"""Successive halving decisions, hand-computed."""

from __future__ import annotations

from themis.runtime.appfile import Halving
from themis.runtime.halving import halving_stops

H = Halving("loss", "min", 2, 10)
TRIALS = ["a", "b", "c", "d"]


def test_rung_waits_for_every_entrant() -> None:
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9}}
    assert halving_stops(H, 40, TRIALS, values, set()) == {}


def test_worst_half_stopped_then_next_rung() -> None:
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9, "d": 0.3}}
    assert halving_stops(H, 40, TRIALS, values, set()) == {"a": 10, "c": 10}
    # Rung 20 is entered by b and d only; a and c's values there do not matter.
    values[20] = {"b": 0.05, "d": 0.2, "a": 0.0}
    assert halving_stops(H, 40, TRIALS, values, set()) == {"a": 10, "c": 10, "d": 20}


def test_ended_trials_do_not_block_and_odd_counts_round_up() -> None:
    # d failed before rung 10: 3 values, keep ceil(3/2) = 2.
    values = {10: {"a": 0.5, "b": 0.1, "c": 0.9}}
    assert halving_stops(H, 40, TRIALS, values, {"d"}) == {"c": 10}


def test_max_mode_and_ties_go_to_the_earlier_trial() -> None:
    h = Halving("acc", "max", 2, 10)
    values = {10: {"a": 0.7, "b": 0.7, "c": 0.9, "d": 0.1}}
    assert halving_stops(h, 40, TRIALS, values, set()) == {"b": 10, "d": 10}


def test_no_rung_at_or_beyond_the_budget() -> None:
    assert H.rungs(10) == []
    assert H.rungs(41) == [10, 20, 40]
    assert halving_stops(H, 10, TRIALS, {10: {"a": 1.0}}, set()) == {}
