"""Job actors: one lease of one trial, placed by Ray on the granted nodes and GPUs.

A gang's GPUs may span nodes; it then gets one actor per node, each pinned there with a
hard ``NodeAffinitySchedulingStrategy`` and asking for that node's share of the gang as
``num_gpus`` (Ray sets ``CUDA_VISIBLE_DEVICES``). The first actor runs the training
function; the others hold their GPUs for it (their node ids are in ``trial.gang``).
Actors ask for no CPU (``num_cpus=0``): a node's CPUs must not cap how many GPU jobs it
runs.

The arbiter never blocks on a job: ``run`` returns an object ref that resolves when the
lease ends, ``poll`` and ``stop`` are calls to a threaded actor that answer while the
training thread runs. An actor that dies (killed, its node lost) surfaces as an error on
its ``run`` ref.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from themis.runtime.lease import LeaseControl, Outcome, Progress, TrialSpec, run_trial


@ray.remote(num_cpus=0, max_concurrency=4)
class JobActor:
    """Runs ``run_trial`` on its thread; ``poll`` and ``stop`` answer from others."""

    def __init__(self) -> None:
        self.control = LeaseControl()
        self.spec: TrialSpec | None = None

    def run(self, spec: TrialSpec) -> Outcome:
        self.spec = spec
        return run_trial(spec, self.control)

    def poll(self) -> Progress | None:
        return None if self.spec is None else self.control.drain(self.spec)

    def stop(self) -> None:
        self.control.request_stop()

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class GangMember:
    """Holds one node's share of a gang that spans nodes."""

    def devices(self) -> str:
        return os.environ.get("CUDA_VISIBLE_DEVICES", "")


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


class Launcher:
    """Starts, polls, stops and kills job actors."""

    def __init__(self, grace: float) -> None:
        self.grace = grace

    def start(self, spec: TrialSpec, placement: list[tuple[str, int]]) -> RunningJob:
        actors = []
        for k, (node_id, count) in enumerate(placement):
            cls = JobActor if k == 0 else GangMember
            actors.append(
                cls.options(
                    num_gpus=count,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote()
            )
        run_ref = actors[0].run.remote(spec)
        return RunningJob(spec.app_id, spec.trial_id, spec, actors, run_ref, time.time())

    def request_polls(self, jobs: list[RunningJob]) -> None:
        for job in jobs:
            if job.poll_ref is None:
                job.poll_ref = job.actors[0].poll.remote()

    def collect_polls(self, jobs: list[RunningJob]) -> list[tuple[RunningJob, Progress]]:
        """Progress of every job whose last poll has answered (never blocks)."""
        pending = {j.poll_ref: j for j in jobs if j.poll_ref is not None}
        if not pending:
            return []
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        out = []
        for ref in ready:
            job = pending[ref]
            job.poll_ref = None
            try:
                progress = ray.get(ref)
            except Exception:  # the actor died: its run ref reports it
                continue
            if progress is not None:
                out.append((job, progress))
        return out

    def collect_ends(
        self, jobs: list[RunningJob]
    ) -> list[tuple[RunningJob, Outcome | None, str | None]]:
        """Jobs whose ``run`` returned: (job, outcome, None), or (job, None, why) when the
        actor died (killed, node lost, failed to start)."""
        refs = {j.run_ref: j for j in jobs}
        if not refs:
            return []
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
        out: list[tuple[RunningJob, Outcome | None, str | None]] = []
        for ref in ready:
            job = refs[ref]
            try:
                out.append((job, ray.get(ref), None))
            except Exception as exc:
                out.append((job, None, _short(exc)))
        return out

    def stop(self, job: RunningJob, now_wall: float) -> None:
        """Ask the job to checkpoint and return; it is killed ``grace`` seconds later."""
        if job.stop_sent is None:
            job.stop_sent = now_wall
            job.kill_at = now_wall + self.grace
            job.actors[0].stop.remote()

    def kill(self, job: RunningJob) -> None:
        job.killed = True
        for actor in job.actors:
            ray.kill(actor, no_restart=True)

    def release(self, job: RunningJob) -> None:
        """Free the gang's GPUs at once after its run returned (an idle actor would hold
        them until its handle is collected)."""
        for actor in job.actors:
            ray.kill(actor, no_restart=True)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300]
