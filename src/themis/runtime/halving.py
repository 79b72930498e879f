"""Successive halving, decided rung by rung as trials report (Jamieson & Talwalkar 2016).

Rungs are at ``min_steps * eta**k`` steps. A rung is decided once every trial that entered
it (every trial the rung below kept) has a metric value there, or has ended for another
reason (budget spent without reporting, error, cancel). Then the best ``ceil(n / eta)`` of
the ``n`` with a value go on and the others are stopped for real, freeing their GPUs.

Unlike the textbook algorithm, trials do not wait at a rung for the others: a trial that
got there first keeps training (a paused trial would hold no GPUs yet count as demand),
and is stopped when the rung is decided if it lost. The price is a few steps of wasted
work; the gain is that no GPU sits idle on a barrier. Ties go to the earlier trial.
The decisions are a pure function of the recorded rung values, so a restarted arbiter
reaches the same ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from themis.runtime.appfile import Halving


def halving_stops(
    halving: Halving,
    budget: int,
    trials: Sequence[str],
    values: dict[int, dict[str, float]],
    ended: set[str],
) -> dict[str, int]:
    """Trials successive halving stops, each with the rung (in steps) that stopped it.

    ``trials`` in submission order; ``values[rung][trial]`` the metric at that rung;
    ``ended`` the trials that stopped for another reason (they never block a rung).
    """
    order = {t: i for i, t in enumerate(trials)}
    sign = 1.0 if halving.mode == "min" else -1.0
    survivors = list(trials)
    stops: dict[str, int] = {}
    for rung in halving.rungs(budget):
        at = values.get(rung, {})
        have = [t for t in survivors if t in at]
        if any(t not in at and t not in ended for t in survivors):
            break  # the rung is not complete yet
        ranked = sorted(have, key=lambda t: (sign * at[t], order[t]))
        keep = math.ceil(len(ranked) / halving.eta)
        for t in ranked[keep:]:
            stops[t] = rung
        survivors = ranked[:keep]
    return stops
