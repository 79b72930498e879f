"""What the mixins of ``ArbiterService`` share, declared once for the type checker.

``ArbiterService`` holds the state and each mixin (``service_requests``,
``service_reports``, ``service_halving``, ``service_status``, ``service_inventory``)
works on it. :class:`ServiceBase` declares that state (set in ``ArbiterService.__init__``)
and the methods one part calls on another, so every mixin is checked against the same
types and ``ArbiterService`` is checked to provide them. It adds no behaviour: the
attributes are bare annotations and the methods exist for the type checker only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from themis.model.cluster import Cluster
    from themis.model.state import AppState, JobState
    from themis.runtime.loop.commands import CommandQueue
    from themis.runtime.loop.history import RhoHistory
    from themis.runtime.loop.job_control import JobControl, Key
    from themis.runtime.loop.lease_book import LeaseClock
    from themis.runtime.loop.live import LiveApp
    from themis.runtime.loop.metrics import ArbiterMetrics
    from themis.runtime.loop.options import ServiceOptions
    from themis.runtime.loop.restart_cost import RestartCosts
    from themis.runtime.state.store import Store
    from themis.runtime.workers.ray_inventory import Inventory


class ServiceBase:
    """The state and cross-part methods of ``ArbiterService`` (base of its mixins)."""

    store: Store
    options: ServiceOptions
    nodes: Callable[[], list[dict[str, Any]]]
    jobs: JobControl
    metrics: ArbiterMetrics
    commands: CommandQueue
    restart_costs: RestartCosts
    inventory: Inventory
    clocks: dict[Key, LeaseClock]
    rho_history: RhoHistory
    epoch: float
    submitted: list[str]
    rounds: int
    started_wall: float
    heartbeat: float
    ray_error: str | None
    ray_down_since: float | None
    _job_tokens: dict[str, str]
    _now: float
    _last_inventory: float
    _last_status: float

    if TYPE_CHECKING:
        # Defined by ArbiterService or by one of its mixins.

        def now(self) -> float: ...

        @property
        def cluster(self) -> Cluster | None: ...

        @property
        def apps(self) -> dict[str, LiveApp]: ...

        @property
        def active(self) -> list[AppState]: ...

        def _n_avg(self, app: AppState) -> float: ...

        def _app_done(self, live: LiveApp, now: float, state: str | None = None) -> None: ...

        def _stop_job(self, job: JobState, now: float, trial_state: str, why: str) -> None: ...

        def _set_trial_state(self, live: LiveApp, trial_id: str, state: str) -> None: ...

        def _finish_trial(
            self, live: LiveApp, job: JobState, now: float, state: str, why: str
        ) -> None: ...

        def _park(self, live: LiveApp, job: JobState, steps: int, now: float) -> None: ...

        def _release_trial(self, job: JobState, now: float) -> tuple[str, str]: ...
