"""Job actors: one lease of one trial, placed by Ray on the granted nodes and GPUs.

A gang runs one actor (one process) per GPU by default, as torchrun does: each actor is
pinned to its node with a hard ``NodeAffinitySchedulingStrategy`` and asks for one GPU
(``num_gpus=1``; Ray sets ``CUDA_VISIBLE_DEVICES``), so the ranks on one node get
distinct GPUs and ``LOCAL_RANK`` 0..k-1. As under torchrun, every rank then sees the
gang's GPUs of its node, in local-rank order (each actor tells its own, and the ranks of
a node get the list), so ``torch.cuda.set_device(LOCAL_RANK)`` names its own GPU: with
one visible device per process it named a device the process could not see. An app
with ``ranks: node`` gets one actor per node instead, asking for that node's share of
the gang. Every actor runs the training
function as one rank, with the rendezvous variables torch.distributed expects
(``MASTER_ADDR`` = rank 0's node, ``MASTER_PORT`` = a port rank 0's actor found free,
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``). The port travels as a
Ray object ref, so no start blocks the arbiter. Rank 0 reports and checkpoints; a stop
goes to every rank; a rank that dies takes the whole gang down (the trial resumes
later).
Actors ask for no CPU (``num_cpus=0``): a node's CPUs must not cap how many GPU jobs it
runs.

The arbiter never blocks on a job: ``run`` returns an object ref that resolves when the
lease ends, ``poll`` and ``stop`` are calls to a threaded actor that answer while the
training thread runs. An actor that dies (killed, its node lost) surfaces as an error on
its ``run`` ref.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from themis.runtime.workers.launcher import RunningJob
from themis.runtime.workers.lease import LeaseControl, Outcome, Progress, TrialSpec, run_trial


@ray.remote(num_cpus=0, max_concurrency=4)  # type: ignore[call-overload]  # ray's stubs lack actor options
class JobActor:
    """Runs ``run_trial`` on its thread; ``poll`` and ``stop`` answer from others."""

    def __init__(self) -> None:
        self.control = LeaseControl()
        self.spec: TrialSpec | None = None

    def run(self, spec: TrialSpec, port: int = 0, *node_devices: str) -> Outcome:
        """Run the lease. ``node_devices``: the ``CUDA_VISIBLE_DEVICES`` of each rank of
        the gang on this node, in local-rank order (Ray resolves them before the call)."""
        self.spec = spec
        visible = [d for devices in node_devices for d in devices.split(",") if d]
        if len(visible) == len(node_devices) > 1:  # one device each: the node's, in order
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(visible)
        return run_trial(spec, self.control, port)

    def devices(self) -> str:
        """The devices Ray gave this actor (its ``CUDA_VISIBLE_DEVICES``)."""
        return os.environ.get("CUDA_VISIBLE_DEVICES", "")

    def open_port(self) -> int:
        """A TCP port free on this node now, for the gang's rendezvous."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            return int(sock.getsockname()[1])

    def poll(self) -> Progress | None:
        return None if self.spec is None else self.control.drain(self.spec)

    def stop(self) -> None:
        self.control.request_stop()

    def pid(self) -> int:
        return os.getpid()


def node_peers(members: list[tuple[str, int, int, int]], rank: int) -> list[int]:
    """The ranks of the gang on ``rank``'s node, in local-rank order (``members`` as
    ``TrialSpec.members`` lists them: rank order, a node's ranks by local rank)."""
    node = members[rank][0]
    return sorted((j for j, m in enumerate(members) if m[0] == node), key=lambda j: members[j][2])


class Launcher:
    """Starts, polls, stops and kills job actors (a :class:`JobLauncher` on Ray, in the
    driver's process)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace

    def start(self, spec: TrialSpec, placement: list[tuple[str, int]]) -> RunningJob:
        # ``@ray.remote`` made JobActor an ActorClass, but mypy does not apply class
        # decorators, so it sees the plain class: a stub gap, not a type error.
        members = spec.members()  # spec.gang is ``placement``
        actors = [
            JobActor.options(  # type: ignore[attr-defined]
                num_gpus=count,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
            for node_id, count, _, _ in members
        ]
        port = actors[0].open_port.remote()
        devices = [actor.devices.remote() for actor in actors]
        refs = [
            actor.run.remote(
                replace(spec, rank=k, local_rank=m[2], local_world_size=m[3]),
                port,
                *[devices[j] for j in node_peers(members, k)],
            )
            for k, (actor, m) in enumerate(zip(actors, members, strict=True))
        ]
        job = RunningJob(spec.app_id, spec.trial_id, spec, actors, refs[0], time.time())
        job.extra["members"] = refs[1:]
        return job

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
        ended = {id(job) for job, _, _ in out}
        for job in jobs:
            if id(job) not in ended and (why := _member_lost(job)) is not None:
                self.kill(job)  # rank 0 would wait forever on the lost rank
                out.append((job, None, why))
        return out

    def stop(self, job: RunningJob, now_wall: float) -> None:
        """Ask the job to checkpoint and return; it is killed ``grace`` seconds later."""
        if job.stop_sent is None:
            job.stop_sent = now_wall
            job.kill_at = now_wall + self.grace
            for actor in job.actors:
                actor.stop.remote()

    def kill(self, job: RunningJob) -> None:
        job.killed = True
        for actor in job.actors:
            ray.kill(actor, no_restart=True)

    def release(self, job: RunningJob) -> None:
        """Free the gang's GPUs at once after its run returned (an idle actor would hold
        them until its handle is collected)."""
        for actor in job.actors:
            ray.kill(actor, no_restart=True)


def _member_lost(job: RunningJob) -> str | None:
    """Why a rank other than 0 died, if one did."""
    members = job.extra.get("members") or []
    if not members:
        return None
    ready, _ = ray.wait(members, num_returns=len(members), timeout=0)
    for ref in ready:
        try:
            ray.get(ref)
        except Exception as exc:
            return f"a gang member died: {_short(exc)}"
    return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300]
