"""Successive halving inside the arbiter: metric values recorded at rungs, as trials
report them (the decisions themselves are ``halving.py``'s pure functions).

A value counts for every rung at or below the step it was reported at that has no value
from that trial yet; it is written to the store at once, so that a restarted arbiter
decides exactly as this one would have.
"""

from __future__ import annotations

from collections.abc import Iterable

from themis.runtime.loop.halving import Review, review
from themis.runtime.loop.live import LiveApp
from themis.runtime.state.store import Store


def record(
    live: LiveApp, store: Store, trial_id: str, reports: Iterable[tuple[int, dict[str, float]]]
) -> bool:
    """Record the halving metric of ``reports``; True if a rung got a new value."""
    halving = live.spec.halving
    recorded = False
    for steps, metrics in reports:
        live.reported.update(metrics)
        if halving is None:
            continue
        value = metrics.get(halving.metric)
        if value is None:
            continue
        live.metric_seen = True
        for rung in halving.rungs(live.spec.steps):
            if steps >= rung and trial_id not in live.rungs.get(rung, {}):
                live.rungs.setdefault(rung, {})[trial_id] = value
                store.add_rung(live.app_id, trial_id, rung, value)
                recorded = True
    return recorded


def verdict(live: LiveApp) -> Review | None:
    """What successive halving says about ``live`` now (None without halving)."""
    halving = live.spec.halving
    if halving is None:
        return None
    trials = [j.job_id for j in live.state.jobs]
    result = review(halving, live.spec.steps, trials, live.trial_state, live.durable, live.rungs)
    live.decided = result.decided
    return result
