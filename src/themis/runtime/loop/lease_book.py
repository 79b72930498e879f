"""Lease bookkeeping the runtime needs and the simulator does not: real starts and real
stops.

In the simulator a job starts the instant it is granted GPUs and stops the instant its
lease ends. A real job takes seconds to start (a Ray worker, imports, a checkpoint to
load) and seconds to stop (it finishes its step and writes a checkpoint, or is killed
after the grace period). Two rules keep leases honest:

- **A lease counts from the real start.** Until the job reports that its training
  function runs, its lease end moves with the clock (``LeaseClock.hold``); from then on
  it is fixed at the start plus the lease length. Otherwise a job slow to start could
  lose its lease before its first step, and a job whose predecessor still drains could
  lose it before it even began (a livelock).
  The wait is bounded: a job that has not started within the start deadline is stopped
  like a lease end (``start_watch``), or a module that hangs at import would hold its
  GPUs for ever.
- **GPUs are free only once the job has really stopped.** A job told to stop keeps its
  GPUs *reserved* until its actor has returned or was killed: the scheduler's view
  (:class:`RuntimeView`) does not offer them, and a grant is not launched onto them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from themis.policies import SchedulingView


@dataclass
class RuntimeView(SchedulingView):
    """The policy's view, without the GPUs of jobs that have not stopped yet."""

    reserved: frozenset[int] = field(default_factory=frozenset)

    def free_gpus(self) -> list[int]:
        return [g for g in super().free_gpus() if g not in self.reserved]

    def free_set(self) -> set[int]:
        return set(self.free_gpus())


@dataclass
class LeaseClock:
    """One grant's length and whether its job has really started."""

    length: float | None  # None: open-ended (the policy gave no end)
    started_at: float | None = None

    def hold(self, now: float) -> float | None:
        """The lease end while the job has not started yet: it moves with the clock."""
        return None if self.length is None else now + self.length

    def start(self, now: float) -> float | None:
        """The job runs from ``now``: its lease end, fixed from here on."""
        self.started_at = now
        return None if self.length is None else now + self.length


def grant_length(until: float | None, now: float) -> float | None:
    return None if until is None else max(0.0, until - now)


def lease_end_text(until: float | None, now: float) -> str:
    """A lease's end as the event log says it: on the arbiter's clock (the ``t=`` of
    every event) and on the wall clock the dashboard shows, so the two can be matched."""
    if until is None:
        return "open"
    wall = time.strftime("%H:%M:%S", time.localtime(time.time() + (until - now)))
    return f"t={until:.1f}s ({wall})"
