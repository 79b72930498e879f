"""An app's successive-halving search, decided online in the simulator.

The app scheduler of an app with a declared ``Search`` runs each trial up to its next
undecided rung and pauses it there (it gives its GPUs back and is no demand: the
scheduler sees it as ended, as in the runtime). The trial's metric at the rung is read from
its loss curve, which only the simulator holds; once every trial that entered a rung has
reached it, ``themis.model.halving.decide`` (the runtime's rules) stops the worst and
resumes the best. So no policy learns a trial's fate before its rung.
"""

from __future__ import annotations

from collections.abc import Mapping

from themis.model.halving import decide, next_stop
from themis.model.workload import AppSpec, LossCurve, Search


class SearchBook:
    """Rung values, decisions and paused trials of one app."""

    def __init__(self, spec: AppSpec, curves: Mapping[tuple[str, str], LossCurve]) -> None:
        if spec.search is None:
            raise ValueError(f"app {spec.app_id} declares no search")
        self.search: Search = spec.search
        self.budget = max((j.work for j in spec.jobs), default=0.0)
        self.trials = [j.job_id for j in spec.jobs]
        missing = [t for t in self.trials if (spec.app_id, t) not in curves]
        if missing:
            raise ValueError(f"app {spec.app_id}: no loss curve for {missing[0]}")
        self.curves = {t: curves[(spec.app_id, t)] for t in self.trials}
        self.values: dict[float, dict[str, float]] = {}
        self.decided: tuple[float, ...] = ()
        self.stopped: dict[str, float] = {}  # trial -> the rung that stopped it
        self.parked: dict[str, float] = {}  # trial -> the rung it waits at

    def stop_point(self, done: float) -> float:
        """Where a trial with ``done`` iterations pauses or ends next."""
        return next_stop(self.search, self.budget, done, self.decided)  # type: ignore[arg-type]

    def reached(self, trial: str, rung: float) -> tuple[list[str], list[str]]:
        """``trial`` paused at ``rung`` with its metric there. Returns the trials stopped for
        good and the paused trials resumed by the decisions this makes possible."""
        self.values.setdefault(rung, {})[trial] = self.curves[trial].at(rung / self.budget)
        self.parked[trial] = rung
        decisions = decide(self.search, self.budget, self.trials, self.values, set())  # type: ignore[arg-type]
        self.decided = decisions.decided
        stops = [t for t in decisions.stops if t not in self.stopped]
        for t in stops:
            self.stopped[t] = decisions.stops[t]
            self.parked.pop(t, None)
        resumed = [t for t, r in self.parked.items() if r in self.decided]
        for t in resumed:
            del self.parked[t]
        return stops, resumed

    def realized(self, trial: str, work: float) -> float:
        """The work ``trial`` did in the end: up to the rung that stopped it, or all."""
        return self.stopped.get(trial, work)
