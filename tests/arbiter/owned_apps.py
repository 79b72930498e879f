"""Apps of one toy model with one single-GPU job and an optional owner, and a view that
gives every app the same share count: the arbiter's owner rules read no more of either."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
SHAPE = Cluster.from_spec("1x1x4").shape


def app(
    app_id: str,
    arrival: float = 0.0,
    done: float = 0.0,
    owner: str | None = None,
    work: float = 10_000.0,
) -> AppState:
    """An app whose one job (``work`` iterations) has made ``done`` of them."""
    spec = AppSpec(app_id, arrival, "toy", (JobSpec(f"{app_id}-0", 1, work),), owner=owner)
    state = AppState(spec, TOY, work)
    state.jobs[0].done = done
    return state


def view(apps: list[AppState], shares: float) -> Any:
    """The scheduling view the rules read: the active apps and each one's ``N_eff``."""
    return SimpleNamespace(apps=apps, n_avg=lambda a: shares)
