"""What runs and what waits, kept by a policy from round to round, so that a round costs
what changed since the last one instead of every live job of every active app.

The simulator hands each view its own books (``SchedulingView.changed``, ``order``,
``free``): which apps changed since the last round. Between rounds a job changes only
by what the policy decided (the jobs it started or stopped), by finishing, or by what
``AppState.touch`` marks (a search pausing or resuming trials). ``Books.sync`` brings the
policy's books up to date from exactly that: the jobs it started last round, and the apps
that changed (a touched or new app is read afresh, a finished one dropped, another one's
running jobs checked for those that stopped).

Waiting jobs sit in a ``WaitingIndex`` under a key the policy gives when a job begins
waiting (its place in the policy's service order): valid for as long as the job waits,
since a waiting job neither progresses nor holds GPUs. ``fill`` hands out GPUs in that
order without walking jobs whose gangs cannot fit.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies.base import SchedulingView

#: A job's place in a policy's service order: a tuple that sorts in that order, unique per
#: job (no two keys compare equal up to the job), its last item the job.
Key = tuple[Any, ...]


def walk_streams(
    streams: Iterable[Sequence[Key]], left: int, place: Callable[[JobState, int], int | None]
) -> None:
    """Walk the merge of ``streams`` (each sorted, all of one gang size) in key order while
    ``left`` GPUs remain, offering each job whose gang is no larger to ``place(job, left)``:
    it returns how many GPUs are left once the job has its own, or None when it passes
    the job over. What is left only shrinks, so once a stream's gang is larger none of its
    jobs will fit: the stream is dropped instead of walked."""
    if left <= 0:
        return
    streams = list(streams)
    heap = [(s[0], n, 0) for n, s in enumerate(streams) if s and s[0][-1].spec.gang <= left]
    heapq.heapify(heap)
    while heap:
        key, n, k = heap[0]
        job = key[-1]
        if job.spec.gang > left:
            heapq.heappop(heap)  # this gang no longer fits: nor will the rest of its stream
            continue
        after = place(job, left)
        if after is not None:
            left = after
            if left <= 0:
                break
        stream = streams[n]
        if k + 1 < len(stream):
            heapq.heapreplace(heap, (stream[k + 1], n, k + 1))
        else:
            heapq.heappop(heap)


def fill_streams(streams: Iterable[Sequence[Key]], capacity: int) -> list[JobState]:
    """``_quantum.fill`` of the merge of ``streams``: the jobs in key order while GPUs last
    (counted), a gang that does not fit passed over for the ones behind it."""
    chosen: list[JobState] = []

    def choose(job: JobState, left: int) -> int:
        chosen.append(job)
        return left - job.spec.gang

    walk_streams(streams, capacity, choose)
    return chosen


def by_gang(keys: Iterable[Key]) -> list[list[Key]]:
    """Sorted keys, one list per gang size (streams for ``fill_streams``)."""
    streams: dict[int, list[Key]] = {}
    for key in sorted(keys):
        streams.setdefault(key[-1].spec.gang, []).append(key)
    return list(streams.values())


class WaitingIndex:
    """Waiting jobs under their keys: one sorted list per gang size."""

    def __init__(self) -> None:
        self.streams: dict[int, list[Key]] = {}
        self.key_of: dict[JobState, Key] = {}

    def __contains__(self, job: object) -> bool:
        return job in self.key_of

    def __len__(self) -> int:
        return len(self.key_of)

    def add(self, job: JobState, key: Key) -> None:
        self.discard(job)
        self.key_of[job] = key
        stream = self.streams.get(job.spec.gang)
        if stream is None:
            stream = self.streams[job.spec.gang] = []
        # Most keys join at the back (a queue's next number, or the latest wait): one
        # comparison instead of a search; the same place ``insort`` finds (keys are unique).
        if not stream or stream[-1] < key:
            stream.append(key)
        else:
            insort(stream, key)

    def discard(self, job: JobState) -> None:
        key = self.key_of.pop(job, None)
        if key is not None:
            stream = self.streams[job.spec.gang]
            if stream[0] is key:  # the usual case: the head of its queue was started
                del stream[0]
            else:
                del stream[bisect_left(stream, key)]

    def fill(self, capacity: int, contenders: Sequence[Key] = ()) -> list[JobState]:
        """``fill_streams`` over the waiting jobs and ``contenders`` (keys of jobs not
        in the index, e.g. running jobs that compete again)."""
        streams = [s for s in self.streams.values() if s]
        if contenders:
            streams.extend(by_gang(contenders))
        return fill_streams(streams, capacity)

    def first_fit(
        self, take: Callable[[int], tuple[int, ...] | None], size: Callable[[], int]
    ) -> list[tuple[JobState, tuple[int, ...]]]:
        """The waiting jobs in key order, each given the GPUs ``take(gang)`` returns
        (passed over when it returns None), while ``size()`` GPUs are left: placement
        decides, not a count (on a cluster of several GPU types a gang may fit the count
        and no one type)."""
        placed: list[tuple[JobState, tuple[int, ...]]] = []

        def place(job: JobState, left: int) -> int | None:
            gpus = take(job.spec.gang)
            if gpus is None:
                return None
            placed.append((job, gpus))
            return size()

        walk_streams(self.streams.values(), size(), place)
        return placed

    def in_order(self) -> Iterator[JobState]:
        """Every waiting job, in key order."""
        for key in heapq.merge(*self.streams.values()):
            yield key[-1]


class Books:
    """A policy's books of the active apps' jobs (see the module docstring).

    ``key(job, view)`` is the job's key when it begins waiting. ``running_of`` holds each
    app's running jobs; ``started`` the jobs the policy handed GPUs this round (the next
    ``sync`` moves them from waiting to running). Grant ends are tracked for ``ending``.
    """

    def __init__(
        self,
        key: Callable[[JobState, SchedulingView], Key],
        on_reset: Callable[[], None] | None = None,
        track_ends: bool = True,
    ) -> None:
        self.key = key
        #: Whether grant ends are kept (``any_ending``, ``ending``): not for a policy
        #: that never asks, whose books would only grow with every grant.
        self.track_ends = track_ends
        self.on_reset = on_reset  # called when the books start afresh (a new run)
        self.waiting = WaitingIndex()
        self.running_of: dict[AppState, dict[JobState, None]] = {}
        self.started: list[JobState] = []
        self._touches: dict[AppState, int] = {}
        self._order: object = None
        self._cluster: Cluster | None = None
        # (grant end, sequence, job) of running jobs, -inf for a grant without an end;
        # entries are dropped lazily once the job stopped or got another end.
        self._ends: list[tuple[float, int, JobState]] = []
        self._seq = 0

    def sync(self, view: SchedulingView) -> bool:
        """Bring the books up to date; False when the view carries no books of its own
        (the policy then computes the full schedule)."""
        if view.changed is None or view.order is None or view.free is None:
            return False
        apps: Iterable[AppState] = view.changed
        if view.order is not self._order or view.cluster is not self._cluster:
            self._order, self._cluster = view.order, view.cluster  # another run: afresh
            self.waiting = WaitingIndex()
            self.running_of, self._touches, self._ends, self.started = {}, {}, [], []
            if self.on_reset is not None:
                self.on_reset()
            apps = view.apps
        waiting = self.waiting
        for job in self.started:
            waiting.discard(job)
            if job.gpus:
                self.running_of[job.app][job] = None
            elif job.finished_at is None and job.app.finish is None:
                waiting.add(job, self.key(job, view))  # not started after all
        self.started = []
        for app in apps:
            if app.finish is not None:
                self._drop(app)
            elif self._touches.get(app) != app.touches:
                self._read(app, view)
            else:
                running = self.running_of[app]
                for job in [j for j in running if not j.gpus]:
                    del running[job]
                    if job.finished_at is None:
                        waiting.add(job, self.key(job, view))
        return True

    def _drop(self, app: AppState) -> None:
        if self._touches.pop(app, None) is None:
            return
        for job in app.jobs:
            self.waiting.discard(job)
        del self.running_of[app]

    def _read(self, app: AppState, view: SchedulingView) -> None:
        """Read the app afresh (new, or touched)."""
        self._touches[app] = app.touches
        running = self.running_of[app] = {}
        for job in app.jobs:
            self.waiting.discard(job)
            if job.gpus:
                running[job] = None
                self.granted(job, job.until)
            elif job.finished_at is None:
                self.waiting.add(job, self.key(job, view))

    def running(self) -> Iterator[JobState]:
        for jobs in self.running_of.values():
            yield from jobs

    def granted(self, job: JobState, until: float | None) -> None:
        """``job`` runs (or will, once this round is applied) until ``until``."""
        if not self.track_ends:
            return
        self._seq += 1
        heapq.heappush(self._ends, (-math.inf if until is None else until, self._seq, job))

    def any_ending(self, view: SchedulingView) -> bool:
        """Whether some running job's grant ends in this round, or has no end."""
        ends = self._ends
        while ends:
            until, _, job = ends[0]
            if job.gpus and (-math.inf if job.until is None else job.until) == until:
                return until == -math.inf or until <= view.now + view.window
            heapq.heappop(ends)
        return False

    def ending(self, view: SchedulingView) -> list[JobState]:
        """Running jobs whose grants end in this round (``view.ending``), in the order of
        ``view.running()``: the apps' admission order, then submission order."""
        if not self.any_ending(view):  # also drops the dead ends, so the heap stays small
            return []
        if view.ending_grants is not None:  # the mechanism's own book: no scan, no sort
            return list(view.ending_grants)
        order = view.order
        assert order is not None
        ending = [j for j in self.running() if view.ending(j)]
        ending.sort(key=lambda j: (order[j.app], j.index))
        return ending
