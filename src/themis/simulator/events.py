"""Events of the simulation. Each event applies itself to the simulator and says whether
the arbiter must run a round afterwards; the loop never needs to know what an event is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from themis.model.state import JobState
from themis.model.workload import AppSpec


class Simulator(Protocol):
    """What events ask of the simulator (``engine.Simulator``), named here so that the
    events need not import the engine that imports them."""

    @property
    def tokens(self) -> Mapping[int, int]: ...

    def admit(self, spec: AppSpec, now: float) -> None: ...

    def job_reached(self, job: JobState, now: float) -> None: ...

    def any_grant_ending(self, now: float) -> bool: ...


class Event:
    def handle(self, sim: Simulator, now: float) -> bool:
        raise NotImplementedError


@dataclass
class AppArrival(Event):
    app: AppSpec

    def handle(self, sim: Simulator, now: float) -> bool:
        sim.admit(self.app, now)
        return True


@dataclass
class JobEnd(Event):
    job: JobState
    token: int  # the job's placement this end belongs to; stale once it is preempted

    def handle(self, sim: Simulator, now: float) -> bool:
        if sim.tokens.get(id(self.job)) != self.token or not self.job.gpus:
            return False
        sim.job_reached(self.job, now)
        return True


@dataclass
class GrantEnd(Event):
    """Some grant (a lease, or a policy's quantum) ends about now."""

    def handle(self, sim: Simulator, now: float) -> bool:
        return sim.any_grant_ending(now)
