"""Each app's rho over time, kept in the arbiter's memory for the dashboard.

The scheduling loop adds a point per app at every status write (``service_status``) and
one last point, the app's post-hoc rho, when it ends; the API thread reads copies. Memory
is bounded however long ``serve`` runs: past ``max_points`` points an app's series keeps
every other point (its whole span at half the resolution), and past ``max_apps`` apps the
series of the app seen longest ago is dropped.

Why memory and not the state database: the series is a view, not state the scheduler
needs after a restart, and a new table would change the database's schema version. A
restarted arbiter's chart starts at its start.
"""

from __future__ import annotations

import math
import threading

from themis.fairness.ftf import RHO_MAX


class RhoHistory:
    """(wall clock, rho) points per app, thread-safe (one writer, readers copy)."""

    def __init__(self, max_points: int = 512, max_apps: int = 256) -> None:
        if max_points < 2 or max_apps < 1:
            raise ValueError("max_points must be >= 2 and max_apps >= 1")
        self.max_points = max_points
        self.max_apps = max_apps
        self._series: dict[str, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, app_id: str, wall: float, rho: float | None) -> None:
        """One point; a missing or NaN rho is skipped, an infinite one capped at
        ``RHO_MAX`` (JSON has no infinity)."""
        if rho is None or math.isnan(rho):
            return
        point = (wall, min(rho, RHO_MAX))
        with self._lock:
            series = self._series.pop(app_id, None)  # re-inserted: most recently seen last
            if series is None:
                series = []
                while len(self._series) >= self.max_apps:
                    del self._series[next(iter(self._series))]
            series.append(point)
            if len(series) > self.max_points:
                # Every other point, the newest kept: the span stays, the resolution halves.
                series = series[(len(series) + 1) % 2 :: 2]
            self._series[app_id] = series

    def series(self, only: set[str] | None = None) -> dict[str, list[tuple[float, float]]]:
        """Copies of the series, of the apps in ``only`` if given."""
        with self._lock:
            return {
                app_id: list(points)
                for app_id, points in self._series.items()
                if only is None or app_id in only
            }
