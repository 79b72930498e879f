"""The books a view carries (``SchedulingView.free``, ``changed``, ``order``), for a
mechanism that does not track what changed between rounds: the Ray runtime, or a library
caller that builds its own views.

A policy written as a rule over the books (``Policy.changes``) reads them from every
view. The simulator keeps them exactly, round to round, so that a round costs what
changed. A mechanism that keeps no such record hands its views to ``ViewBooks.fill``:
each app keeps one admission rank for as long as it is active (a policy's own books live
as long as the ranks do), every active app counts as changed (the policy re-reads each
one: exact, at the cost of every app per round), and the free GPUs are a fresh
``FreePool`` (a policy may carve from it; nothing of it outlives the round).
"""

from __future__ import annotations

from dataclasses import replace

from themis.mechanism.pool import FreePool
from themis.mechanism.view import SchedulingView
from themis.model.cluster import Cluster
from themis.model.state import AppState


def has_books(view: SchedulingView) -> bool:
    """Whether the mechanism handed ``view`` its own books."""
    return view.free is not None and view.changed is not None and view.order is not None


class ViewBooks:
    """Admission ranks kept across rounds, and the books ``fill`` adds to a bare view."""

    def __init__(self) -> None:
        # One dict for the books' whole life (a policy takes another ``order`` for another
        # run and starts its own books afresh); like the simulator's, it keeps the apps
        # that have left, so a round may still name them as changed.
        self.order: dict[AppState, int] = {}
        self._active: list[AppState] = []
        self._cluster: Cluster | None = None

    def fill(self, view: SchedulingView) -> SchedulingView:
        """``view`` with books: itself if it has them, else a copy with this mechanism's
        ranks (apps new since the last round ranked after the others, in the view's
        order), every app changed (and those that left since the last round: they have
        finished), and the free GPUs as a pool."""
        if has_books(view):
            return view
        order = self.order
        if view.cluster is not self._cluster:  # another cluster: another run
            self._cluster = view.cluster
            order = self.order = {}
            self._active = []
        for app in view.apps:
            if app not in order:
                order[app] = len(order)
        ranks = [order[app] for app in view.apps]
        if any(a > b for a, b in zip(ranks, ranks[1:], strict=False)):
            # Not in admission order: these ranks cannot serve, so the policy's books
            # start afresh on new ones (a new dict) in the view's order.
            order = self.order = {app: k for k, app in enumerate(view.apps)}
        changed = set(view.apps)
        changed.update(app for app in self._active if app not in changed and app in order)
        self._active = list(view.apps)
        pool = FreePool(view.cluster, view.free_set())
        return replace(view, free=pool, changed=frozenset(changed), order=order)
