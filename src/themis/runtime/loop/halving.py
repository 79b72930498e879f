"""Successive halving, rung by rung (Jamieson & Talwalkar 2016), with real pauses.

Rungs are at ``min_steps * eta**k`` steps, below the step budget. A trial runs up to the
next rung that is not decided yet and pauses there: it checkpoints and gives its GPUs
back, and while it waits it is no demand of its app. A rung is decided once every trial
that entered it (every trial the rung below kept) has a metric value there, or has ended
for another reason (error, cancel, no metric reported). Then the best ``ceil(n / eta)``
of the ``n`` with a value go on to the next rung and the others are stopped for real.
Ties go to the earlier trial.

The decisions are a pure function of the recorded rung values, so a restarted arbiter
reaches the same ones. The rules themselves (``decide``, ``next_stop``) are
``themis.model.halving``'s, shared with the simulator; this module adds what the runtime's
store needs (trial states, silent trials, reasons).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The pure rules live in themis.model.halving, shared with the simulator.
from themis.model.halving import Decisions, decide, next_stop
from themis.runtime.state.appfile import Halving
from themis.runtime.state.store import ENDED, STOPPED_EARLY

__all__ = ["ENDED", "STOPPED_EARLY", "Decisions", "Review", "decide", "next_stop", "review"]


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
