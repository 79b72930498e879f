"""Successive halving, rung by rung (Jamieson & Talwalkar 2016), with real pauses.

Rungs are at ``min_steps * eta**k`` steps, below the step budget. A trial runs up to the
next rung that is not decided yet and pauses there: it checkpoints and gives its GPUs
back, and while it waits it is no demand of its app. A rung is decided once every trial
that entered it (every trial the rung below kept) has a metric value there, or has ended
for another reason (error, cancel, no metric reported). Then the best ``ceil(n / eta)``
of the ``n`` with a value go on to the next rung and the others are stopped for real.
Ties go to the earlier trial.

The decisions are a pure function of the recorded rung values, so a restarted arbiter
reaches the same ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from themis.runtime.appfile import Halving


@dataclass(frozen=True)
class Decisions:
    stops: dict[str, int]  # trial -> the rung (steps) that stopped it
    decided: tuple[int, ...]  # rungs decided so far, ascending


def decide(
    halving: Halving,
    budget: int,
    trials: Sequence[str],
    values: dict[int, dict[str, float]],
    ended: set[str],
) -> Decisions:
    """What successive halving has decided given the metric values recorded so far.

    ``trials`` in submission order; ``values[rung][trial]`` the metric at that rung;
    ``ended`` the trials that stopped for another reason (they never block a rung).
    """
    order = {t: i for i, t in enumerate(trials)}
    sign = 1.0 if halving.mode == "min" else -1.0
    survivors = list(trials)
    stops: dict[str, int] = {}
    decided: list[int] = []
    for rung in halving.rungs(budget):
        at = values.get(rung, {})
        if any(t not in at and t not in ended for t in survivors):
            break  # the rung is not complete yet
        ranked = sorted((t for t in survivors if t in at), key=lambda t: (sign * at[t], order[t]))
        keep = math.ceil(len(ranked) / halving.eta)
        for t in ranked[keep:]:
            stops[t] = rung
        survivors = ranked[:keep]
        decided.append(rung)
    return Decisions(stops, tuple(decided))


def next_stop(halving: Halving | None, budget: int, steps: int, decided: Sequence[int]) -> int:
    """Where a trial that has done ``steps`` steps must pause next: the first undecided
    rung above them, or the end of its budget."""
    if halving is None:
        return budget
    for rung in halving.rungs(budget):
        if rung > steps and rung not in decided:
            return rung
    return budget


#: A trial stopped by successive halving (it lost at a rung): the store's state.
STOPPED_EARLY = "stopped-early"
#: Trial states after which a trial needs no more GPUs (the store's vocabulary).
ENDED = ("finished", STOPPED_EARLY, "failed", "cancelled")


@dataclass(frozen=True)
class Review:
    """What to do now: stop these trials (with why), resume these paused ones. ``silent``
    names the stopped trials that paused without a value at their rung: they failed to
    report, they did not lose."""

    decided: tuple[int, ...]
    stop: tuple[tuple[str, str], ...]
    promote: tuple[str, ...]
    silent: tuple[str, ...] = ()


def review(
    halving: Halving,
    budget: int,
    trials: Sequence[str],
    states: dict[str, str],
    steps: dict[str, int],
    values: dict[int, dict[str, float]],
) -> Review:
    """Successive halving's verdicts for one app.

    ``states`` are the trials' store states (``parked``: paused at a rung), ``steps`` their
    checkpointed steps, ``values[rung][trial]`` the metric recorded at each rung. Trials
    already ended are never named again.
    """
    rungs = halving.rungs(budget)
    parked = {t for t in trials if states.get(t) == "parked"}
    waits = {t: max((r for r in rungs if r <= steps.get(t, 0)), default=0) for t in parked}
    # Paused at a rung without having reported the metric there: cannot be ranked.
    silent = {t for t, r in waits.items() if t not in values.get(r, {})}
    # Every ended trial, those stopped included: a trial stopped without a value at its
    # rung (silent) must not block that rung; a loser of an earlier rung is no survivor
    # of later ones, and at its own rung it is still ranked by its recorded value.
    ended = {t for t in trials if states.get(t) in ENDED}
    decisions = decide(halving, budget, trials, values, ended | silent)
    stop: list[tuple[str, str]] = []
    for t, rung in decisions.stops.items():
        if states.get(t) in ENDED:
            continue
        at = values[rung]
        stop.append(
            (
                t,
                f"stopped by successive halving at step {rung}: {halving.metric} "
                f"{at[t]:.4g} not in the best 1/{halving.eta} of {len(at)}",
            )
        )
    stop += [(t, f"stopped: no {halving.metric} reported at its rung") for t in sorted(silent)]
    promote = tuple(
        t
        for t in trials
        if t in parked
        and t not in decisions.stops
        and t not in silent
        and waits[t] in decisions.decided
    )
    return Review(decisions.decided, tuple(stop), promote, tuple(sorted(silent)))
