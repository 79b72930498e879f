"""A launcher without Ray, for tests of the arbiter's decisions in seconds.

Jobs are simulated on the wall clock and behave as Ray jobs do in the ways that matter
to leases: a job needs its node's GPUs to be *physically* free to start (Ray queues an
actor until its resources are), takes ``start_delay`` seconds to start, makes one step
every ``step_time`` seconds, honours a stop only at the end of its current step (then
checkpoints), and holds its GPUs until it has returned or was killed. Metrics are
reported per step as ``trial.report`` would; per-app behaviour is set with ``Behaviour``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from themis.runtime.workers.launcher import RunningJob
from themis.runtime.workers.lease import Outcome, Progress, TrialSpec


@dataclass
class Behaviour:
    step_time: float = 0.1
    start_delay: float = 0.3
    metric: str | None = "loss"  # what it reports each step (None: nothing)
    loss: float = 1.0  # + trial index / 10: later trials are worse
    error_at: int | None = None  # raises after this many steps
    returns_at: int | None = None  # returns by itself after this many steps
    error: str = "ValueError: broken"  # the error text of error_at
    logs: tuple[str, ...] = ()  # lines the trial logs at its first poll (trial.log)


@dataclass
class FakeJob:
    spec: TrialSpec
    placement: list[tuple[str, int]]
    created: float
    behaviour: Behaviour
    start_step: int
    started_at: float | None = None
    stop_sent: float | None = None
    killed: bool = False
    ended: tuple[Outcome | None, str | None] | None = None
    reported_steps: int = 0
    logged: bool = False
    ran: list[int] = field(default_factory=list)


NODE = "n" * 56


def nodes(gpus_per_node: tuple[int, ...] = (2, 2)) -> list[dict[str, Any]]:
    return [
        {"Alive": True, "NodeID": f"{k:02d}" + NODE[2:], "Resources": {"GPU": n}, "Labels": {}}
        for k, n in enumerate(gpus_per_node)
    ]


class FakeLauncher:
    def __init__(self, grace: float, behaviours: dict[str, Behaviour], node_list=None) -> None:
        self.grace = grace
        self.behaviours = behaviours
        self.free = {n["NodeID"]: int(n["Resources"]["GPU"]) for n in node_list or nodes()}
        self.checkpoints: dict[tuple[str, str], int] = {}
        self.jobs: list[FakeJob] = []
        self.queued_on_busy_gpus = 0  # starts that found their GPUs still held
        self.history: list[FakeJob] = []

    # -- the launcher interface -----------------------------------------------------------

    def start(self, spec: TrialSpec, placement: list[tuple[str, int]]) -> RunningJob:
        behaviour = self.behaviours.get(
            f"{spec.app_id}/{spec.trial_id}", self.behaviours.get(spec.app_id, Behaviour())
        )
        key = (spec.app_id, spec.trial_id)
        fake = FakeJob(spec, placement, time.time(), behaviour, self.checkpoints.get(key, 0))
        if any(self.free[node] < count for node, count in placement):
            self.queued_on_busy_gpus += 1
        self.jobs.append(fake)
        self.history.append(fake)
        return RunningJob(spec.app_id, spec.trial_id, spec, [fake], fake, time.time())

    def request_polls(self, jobs: list[RunningJob]) -> None:
        pass

    def collect_polls(self, jobs: list[RunningJob]) -> list[tuple[RunningJob, Progress]]:
        out = []
        for rj in jobs:
            fake: FakeJob = rj.actors[0]
            self._advance(fake)
            if fake.started_at is not None and fake.ended is None:
                out.append((rj, self._progress(fake)))
        return out

    def collect_ends(self, jobs: list[RunningJob]):
        out = []
        for rj in jobs:
            fake: FakeJob = rj.actors[0]
            self._advance(fake)
            if fake.ended is not None:
                out.append((rj, *fake.ended))
        return out

    def stop(self, rj: RunningJob, now_wall: float) -> None:
        if rj.stop_sent is None:
            rj.stop_sent = now_wall
            rj.kill_at = now_wall + self.grace
            rj.actors[0].stop_sent = now_wall

    def kill(self, rj: RunningJob) -> None:
        rj.killed = True
        fake: FakeJob = rj.actors[0]
        self._advance(fake)
        if fake.ended is None:
            self._end(fake, None, "killed")

    def release(self, rj: RunningJob) -> None:
        pass

    # -- the simulated job ----------------------------------------------------------------

    def _steps(self, fake: FakeJob, at: float) -> int:
        assert fake.started_at is not None
        done = int((at - fake.started_at) / fake.behaviour.step_time + 1e-9)
        return min(fake.start_step + done, fake.spec.stop)

    def _advance(self, fake: FakeJob) -> None:
        if fake.ended is not None:
            return
        now = time.time()
        b = fake.behaviour
        if fake.started_at is None:
            if fake.stop_sent is not None:  # stopped before it could start
                self._end(fake, "paused", None, steps=fake.start_step)
                return
            ready = now >= fake.created + b.start_delay
            if not ready or any(self.free[n] < c for n, c in fake.placement):
                return
            for node, count in fake.placement:
                self.free[node] -= count
            fake.started_at = now
        steps = self._steps(fake, now)
        if b.error_at is not None and steps >= b.error_at:
            self._end(fake, "error", None, steps=b.error_at, error=b.error)
            return
        if b.returns_at is not None and steps >= b.returns_at:
            self._end(fake, "done", None, steps=b.returns_at)
            return
        if steps >= fake.spec.stop:
            self._end(fake, "done", None, steps=fake.spec.stop)
            return
        if fake.stop_sent is not None:
            # Honoured at the end of the step under way when the stop came.
            k = math.ceil((fake.stop_sent - fake.started_at) / b.step_time - 1e-9)
            end_of_step = fake.started_at + max(k, 0) * b.step_time
            if now >= end_of_step:
                self._end(fake, "paused", None, steps=self._steps(fake, end_of_step))

    def _progress(self, fake: FakeJob, upto: int | None = None) -> Progress:
        steps = self._steps(fake, time.time()) if upto is None else upto
        b = fake.behaviour
        index = int(fake.spec.trial_id[1:])
        reports = ()
        if b.metric is not None:
            reports = tuple(
                (s, {b.metric: b.loss + index / 10})
                for s in range(fake.reported_steps + 1, steps + 1)
            )
        fake.reported_steps = max(fake.reported_steps, steps)
        every = fake.spec.checkpoint_every
        ckpt = max(fake.start_step, (steps // every) * every if steps < fake.spec.stop else steps)
        self.checkpoints[(fake.spec.app_id, fake.spec.trial_id)] = max(
            self.checkpoints.get((fake.spec.app_id, fake.spec.trial_id), 0), ckpt
        )
        s = fake.spec
        logs = () if fake.logged else b.logs
        fake.logged = True
        return Progress(s.app_id, s.trial_id, s.token, steps, ckpt, reports, logs, True)

    def _end(self, fake, status, why, steps=0, error=None) -> None:
        if fake.started_at is not None:
            for node, count in fake.placement:
                self.free[node] += count
        self.jobs.remove(fake)
        s = fake.spec
        if status is None:
            fake.ended = (None, why)
            return
        last = (
            self._progress(fake, steps)
            if fake.started_at is not None
            else Progress(s.app_id, s.trial_id, s.token, steps, steps, (), (), False)
        )
        # A cooperative end checkpoints every step done.
        self.checkpoints[(s.app_id, s.trial_id)] = max(
            self.checkpoints.get((s.app_id, s.trial_id), 0), steps
        )
        outcome = Outcome(s.app_id, s.trial_id, s.token, status, steps, steps, last, error)
        fake.ended = (outcome, None)
