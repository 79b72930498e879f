"""The round's first step, visibility (docs/design.md §5 step 1): which apps want GPUs,
and the rho each reports.

Every active app with unmet demand reports its rho with what it holds now, leases ending
in this round included, so that an app whose leases just ended does not look as badly off
as one that has been waiting with nothing (its bid's "nothing" is still what it keeps). An
app that cannot run on what it holds reports its starving rho (finite, grows with its
wait) instead of one constant shared by every starving app.
"""

from __future__ import annotations

from collections.abc import Sequence

from themis.arbiter.round_state import RoundState
from themis.mechanism.view import SchedulingView
from themis.model.state import AppState, JobState


def visibility(state: RoundState) -> None:
    """Fill ``kept``, ``wanting`` (in the view's order), their ``n_avg``, agents,
    remaining work and reported ``rhos``, and the ``starving`` apps."""
    view, now = state.view, state.now
    kept, wanting = state.kept, state.wanting
    for a in _in_order(view, state.hungry, state.ending):
        held = _kept(a, state.ended) if a.app_id in state.renewable else list(a.held())
        kept[a.app_id] = held
        if a.demand() > len(held):
            wanting.append(a)
    n_avg = state.n_avg = {a.app_id: view.n_avg(a) for a in wanting}
    agents = state.agents = {a.app_id: state.knobs.agent(a) for a in wanting}
    # What each app has left to do, computed once for its rho here and its bid later;
    # None for an app that runs nothing: its agent keeps that until a job of it starts.
    remaining = state.remaining = {
        a.app_id: a.remaining_by_gang(now) if a.held() else None for a in wanting
    }
    rhos, starving = state.rhos, state.starving
    for a in wanting:
        rhos[a.app_id], cannot_run = agents[a.app_id].standing(
            now,
            n_avg[a.app_id],
            a.held(),
            view.slices(a),  # 1 / this: the slice a starving rho assumes
            remaining[a.app_id],
        )
        if cannot_run:
            starving.add(a.app_id)
    if starving and any(a.spec.owner is not None for a in wanting):
        # An app whose owner runs another app is not starving as a tenant: splitting a
        # sweep into apps must not buy places in the starving tier (fairness/shares.py).
        running_owners = {a.spec.tenant for a in view.apps if a.held()}
        state.starving = {
            a.app_id
            for a in wanting
            if a.app_id in starving and (a.spec.owner is None or a.spec.owner not in running_owners)
        }


def _kept(app: AppState, ended: set[int]) -> list[int]:
    """The GPUs ``app`` keeps through this round: those of its running jobs whose grants
    do not end now (``ended``: their ids), in submission order."""
    return [g for j in app.running_jobs() if id(j) not in ended for g in j.gpus]


def _in_order(
    view: SchedulingView, hungry: set[AppState] | None, ending: Sequence[JobState]
) -> list[AppState]:
    """The apps that may want GPUs this round, in the order of ``view.apps``: with the
    book of hungry apps, those and the apps whose grants end (the only ones whose
    demand can exceed what they keep); without it, every active app."""
    if hungry is None or view.order is None:
        return list(view.apps)
    apps = set(hungry)
    apps.update(j.app for j in ending)
    rank = view.order
    return sorted(apps, key=rank.__getitem__)
