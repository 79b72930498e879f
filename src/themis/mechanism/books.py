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
        # run and starts its own books afresh). An app that left keeps its rank for the
        # one round that names it as changed, then is forgotten (a long-lived runtime
        # would otherwise keep every app it ever ran).
        self.order: dict[AppState, int] = {}
        self._next = 0
        self._active: list[AppState] = []
        self._left: list[AppState] = []
        self._cluster: Cluster | None = None

    def fill(self, view: SchedulingView) -> SchedulingView:
        """``view`` with books: itself if it has them, else a copy with this mechanism's
        ranks (apps new since the last round ranked after the others, in the view's
        order), every app changed (and those that left since the last round: they have
        finished, ``AppState.finish`` set, so a policy drops them), and the free GPUs as
        a pool."""
        if has_books(view):
            return view
        order = self.order
        if view.cluster is not self._cluster:  # another cluster: another run
            self._cluster = view.cluster
            order = self.order = {}
            self._active, self._left, self._next = [], [], 0
        for app in self._left:  # named as changed last round: gone for good
            order.pop(app, None)
        for app in view.apps:
            if app not in order:
                order[app] = self._next
                self._next += 1
        ranks = [order[app] for app in view.apps]
        if any(a > b for a, b in zip(ranks, ranks[1:], strict=False)):
            # Not in admission order: these ranks cannot serve, so the policy's books
            # start afresh on new ones (a new dict) in the view's order.
            order = self.order = {app: k for k, app in enumerate(view.apps)}
            self._next = len(order)
        changed = set(view.apps)
        self._left = [app for app in self._active if app not in changed and app in order]
        changed.update(self._left)
        self._active = list(view.apps)
        pool = FreePool(view.cluster, view.free_set())
        return replace(view, free=pool, changed=frozenset(changed), order=order)
