"""The knobs of ``themis serve``'s scheduling loop, apart from the loop
(``arbiter_service.py``) so that the loop's parts (``service_*``) can name them without
importing the loop that imports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from themis.auction.budget import DEFAULT_DEADLINE
from themis.errors import ThemisError
from themis.mechanism.view import DEFAULT_BATCH_WINDOW
from themis.policies import PolicyOptions, make_policy, registry
from themis.runtime.state.log_writer import LogLimits

#: The policy's knobs where the runtime's differ from the simulator's: an auction is bounded
#: by the wall clock (``auction.budget.DEFAULT_DEADLINE``), not by search nodes, since a
#: round must answer in real time and need not be reproducible (docs/auction.md).
RUNTIME_KNOBS = PolicyOptions(auction_node_limit=None, auction_deadline=DEFAULT_DEADLINE)
#: Defaults ``themis serve --help`` says another way, by knob field: the runtime measures
#: each job's restart cost and tells the policy, so renewal within the fair share, on by
#: default where restarts cost time, is on as soon as a restart is seen to cost time.
RUNTIME_SHOWN = {"renew_within_share": "on once a restart is measured to cost time"}
#: The shortest default start deadline (seconds; ``--start-timeout`` sets any other).
MIN_START_TIMEOUT = 60.0


@dataclass(frozen=True)
class ServiceOptions:
    """Knobs of the service. The policy's defaults are the simulator's (real jobs run for
    minutes to hours) but for the auction's bound (``RUNTIME_KNOBS``); tests shrink them
    to seconds."""

    policy: str = "themis"
    #: The policy's knobs and seed (``policies/knobs.py``), as ``themis serve``'s flags
    #: set them; read, never copied.
    knobs: PolicyOptions = RUNTIME_KNOBS
    batch_window: float = DEFAULT_BATCH_WINDOW
    grace: float = 30.0
    #: Seconds a launched job may take to reach its training function (None: the lease,
    #: at least :data:`MIN_START_TIMEOUT`); past it, it is stopped like a lease end.
    start_timeout: float | None = None
    tick: float = 0.2
    inventory_every: float = 2.0
    status_every: float = 1.0
    #: Bounds of the app logs: line length, per-app rates, what the state keeps.
    log_limits: LogLimits = field(default_factory=LogLimits)
    #: Seconds one restart of a job costs (start-up and checkpoint restore, plus the
    #: checkpoint save at its stop), told to the policy as the simulator tells it its
    #: ``restart_cost``: the cost before any is observed, or always if not measured.
    restart_cost: float = 0.0
    #: Measure each job's restart cost and tell the policy the cluster's estimate
    #: (``loop/restart_cost.py``); False: ``restart_cost`` as given, for the whole run.
    measure_restart_cost: bool = True

    def __post_init__(self) -> None:
        # A grace as long as the lease lets a job that ignores its lease end hold its
        # GPUs for a whole second lease: a livelock.
        if not self.grace < self.lease:
            raise ThemisError(
                f"--grace ({self.grace:g}s) must be shorter than --lease ({self.lease:g}s)",
                field="--grace",
            )
        if self.start_timeout is not None and not (0 < self.start_timeout < float("inf")):
            raise ThemisError(
                f"--start-timeout must be a positive number of seconds, got {self.start_timeout:g}",
                field="--start-timeout",
            )
        if not (self.restart_cost >= 0 and self.restart_cost < float("inf")):
            raise ThemisError(
                f"must be a number of seconds >= 0, got {self.restart_cost}",
                field="--restart-cost",
            )
        # The knobs' rules, and the policy's own on the first restart cost it is told
        # (Gandiva refuses one not shorter than its slice), before anything starts.
        make_policy(self.policy, self.knobs).set_restart_cost(self.restart_cost)

    @property
    def lease(self) -> float:
        """The policy's lease: the grace, the start deadline and the restart-cost
        estimate are bounded by it."""
        return self.knobs.lease

    @property
    def start_deadline(self) -> float:
        """Seconds from a job's launch to the report that its function runs. Without a
        bound, a module that hangs at import held its GPUs for ever; by default a job may
        take a lease to start (a job that starts holds its GPUs that long anyway), but at
        least a minute, for Ray workers and imports on a busy node."""
        if self.start_timeout is not None:
            return self.start_timeout
        return max(self.lease, MIN_START_TIMEOUT)

    def record(self) -> dict[str, Any]:
        """The policy and every knob this arbiter runs with, as ``meta.serve`` keeps them
        so that ``themis replay`` simulates with them (``state/replay.recorded_settings``
        reads this record and the older one, which kept a few knobs beside the others)."""
        knobs = self.knobs
        return {
            "policy": self.policy,
            "batch_window": self.batch_window,
            "seed": knobs.seed,
            # Every knob by field, from the one table (a plug-in policy's included).
            "knobs": {knob.field: knobs.value(knob.field) for knob in registry.knobs()},
            # Recorded so that a replay can say what it cannot reproduce.
            "grace": self.grace,
            "tick": self.tick,
        }
