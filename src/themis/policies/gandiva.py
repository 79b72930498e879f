"""Gandiva (Xiao et al., OSDI 2018), as the Themis paper used it as a baseline: greedy,
locality-aware packing, round-robin time slicing when the cluster is oversubscribed, and
migration of badly placed gangs to better spots. Job-level: apps and fairness play no part.

- Packing (Gandiva's reactive mode, §4.2): each gang starts on the best span the free GPUs
  offer (one machine > one rack > anywhere), best fit, largest gangs placed first.
- Time slicing (§4.1 suspend/resume): all waiting jobs form one round-robin queue, ordered by
  when they began waiting (arrival, or the end of their last turn). A turn lasts until the
  next multiple of the time slice (``PolicyOptions.gandiva_slice``, 60 s: Gandiva suspends
  and resumes about every minute, and so does the Gandiva model of the Tiresias authors'
  simulator; not the lease); at a boundary the jobs at the head of the queue take the GPUs
  and the jobs whose turn ended join the back of the queue, unless GPUs are left for them
  (an undersubscribed cluster rotates nothing). Progress is kept across turns.
- Migration (introspective mode, §4.2): at a boundary, a continuing multi-GPU job that spans
  more than its gang needs (machines or racks) moves to the best spot that the free GPUs
  plus its own now offer, if that spot has a strictly better span. Spans only improve, so
  a job never moves back and forth.

The queue is kept across rounds as keys of the waiting jobs (``_books``, per gang size),
so that a round walks only the jobs it can start, in the simulator and the runtime alike.

Not modelled: packing several jobs on one GPU by memory, grow-shrink (our gangs are rigid)
and interference profiling; see ``docs/policies/gandiva_optimus_slaq.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.placement import pack_gang
from themis.model.state import AppState, JobState
from themis.policies._books import Books, Key
from themis.policies._quantum import (
    check_quantum,
    place_changes,
    quantum_end,
)
from themis.policies.base import Changes, Policy, PolicyOptions, SchedulingView
from themis.policies.registry import register


@register
class GandivaPolicy(Policy):
    name = "gandiva"
    description = "locality-aware packing, round-robin time slices, migration (Gandiva, OSDI 2018)"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        #: The time slice (``PolicyOptions.gandiva_slice``, about a minute as Gandiva's),
        #: not the lease: a turn lasts until the next multiple of it.
        self.slice = check_quantum(options.gandiva_slice)
        # Each queued job's place in the round-robin queue (a sequence number: when it
        # began waiting), the waiting jobs not queued yet, and the apps seen (see
        # ``_enqueue_missing``).
        self._books = Books(self._waiting_key, self._start_afresh)
        self._seq_of: dict[JobState, int] = {}
        self._next = 0
        self._missing: set[JobState] = set()
        self._seen: set[AppState] = set()

    def set_restart_cost(self, restart_cost: float) -> None:
        # Every turn of a time-sliced job is a resume: a resume that takes the whole slice
        # leaves the job no time to run, and with more jobs than GPUs the run never drains
        # (measured: at 120 s with 60 s slices the bundled trace's clock passed a year).
        if restart_cost >= self.slice:
            raise ThemisError(
                f"gandiva: a restart cost of {restart_cost:g} s is not shorter than its "
                f"{self.slice:g} s time slice, so a resumed job would never run; lower "
                "--restart-cost or raise --gandiva-slice",
                field="--restart-cost",
            )

    def changes(self, view: SchedulingView) -> Changes:
        """One round, from the queue kept across rounds: the waiting jobs in queue order,
        then the jobs whose turn ends now, take the GPUs free and theirs; a continuing
        gang spread wider than it must be moves (``migrate``)."""
        view = self.with_books(view)
        books = self._books
        books.sync(view)
        if self._missing:
            self._enqueue_missing(view)
        assert view.free is not None
        ending = books.ending(view)
        base = self._next  # jobs whose turn ends now come after every waiting job
        keys: list[Key] = [(base + k, job) for k, job in enumerate(ending)]
        capacity = len(view.free) + sum(j.spec.gang for j in ending)
        chosen = books.waiting.fill(capacity, keys)
        until = quantum_end(view.now, view.window, self.slice)
        relocate = partial(migrate, view.cluster) if ending else None
        changes = place_changes(view, books, chosen, ending, until, relocate)
        for job in chosen:
            if self._seq_of.pop(job, None) is not None and job not in changes.start:
                books.waiting.discard(job)  # chosen, not placed (typed): out of the queue
                self._missing.add(job)
        stopped = set(changes.stop)
        for job in ending:
            if job in stopped:  # its turn ended: to the back of the queue
                self._seq_of[job] = self._next
                self._next += 1
        return changes

    def _start_afresh(self) -> None:
        self._seq_of, self._missing, self._seen = {}, set(), set()

    def _waiting_key(self, job: JobState, view: SchedulingView) -> Key:
        """A waiting job's place in the queue; one without a place yet is put last for
        now and queued by ``_enqueue_missing`` before the round."""
        seq = self._seq_of.get(job)
        if seq is None:
            self._missing.add(job)
            assert view.order is not None
            return (math.inf, view.order[job.app], job.index, job)
        return (seq, job)

    def _enqueue_missing(self, view: SchedulingView) -> None:
        """Queue the waiting jobs without a place: first the jobs of apps seen for the
        first time (in admission order, then submission order), then the others (in
        admission order, then each app's idle order)."""
        order = view.order
        assert order is not None
        waiting = self._books.waiting
        missing = [
            j
            for j in self._missing
            if not j.gpus and j.finished_at is None and j.app.finish is None
        ]
        self._missing = set()
        new = sorted(
            (j for j in missing if j.app not in self._seen), key=partial(_admission_key, order)
        )
        rest = {j for j in missing if j.app in self._seen}
        queued = list(new)
        for app in sorted({j.app for j in rest}, key=order.__getitem__):
            queued.extend(j for j in app.idle_jobs() if j in rest)
        for job in queued:
            self._seq_of[job] = self._next
            self._next += 1
            waiting.add(job, (self._seq_of[job], job))
        self._seen.update(j.app for j in new)


def migrate(
    cluster: Cluster, available: set[int], continuing: list[JobState]
) -> dict[JobState, tuple[int, ...]]:
    """Move each continuing gang that spans more than it must (largest first) to the best
    spot among ``available`` plus its own GPUs, when that spot has a strictly better span.
    ``available`` is updated in place; returns the jobs moved and their new GPUs."""
    moved: dict[JobState, tuple[int, ...]] = {}
    spread = [
        j for j in continuing if j.gang > 1 and cluster.span(j.gpus) > cluster.best_span(j.gang)
    ]
    for job in sorted(spread, key=lambda j: -j.gang):
        better = pack_gang(cluster, available | set(job.gpus), job.gang)
        if better is not None and cluster.span(better) < cluster.span(job.gpus):
            moved[job] = better
            available.update(job.gpus)
            available.difference_update(better)
    return moved


# A module function bound with ``partial``, not a lambda: mypyc (2.4) stops with an internal
# error on a closure inside a method of a decorated (``@register``) class.
def _admission_key(order: Mapping[AppState, int], job: JobState) -> tuple[int, int]:
    return (order[job.app], job.index)
