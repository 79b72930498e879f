"""What the loop needs of whatever runs jobs: the :class:`JobLauncher` protocol and the
:class:`RunningJob` it hands back.

The loop is written against this protocol only. Ray sits behind it: in ``themis serve``
the launcher is ``ray_driver.RayDriver`` (the Ray driver in a child process), in a
process that is its own driver ``jobs.Launcher``, in fast tests a fake. Neither this
module nor the loop imports Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from themis.runtime.workers.lease import Outcome, Progress, TrialSpec


@dataclass
class RunningJob:
    """One lease of one trial in Ray, as the arbiter tracks it."""

    app_id: str
    trial_id: str
    spec: TrialSpec
    actors: list[Any]
    run_ref: Any
    started_wall: float
    poll_ref: Any = None
    stop_sent: float | None = None  # wall clock of the stop request
    kill_at: float | None = None
    checkpoint_step: int = 0
    steps: int = 0
    killed: bool = False
    gpus: tuple[int, ...] = ()  # the scheduler's GPU ids it holds until it has ended
    started: bool = False  # its training function has been seen running
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.app_id, self.trial_id)


class JobLauncher(Protocol):
    """Starts, polls, stops and kills the jobs of granted trials, never blocking."""

    def start(self, spec: TrialSpec, placement: list[tuple[str, int]]) -> RunningJob:
        """Launch one lease of one trial on ``placement`` ((node id, GPUs) per node)."""
        ...

    def request_polls(self, jobs: list[RunningJob]) -> None:
        """Ask every job without a poll in flight for its progress."""
        ...

    def collect_polls(self, jobs: list[RunningJob]) -> list[tuple[RunningJob, Progress]]:
        """Progress of every job whose last poll has answered."""
        ...

    def collect_ends(
        self, jobs: list[RunningJob]
    ) -> list[tuple[RunningJob, Outcome | None, str | None]]:
        """Jobs that ended: (job, outcome, None), or (job, None, why) when one died."""
        ...

    def stop(self, job: RunningJob, now_wall: float) -> None:
        """Ask the job to checkpoint and return; it is killed after the grace period."""
        ...

    def kill(self, job: RunningJob) -> None: ...

    def release(self, job: RunningJob) -> None:
        """The job has ended: free its GPUs at once."""
        ...
