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
