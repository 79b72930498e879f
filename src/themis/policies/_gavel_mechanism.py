"""Gavel's round mechanism as it ships: per-job time received, priorities, deficits, the
greedy pick of a round and the strided worker assignment.

Followed, in ``scheduler/scheduler.py`` of stanford-futuredata/gavel:

- ``Scheduler.__init__``: ``time_per_iteration=360`` (the round) and
  ``minimum_time_between_allocation_resets=1920``;
- ``add_job``: a job starts with ``time_per_iteration / 2`` seconds of time received;
- ``_reset_time_run_so_far``: at a reset each job's deficit grows by the time its allocation
  promised since the last reset minus the time it received (less the initial half round),
  and every job's counter restarts at half a round;
- ``_update_priorities``: in simulation the allocation is recomputed only together with a
  reset, when something changed (an arrival or a completion) and at least 1920 s have
  passed since the last one; a job's priority is ``allocation / fraction``, ``fraction``
  its share of all time received since the reset (``allocation * 1e9`` when none was
  received); a job with no allocation yet has priority 0;
- ``_schedule_jobs_on_workers_helper``: jobs sorted by (priority, deficit, allocation),
  highest first, each taken if its gang fits the workers left, else passed over;
- ``_schedule_jobs_on_workers`` and ``_assign_workers_to_job``: the chosen jobs, biggest
  gang first, keep last round's workers when those are all still free; the others take
  workers server by server in order (strided), and a job not in the allocation is dropped
  there (the workers it was counted against stay idle);
- ``_done_callback``: a job that ran adds its execution time in the round to its own
  counter and to the total (a job that finished mid-round too, before it is removed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from themis.model.cluster import Cluster
from themis.model.state import JobState

#: Gavel's allocation over the live jobs: a time fraction (0..1) per job.
Solver = Callable[[list[JobState]], Mapping[JobState, float]]

#: ``Scheduler(time_per_iteration=360)``: seconds per round.
ROUND_SECONDS = 360.0
#: ``Scheduler(minimum_time_between_allocation_resets=1920)``: seconds.
RESET_SECONDS = 1920.0


class GavelBooks:
    """Gavel's per-job accounting, in insertion (submission) order, which breaks ties."""

    def __init__(
        self, round_length: float = ROUND_SECONDS, reset_interval: float = RESET_SECONDS
    ) -> None:
        if round_length <= 0 or reset_interval < 0:
            raise ValueError("the round must be > 0 s and the reset interval >= 0 s")
        self.round_length = round_length
        self.reset_interval = reset_interval
        self.job_time: dict[JobState, float] = {}  # seconds received since the last reset
        self.worker_time = 0.0  # all jobs' seconds received since the last reset
        self.deficit: dict[JobState, float] = {}
        self.allocation: dict[JobState, float] = {}  # time fractions of the last solve
        self.last_reset: float | None = None
        self.need_update = False

    def add(self, job: JobState) -> None:
        self.job_time[job] = self.round_length / 2.0
        self.deficit[job] = 0.0
        self.need_update = True

    def remove(self, job: JobState) -> None:
        del self.job_time[job]
        del self.deficit[job]
        self.need_update = True  # its stale allocation stays until the next solve

    def ran(self, job: JobState, seconds: float, live: bool) -> None:
        """``job`` executed ``seconds`` in the round that just ended."""
        if live:
            self.job_time[job] += seconds
        self.worker_time += seconds

    def reset_due(self, now: float) -> bool:
        if not self.need_update:
            return False
        return self.last_reset is None or now - self.last_reset >= self.reset_interval

    def reset(self, now: float, solve: Solver) -> None:
        """Charge deficits, restart the time counters, and solve the allocation anew."""
        since = 0.0 if self.last_reset is None else now - self.last_reset
        half = self.round_length / 2.0
        for job, received in self.job_time.items():
            owed = self.allocation.get(job, 0.0) * since
            self.deficit[job] += owed - (received - half)
            self.job_time[job] = half
        self.worker_time = half * len(self.job_time)
        self.last_reset = now
        self.allocation = dict(solve(list(self.job_time)))
        self.need_update = False

    def priority(self, job: JobState) -> float:
        return _priority(self.allocation.get(job), self.job_time[job], self.worker_time)

    def order(self) -> list[JobState]:
        """Live jobs by (priority, deficit, allocation), highest first; ties keep the
        submission order (Python's reverse sort is stable, as in Gavel). Keys are computed
        once per job: this runs every round over every live job (thousands under load)."""
        jobs = list(self.job_time)
        allocation, deficit, total = self.allocation, self.deficit, self.worker_time
        keys = [
            (
                _priority(allocation.get(job), self.job_time[job], total),
                deficit[job],
                allocation.get(job, 0.0),
            )
            for job in jobs
        ]
        ranked = sorted(range(len(jobs)), key=keys.__getitem__, reverse=True)
        return [jobs[k] for k in ranked]


