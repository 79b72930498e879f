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
  passed since the last one (``reset_due``); on a physical cluster ``_allocation_thread``
  re-solves at every arrival and completion and the counters reset once a new allocation
  came and 1920 s have passed (``resolve``, ``counters_due``); a job's priority is
  ``allocation / fraction``, ``fraction`` its share of all time received since the reset
  (``allocation * 1e9`` when none was received); a job with no allocation yet has
  priority 0;
- ``_schedule_jobs_on_workers_helper``: jobs sorted by (priority, deficit, allocation),
  highest first, each taken if its gang fits the workers left, else passed over;
- ``_schedule_jobs_on_workers`` and ``_assign_workers_to_job``: the chosen jobs, biggest
  gang first, keep last round's workers when those are all still free; the others take
  workers server by server in order (strided), and a job not in the allocation is dropped
  there (the workers it was counted against stay idle);
- ``_done_callback``: a job that ran adds its execution time in the round to its own
  counter and to the total (a job that finished mid-round too, before it is removed).

On several GPU types every counter, deficit and priority above is kept per type
(``_job_time_so_far[job][type]``, ``_worker_time_so_far[type]``, ``_deficits[type]``,
``_priorities[type]``; ``TypedBooks``); ``_schedule_jobs_on_workers_helper(worker_types)``
walks each type's sorted (job, type) entries, the types in the order ``v100, p100, k80``
(``pick_typed``), and ``_schedule_jobs_on_workers`` assigns each type's jobs on its own
workers (``assign(..., gpu_type)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, cast

from themis.model.cluster import Cluster
from themis.model.state import JobState

if TYPE_CHECKING:  # numpy is imported when a round is ordered, not when policies load
    import numpy as np

#: Gavel's allocation over the live jobs: a time fraction (0..1) per job.
Solver = Callable[[list[JobState]], Mapping[JobState, float]]

#: ``Scheduler(time_per_iteration=360)``: seconds per round.
ROUND_SECONDS = 360.0
#: ``Scheduler(minimum_time_between_allocation_resets=1920)``: seconds.
RESET_SECONDS = 1920.0
#: ``GavelBooks.ranked`` converts this many jobs at a time.
_CHUNK = 128


class GavelBooks:
    """Gavel's per-job accounting, in insertion (submission) order, which breaks ties.

    Every round sorts every live job (thousands under load) by keys computed from these
    books, so they are numpy arrays by *slot*, a job's place in submission order: a round
    then reads three arrays instead of three dicts. A removed job leaves a hole (its
    ``_alive`` flag drops) until the holes outnumber the jobs and the arrays are compacted,
    order kept. ``_slot`` maps each live job to its slot, in submission order."""

    def __init__(
        self, round_length: float = ROUND_SECONDS, reset_interval: float = RESET_SECONDS
    ) -> None:
        if round_length <= 0 or reset_interval < 0:
            raise ValueError("the round must be > 0 s and the reset interval >= 0 s")
        self.round_length = round_length
        self.reset_interval = reset_interval
        self.worker_time = 0.0  # all jobs' seconds received since the last reset
        self.allocation: dict[JobState, float] = {}  # time fractions of the last solve
        self.last_reset: float | None = None
        self.need_update = False
        #: A solve came after the last reset (Gavel's ``_allocation_changed_since_last_
        #: time_reset``): what the cluster scheduler's resets wait for.
        self.changed_since_reset = False
        self._slot: dict[JobState, int] = {}
        self._by_slot: list[JobState | None] = []  # None: a hole
        self._used = 0  # slots handed out (live or holes)
        self._holes = 0
        # Created at the first job: numpy is imported when a round runs, not at import.
        self._time: np.ndarray | None = None  # seconds received since the last reset
        self._deficit: np.ndarray | None = None
        self._share: np.ndarray | None = None  # allocation.get(job, 0.0), kept by slot
        self._alive: np.ndarray | None = None

    @property
    def jobs(self) -> list[JobState]:
        """The live jobs, in submission order."""
        return list(self._slot)

    def __contains__(self, job: JobState) -> bool:
        return job in self._slot

    def __len__(self) -> int:
        return len(self._slot)

    @property
    def job_time(self) -> dict[JobState, float]:
        """Seconds each job received since the last reset (a copy)."""
        return {job: float(self._arrays()[0][k]) for job, k in self._slot.items()}

    @property
    def deficit(self) -> dict[JobState, float]:
        """Each job's deficit (a copy)."""
        return {job: float(self._arrays()[1][k]) for job, k in self._slot.items()}

    def add(self, job: JobState) -> None:
        time, deficit, share, alive = self._arrays()
        k = self._slot.get(job)
        if k is None:
            if self._used == time.size:
                time, deficit, share, alive = self._grow()
            k = self._slot[job] = self._used
            self._by_slot.append(job)
            self._used += 1
        time[k] = self.round_length / 2.0
        deficit[k] = 0.0
        share[k] = self.allocation.get(job, 0.0)  # a stale allocation, if it had one
        alive[k] = True
        self.need_update = True

    def remove(self, job: JobState) -> None:
        k = self._slot.pop(job)
        self._by_slot[k] = None
        self._arrays()[3][k] = False
        self._holes += 1
        if self._holes > max(64, len(self._slot)):
            self._compact()
        self.need_update = True  # its stale allocation stays until the next solve

    def ran(self, job: JobState, seconds: float, live: bool) -> None:
        """``job`` executed ``seconds`` in the round that just ended."""
        if live:
            self._arrays()[0][self._slot[job]] += seconds
        self.worker_time += seconds

    def reset_due(self, now: float) -> bool:
        """Gavel's simulator: solve and reset together, when something changed and the
        reset interval has passed since the last reset."""
        if not self.need_update:
            return False
        return self._interval_passed(now)

    def counters_due(self, now: float) -> bool:
        """Gavel's cluster scheduler: reset the counters once a new allocation came and
        the reset interval has passed (the solves happen on their own, ``resolve``)."""
        return self.changed_since_reset and self._interval_passed(now)

    def _interval_passed(self, now: float) -> bool:
        return self.last_reset is None or now - self.last_reset >= self.reset_interval

    def reset(self, now: float, solve: Solver | None) -> None:
        """Charge deficits, restart the time counters, and (given ``solve``) solve the
        allocation anew.

        Element for element the floats of ``deficit[job] += allocation.get(job, 0.0) *
        since - (received - half)``, over every live job at once."""
        since = 0.0 if self.last_reset is None else now - self.last_reset
        half = self.round_length / 2.0
        time, deficit, share, _ = self._arrays()
        live = self._live()
        deficit[live] = deficit[live] + (share[live] * since - (time[live] - half))
        time[live] = half
        self.worker_time = half * len(self._slot)
        self.last_reset = now
        self.changed_since_reset = False
        if solve is not None:
            self._solve(solve)

    def resolve(self, solve: Solver) -> None:
        """A new allocation for the live jobs, the counters kept (Gavel's cluster
        scheduler re-solves on every arrival and completion, ``_allocation_thread``)."""
        self._solve(solve)
        self.changed_since_reset = True

    def _solve(self, solve: Solver) -> None:
        import numpy as np

        _, _, share, _ = self._arrays()
        live = self._live()
        jobs = self.jobs
        self.allocation = dict(solve(jobs))
        share[live] = np.fromiter(map(self.allocation.get, jobs, repeat(0.0)), float, len(jobs))
        self.need_update = False

    def priority(self, job: JobState) -> float:
        received = float(self._arrays()[0][self._slot[job]])
        return _priority(self.allocation.get(job), received, self.worker_time)

    def order(self) -> list[JobState]:
        """Live jobs by (priority, deficit, allocation), highest first; ties keep the
        submission order (Python's reverse sort is stable, as in Gavel)."""
        return list(self.ranked())

    def ranked(self) -> Iterator[JobState]:
        """``order``, handed out a chunk at a time: a round's pick stops once the cluster
        is full, usually long before the last of thousands of jobs.

        The keys are arrays: the same IEEE divisions as ``_priority`` give the same
        floats, and a stable ascending sort of the negated keys is the stable descending
        sort of the keys. They are read now, not when the iterator is."""
        import numpy as np

        time, deficit, share, _ = self._arrays()
        live = self._live()
        shares = share[live]
        priority = _priorities(shares, time[live], self.worker_time)
        slots = live[np.lexsort((-shares, -deficit[live], -priority))]  # last key first
        jobs = cast(list[JobState], self._by_slot)  # live slots hold jobs, not holes

        def chunks() -> Iterator[JobState]:
            for start in range(0, slots.size, _CHUNK):
                yield from map(jobs.__getitem__, slots[start : start + _CHUNK].tolist())

        return chunks()

    def _live(self) -> np.ndarray:
        """The live jobs' slots, in submission order."""
        import numpy as np

        return np.flatnonzero(self._arrays()[3][: self._used])

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._time is None or self._deficit is None or self._share is None:
            import numpy as np

            self._time, self._deficit, self._share = (np.zeros(0) for _ in range(3))
            self._alive = np.zeros(0, dtype=bool)
        assert self._alive is not None
        return self._time, self._deficit, self._share, self._alive

    def _grow(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Twice the slots (at least 64), the used ones copied."""
        import numpy as np

        size = max(64, 2 * self._used)
        old = self._arrays()
        new = tuple(np.zeros(size, dtype=a.dtype) for a in old)
        for a, b in zip(old, new, strict=True):
            b[: self._used] = a[: self._used]
        self._time, self._deficit, self._share, self._alive = new
        return self._arrays()

    def _compact(self) -> None:
        """Drop the holes: the live jobs take slots 0.. in submission order."""
        live = self._live()
        self._time, self._deficit, self._share, self._alive = (a[live] for a in self._arrays())
        self._slot = {job: k for k, job in enumerate(self._slot)}
        self._by_slot = list(self._slot)
        self._used = len(self._slot)
        self._holes = 0


def _priorities(share: np.ndarray, received: np.ndarray, total: float) -> np.ndarray:
    """``_priority`` over arrays (no allocation is a share of 0.0): element for element
    the same floats."""
    import numpy as np

    if total == 0.0:
        priority = share * 1e9
    else:
        fraction = received / total
        with np.errstate(divide="ignore", invalid="ignore"):
            priority = np.where(fraction > 0.0, share / fraction, share * 1e9)
    priority[share == 0.0] = 0.0
    return priority


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
    cluster: Cluster,
    chosen: Sequence[JobState],
    allocation: Mapping[JobState, object],
    gpu_type: str | None = None,
) -> dict[JobState, tuple[int, ...]]:
    """Workers for the chosen jobs, biggest gang first: a job keeps the GPUs it holds when
    none is taken yet; the others take GPUs server (machine) by server in topology order.
    Jobs without an allocation are dropped here, as Gavel drops them.

    On a typed cluster Gavel assigns each type's jobs on that type's workers only
    (``gpu_type``): a job keeps last round's workers only if they are of this type."""
    if cluster.typed and gpu_type is None:
        raise ValueError("on a typed cluster, assign one GPU type at a time")
    servers = [
        list(gpus)
        for machine, gpus in sorted(
            cluster.machine_gpus.items(), key=lambda kv: cluster.topology_rank[kv[1][0]]
        )
        if gpu_type is None or cluster.machine_type[machine] == gpu_type
    ]
    taken: set[int] = set()
    placed: dict[JobState, tuple[int, ...]] = {}
    pointer = 0
    for gang in sorted({j.gang for j in chosen}, reverse=True):
        group = [j for j in chosen if j.gang == gang]
        for job in group:  # keep last round's workers when all are still free
            if (
                job.gpus
                and (gpu_type is None or all(cluster.type_of[g] == gpu_type for g in job.gpus))
                and not taken.intersection(job.gpus)
            ):
                placed[job] = job.gpus
                taken.update(job.gpus)
        for job in group:
            if job in placed or job not in allocation:
                continue
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
                raise AssertionError("chosen jobs fit the cluster (or their type) by count")
            placed[job] = tuple(sorted(gpus))
    return placed


# -- several GPU types -------------------------------------------------------------------------

#: Gavel's allocation on a typed cluster: time fractions by job and GPU type.
TypedSolver = Callable[[list[JobState]], Mapping[JobState, Mapping[str, float]]]

#: ``_schedule_jobs_on_workers``: Gavel walks its worker types in this order (fastest
#: first; no shuffle for its ``Perf`` policies). Other types follow in the cluster's order.
GAVEL_TYPE_ORDER = ("v100", "p100", "k80")


def type_order(types: Sequence[str]) -> list[str]:
    """The cluster's GPU types in Gavel's walking order."""
    known = [t for t in GAVEL_TYPE_ORDER if t in types]
    return known + [t for t in types if t not in GAVEL_TYPE_ORDER]


class TypedBooks:
    """Gavel's accounting per (job, GPU type): one ``GavelBooks`` per type, sharing the
    job list, the solve and the resets (Gavel's ``_job_time_so_far[job][type]``,
    ``_worker_time_so_far[type]``, ``_deficits[type][job]``, ``_priorities[type][job]``)."""

    def __init__(
        self,
        types: Sequence[str],
        round_length: float = ROUND_SECONDS,
        reset_interval: float = RESET_SECONDS,
    ) -> None:
        if not types:
            raise ValueError("typed books need at least one GPU type")
        self.types = tuple(types)
        self.by_type = {t: GavelBooks(round_length, reset_interval) for t in self.types}
        self._first = self.by_type[self.types[0]]

    @property
    def jobs(self) -> list[JobState]:
        return self._first.jobs

    @property
    def allocation(self) -> dict[JobState, dict[str, float]]:
        """Time fractions of the last solve, by job and type."""
        return {
            job: {t: self.by_type[t].allocation[job] for t in self.types}
            for job in self._first.allocation
        }

    def __contains__(self, job: JobState) -> bool:
        return job in self._first

    def __len__(self) -> int:
        return len(self._first)

    def add(self, job: JobState) -> None:
        for books in self.by_type.values():
            books.add(job)

    def remove(self, job: JobState) -> None:
        for books in self.by_type.values():
            books.remove(job)

    def ran(self, job: JobState, gpu_type: str, seconds: float, live: bool) -> None:
        """``job`` executed ``seconds`` on ``gpu_type`` in the round that just ended."""
        self.by_type[gpu_type].ran(job, seconds, live)

    def reset_due(self, now: float) -> bool:
        return self._first.reset_due(now)

    def counters_due(self, now: float) -> bool:
        return self._first.counters_due(now)

    @property
    def need_update(self) -> bool:
        return self._first.need_update

    def reset(self, now: float, solve: TypedSolver | None) -> None:
        """One solve for every type (given ``solve``); then each type's deficits and
        counters (Gavel's ``_reset_time_run_so_far`` loops over the types with one
        allocation)."""
        if solve is None:
            for books in self.by_type.values():
                books.reset(now, None)
            return
        allocation = solve(self.jobs)
        for t, books in self.by_type.items():
            books.reset(now, _Column(allocation, t))

    def resolve(self, solve: TypedSolver) -> None:
        """A new allocation for every type, the counters kept (``GavelBooks.resolve``)."""
        allocation = solve(self.jobs)
        for t, books in self.by_type.items():
            books.resolve(_Column(allocation, t))

    def queue(self, order: Sequence[str]) -> list[tuple[JobState, str]]:
        """Gavel's ``sorted_job_queue`` without its global queue: each type's (job, type)
        entries by (priority, deficit, allocation), highest first, the types one after
        the other in ``order``."""
        return [(job, t) for t in order for job in self.by_type[t].order()]


class _Column:
    """One type's column of a typed allocation, as a one-type solver."""

    def __init__(self, allocation: Mapping[JobState, Mapping[str, float]], gpu_type: str) -> None:
        self.column = {job: row[gpu_type] for job, row in allocation.items()}

    def __call__(self, jobs: list[JobState]) -> Mapping[JobState, float]:
        return self.column


def pick_typed(
    queue: Iterable[tuple[JobState, str]], workers: Mapping[str, int]
) -> dict[JobState, str]:
    """Gavel's ``_schedule_jobs_on_workers_helper``: walk the (job, type) queue; skip a
    type with no worker left and a job already chosen; take the pair when the gang fits
    the type's workers left. (Gavel also skips a type where the job's throughput is 0: here
    that is a gang larger than the type, which the count already skips.)"""
    left = dict(workers)
    chosen: dict[JobState, str] = {}
    for job, gpu_type in queue:
        if left[gpu_type] == 0 or job in chosen:
            continue
        if job.gang <= left[gpu_type]:
            chosen[job] = gpu_type
            left[gpu_type] -= job.gang
    return chosen
