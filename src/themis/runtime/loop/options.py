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


@dataclass(frozen=True)
class ServiceOptions:
    """Knobs of the service. The policy's defaults are the simulator's (real jobs run for
    minutes to hours); tests shrink them to seconds."""

    policy: str = "themis"
    lease: float = _POLICY.lease
    fairness_knob: float = _POLICY.fairness_knob
    batch_window: float = DEFAULT_BATCH_WINDOW
    grace: float = 30.0
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
        self.policy_options()  # the knobs' rules, before anything starts

    def policy_options(self) -> PolicyOptions:
        chosen: dict[str, Any] = {
            "lease": self.lease,
            "fairness_knob": self.fairness_knob,
            "seed": self.seed,
            "auction_node_limit": None,
            "auction_deadline": self.auction_deadline,
        }
        return PolicyOptions(**{**chosen, **dict(self.knobs)})