def _priority(share: float | None, received: float, total: float) -> float:
    """Gavel's ``_update_priorities``: allocation over the share of time received; 0 for a
    job with no allocation, ``allocation * 1e9`` while nothing was received."""
    if share is None or share == 0.0:
        return 0.0
    if total == 0.0:
        return share * 1e9
    fraction = received / total
    return share / fraction if fraction > 0.0 else share * 1e9


def pick(order: Iterable[JobState], workers: int) -> list[JobState]:
    """The round's jobs: each in turn if its gang fits the workers left, else passed over."""
    chosen = []
    left = workers
    for job in order:
        if left == 0:
            break
        if job.gang <= left:
            chosen.append(job)
            left -= job.gang
    return chosen


def assign(
    cluster: Cluster, chosen: Sequence[JobState], allocation: Mapping[JobState, float]
) -> dict[JobState, tuple[int, ...]]:
    """Workers for the chosen jobs, biggest gang first: a job keeps the GPUs it holds when
    none is taken yet; the others take GPUs server (machine) by server in topology order.
    Jobs without an allocation are dropped here, as Gavel drops them."""
    servers = [
        list(gpus)
        for _, gpus in sorted(
            cluster.machine_gpus.items(), key=lambda kv: cluster.topology_rank[kv[1][0]]
        )
    ]
    taken: set[int] = set()
    placed: dict[JobState, tuple[int, ...]] = {}
    pointer = 0
    for gang in sorted({j.gang for j in chosen}, reverse=True):
        group = [j for j in chosen if j.gang == gang]
        for job in group:  # keep last round's workers when all are still free
            if job.gpus and not taken.intersection(job.gpus):
                placed[job] = job.gpus
                taken.update(job.gpus)
        for job in group:
            if job in placed or job not in allocation:
                continue
            if cluster.typed:
                typed = _one_type(cluster, servers, taken, gang)
                if typed is not None:
                    placed[job] = typed
                continue  # chosen by count: no one type may hold it this round
            gpus: list[int] = []
            while len(gpus) < gang and pointer < len(servers):
                if not servers[pointer]:
                    pointer += 1
                    continue
                gpu = servers[pointer].pop(0)
                if gpu not in taken:
                    gpus.append(gpu)
                    taken.add(gpu)
            if len(gpus) != gang:
                raise AssertionError("chosen jobs fit the cluster by count")
            placed[job] = tuple(sorted(gpus))
    return placed


def _one_type(
    cluster: Cluster, servers: list[list[int]], taken: set[int], gang: int
) -> tuple[int, ...] | None:
    """Gavel's server-by-server walk kept inside one GPU type on a typed cluster: the
    first type, in topology order, with ``gang`` untaken GPUs. (Gavel proper places each
    job on the type its allocation chose; this is the type-blind walk.)"""
    for gpu_type in cluster.types:
        free = [
            g
            for gpus in servers
            if gpus and cluster.type_of[gpus[0]] == gpu_type
            for g in gpus
            if g not in taken
        ]
        if len(free) >= gang:
            chosen = free[:gang]
            for gpus in servers:
                for g in chosen:
                    if g in gpus:
                        gpus.remove(g)
            taken.update(chosen)
            return tuple(sorted(chosen))
    return None
