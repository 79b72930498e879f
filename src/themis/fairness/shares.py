"""Who a finish-time-fair share is shared with: owners equally, an owner's apps equally.

The paper's ideal is a private ``1/N`` slice of the cluster, ``N`` the active apps. An app
is not a tenant, though: a tenant that submits its sweep as two apps would hold two slices
(such a split was measured to gain +56% under Themis). So the slice belongs to the app's
**owner** (a tenant or user; an app without one owns itself): at time ``t`` an app of
owner ``o`` is entitled to ``1 / (owners(t) * apps_o(t))`` of the cluster, ``owners(t)``
the owners with an active app and ``apps_o(t)`` the active apps of ``o``. ``T_id`` takes the
time average of that count, ``N_eff``, over the app's life in place of ``N_avg``. With one
app per owner, ``N_eff`` is ``N_avg``, computed with the same float operations, so every
schedule of a workload without owners is what it was.

A tenant that splits its work into ``k`` apps gets ``k`` apps of one slice: each part's
``T_id`` grows ``k``-fold, so the parts rank as better off as they are, and the tenant as a
whole is as entitled as before.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Owner:
    apps: int = 0  # active apps now
    #: integral of owners(s) * apps(s) ds up to the owner's last change, and the integral of
    #: owners(s) ds at that change
    area: float = 0.0
    owners_area_then: float = 0.0
    changes: int = 0


@dataclass(frozen=True)
class _Entry:
    owner: str
    arrival: float
    owners_area: float  # integral of owners(s) ds at the arrival
    area: float  # the owner's integral at the arrival
    changes: int  # the owner's change count right after the arrival


class FairShares:
    """Active owners and apps as step functions of time, with running integrals, so that
    any app's ``N_eff`` since its arrival is O(1) to read."""

    def __init__(self) -> None:
        self.owners = 0
        self._owners_area = 0.0
        self._since = 0.0
        self._by_owner: dict[str, _Owner] = {}
        self._apps: dict[str, _Entry] = {}

    @property
    def count(self) -> int:
        """Active apps."""
        return len(self._apps)

    def owners_area(self, t: float) -> float:
        """The integral of the number of active owners from time 0 to ``t``."""
        return self._owners_area + self.owners * (t - self._since)

    def _advance(self, t: float, owner: _Owner) -> float:
        area = self.owners_area(t)
        self._owners_area = area
        self._since = t
        owner.area = owner.area + owner.apps * (area - owner.owners_area_then)
        owner.owners_area_then = area
        return area

    def arrive(self, t: float, app_id: str, owner: str) -> None:
        if app_id in self._apps:
            raise AssertionError(f"app {app_id} arrived twice")
        book = self._by_owner.setdefault(owner, _Owner())
        area = self._advance(t, book)
        if book.apps == 0:
            self.owners += 1
        book.apps += 1
        book.changes += 1
        self._apps[app_id] = _Entry(owner, t, area, book.area, book.changes)

    def leave(self, t: float, app_id: str) -> None:
        entry = self._apps.pop(app_id)
        book = self._by_owner[entry.owner]
        self._advance(t, book)
        book.apps -= 1
        book.changes += 1
        if book.apps == 0:
            self.owners -= 1

    def share_count(self, app_id: str) -> int:
        """How many equal slices the cluster is cut into for this app now:
        ``owners * apps of its owner`` (the number of active apps without owners)."""
        return self.owners * self._by_owner[self._apps[app_id].owner].apps

    def n_eff(self, app_id: str, t: float) -> float:
        """The time average of :meth:`share_count` over [arrival, t], the app included."""
        entry = self._apps[app_id]
        book = self._by_owner[entry.owner]
        if t <= entry.arrival:
            return float(max(self.owners * book.apps, 1))
        if book.changes == entry.changes:
            # The owner's app count has not moved since the arrival: one product, which
            # for an app that is its own owner is exactly the old N_avg's difference.
            area = book.apps * (self.owners_area(t) - entry.owners_area)
        else:
            now = book.area + book.apps * (self.owners_area(t) - book.owners_area_then)
            area = now - entry.area
        return area / (t - entry.arrival)
