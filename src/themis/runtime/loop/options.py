"""The knobs of ``themis serve``'s scheduling loop, apart from the loop
(``arbiter_service.py``) so that the loop's parts (``service_*``) can name them without
importing the loop that imports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from themis.auction.budget import DEFAULT_DEADLINE
from themis.errors import ThemisError
from themis.mechanism.view import DEFAULT_BATCH_WINDOW
from themis.policies import PolicyOptions
from themis.runtime.state.log_writer import LogLimits

_POLICY = PolicyOptions()
#: The shortest default start deadline (seconds; ``--start-timeout`` sets any other).
MIN_START_TIMEOUT = 60.0


@dataclass(frozen=True)
class ServiceOptions:
    """Knobs of the service. The policy's defaults are the simulator's (real jobs run for
    minutes to hours); tests shrink them to seconds."""

    policy: str = "themis"
    lease: float = _POLICY.lease
    fairness_knob: float = _POLICY.fairness_knob
    batch_window: float = DEFAULT_BATCH_WINDOW
    grace: float = 30.0
    #: Seconds a launched job may take to reach its training function (None: the lease,
    #: at least :data:`MIN_START_TIMEOUT`); past it, it is stopped like a lease end.
    start_timeout: float | None = None
    tick: float = 0.2
    inventory_every: float = 2.0
    status_every: float = 1.0
    seed: int = 0
    #: Wall-clock seconds one auction may take (None: no deadline); no node limit here.
    auction_deadline: float | None = DEFAULT_DEADLINE
    #: The policy's other knobs (``policies/knobs.py``), by ``PolicyOptions`` field, as
    #: ``themis serve``'s flags set them: ``(("ranking", "verified"), ...)``. A knob not
    #: named keeps its default (the node limit: none, the deadline bounds an auction).
    knobs: tuple[tuple[str, Any], ...] = ()
    #: Bounds of the app logs: line length, per-app rates, what the state keeps.
    log_limits: LogLimits = field(default_factory=LogLimits)

    def __post_init__(self) -> None:
        # A grace as long as the lease lets a job that ignores its lease end hold its
        # GPUs for a whole second lease: the livelock of issue 12.
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
        self.policy_options()  # the knobs' rules, before anything starts

    @property
    def start_deadline(self) -> float:
        """Seconds from a job's launch to the report that its function runs. Without a
        bound, a module that hangs at import held its GPUs for ever; by default a job may
        take a lease to start (a job that starts holds its GPUs that long anyway), but at
        least a minute, for Ray workers and imports on a busy node."""
        if self.start_timeout is not None:
            return self.start_timeout
        return max(self.lease, MIN_START_TIMEOUT)

    def policy_options(self) -> PolicyOptions:
        chosen: dict[str, Any] = {
            "lease": self.lease,
            "fairness_knob": self.fairness_knob,
            "seed": self.seed,
            "auction_node_limit": None,
            "auction_deadline": self.auction_deadline,
        }
        return PolicyOptions(**{**chosen, **dict(self.knobs)})
