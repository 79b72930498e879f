"""The round's renewal step: ending grants renewed in place, before the auction.

``renewal_share``: the worst-off apps' ending grants are renewed on their GPUs, unless a
reservation needs those GPUs (the reservation is judged without them). An app worse off
than most gains nothing from handing its GPUs to another worse-off app and taking others
back (a restart each way); only better-off apps' ending leases go up for grabs.
``renew_within_share``: an app that holds no more than its fair share of the cluster
would get those GPUs back from any share-fair allocation, so taking them away only buys a
restart each way.

Two functions around the reservation step: ``choose_renewals`` before it (which grants
would be renewed), ``renewal`` after it (renew those the reservation left alone).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from themis.arbiter.reservation import next_gang, on_best_span
from themis.arbiter.round_state import RoundState
from themis.mechanism.view import Assignment, Schedule, SchedulingView
from themis.model.state import AppState, JobState


def choose_renewals(state: RoundState) -> None:
    """Fill ``keeping`` (the ending grants to renew) and ``renewing`` (their GPUs)."""
    knobs, wanting, ending = state.knobs, state.wanting, state.ending
    keeping: list[JobState] = []
    if ending and (knobs.renewal_share > 0 or knobs.renew_within_share):
        keepers: set[str] = set()
        if knobs.renewal_share > 0:
            count = max(len(state.offered), renewed_count(len(wanting), knobs.renewal_share))
            keepers.update(a.app_id for a in wanting[:count])
        if knobs.renew_within_share:
            size = knobs.cluster.size
            keepers.update(a.app_id for a in wanting if within_share(a, state.view, size))
        if wanting and wanting[0].app_id in keepers:
            # The worst-off app renews only what leaves room for its next gang: else
            # its reservation would take its own renewed GPUs from its running jobs
            # (a restart each way for nothing). Its ending leases go to the auction,
            # as in the paper's round, and its app scheduler chooses what runs.
            worst = wanting[0]
            waiting_gang = next_gang(worst)
            kept_back = {g for j in ending if j.app.app_id in keepers for g in j.gpus}
            if (
                waiting_gang is not None
                and on_best_span(knobs.cluster, waiting_gang.gang, state.pool - kept_back) is None
            ):
                keepers.discard(worst.app_id)
        keeping = [j for j in ending if j.app.app_id in keepers]
    state.keeping = keeping
    state.renewing = {g for j in keeping for g in j.gpus}


def renewal(state: RoundState) -> None:
    """Renew ``keeping`` in place, except grants on GPUs the reservation step took; the
    renewed GPUs leave the pool and count as kept, and apps and offers that no longer
    want more drop out."""
    if not state.keeping:
        return
    reserved, started = state.reserved, state.started
    taken = set(reserved) if started is None else {*reserved, *state.grants[started].gpus}
    renewed = renew_in_place(
        state.keeping,
        taken,
        state.pool,
        state.kept,
        state.grants,
        state.planned,
        state.knobs.lease_end(state.now),
    )
    if renewed:
        state.ended -= renewed
        state.renewable = {
            app_id: [j for j in jobs if id(j) not in renewed]
            for app_id, jobs in state.renewable.items()
        }
        kept = state.kept
        state.wanting = [a for a in state.wanting if a.demand() > len(kept[a.app_id])]
        state.offered = [a for a in state.offered if a.demand() > len(kept[a.app_id])]


def renew_in_place(
    keeping: Sequence[JobState],
    taken: set[int],
    pool: set[int],
    kept: dict[str, list[int]],
    grants: Schedule,
    planned: set[int],
    until: float,
) -> set[int]:
    """Renew ``keeping`` on their GPUs until ``until``, except those on GPUs in ``taken``:
    those GPUs leave the pool and count as kept. Returns the ids of the jobs renewed."""
    renewed: set[int] = set()
    for job in keeping:
        if taken.intersection(job.gpus):
            continue
        app_id = job.app.app_id
        grants[job] = Assignment(job.gpus, until)
        planned.add(id(job))
        pool.difference_update(job.gpus)
        kept[app_id] = [*kept[app_id], *job.gpus]
        renewed.add(id(job))
    return renewed


def renewed_count(wanting: int, renewal_share: float) -> int:
    """How many of the worst-off apps keep their ending leases: ceil(share n)."""
    return math.ceil(renewal_share * wanting - 1e-9)


def within_share(app: AppState, view: SchedulingView, size: int) -> bool:
    """Whether ``app`` holds (ending leases included) no more than its fair share of a
    cluster of ``size`` GPUs: one of ``view.slices(app)`` equal slices (per owner when
    apps have owners). Only what the arbiter observes: the GPUs it granted."""
    return len(app.held()) * view.slices(app) <= size
