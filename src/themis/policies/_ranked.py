"""Rank and pack: the mechanism shared by policies that order live jobs by one number and
run the best-ranked ones that fit (LAS ranks by attained service, SRTF by remaining time,
FIFO by nothing: admission, then submission order).

One round:

1. Running jobs the policy protects (LAS: their quantum has not ended; FIFO: all, it
   never preempts) keep their GPUs.
2. Every other live job is ranked by the policy's ``rank``, smallest first. Ties: a job
   that holds GPUs before one that waits (a tie is no reason to preempt), then the app that
   arrived first, then submission order.
3. Walking the ranking, a job is chosen when its gang fits the GPUs not yet promised to
   better-ranked jobs; one that does not fit is passed over for smaller ones behind it, so
   no GPU idles while a waiting gang would fit (work conservation; ``_quantum.fill``).
4. Chosen running jobs keep their exact GPUs; running jobs not chosen are preempted; the
   newly chosen are packed largest gang first on the best span of what is free, as the
   quantum baselines do (``_quantum.place``). A first-fit rule (FIFO, which never
   preempts) instead walks its queue placing each gang on the best span left when its
   turn comes, so a gang no one GPU type can hold is passed over without holding back
   the gangs behind it.

A waiting job's rank cannot change while it waits (it makes no progress and holds no
GPUs), so the policy keeps one ranking of every waiting job from round to round, per gang
size (``_books``), kept up to date from the view's books (which apps changed); only the
running jobs that compete (LAS: those whose quantum ended) are ranked in the round, and
the jobs it starts are carved from the view's free pool. A round costs its running
contenders and the jobs it looks at, not every live job of every app. The simulator and
the runtime ask the same rule (the runtime reads ``changes`` as a full schedule).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from themis.mechanism.pool import FreePool
from themis.model.cluster import Cluster
from themis.model.placement import Packer
from themis.model.state import JobState
from themis.policies._books import Books, Key
from themis.policies._quantum import place_changes
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)


def attained_at(job: JobState, now: float) -> float:
    """GPU-seconds ``job`` has held up to ``now``: what it held in earlier stretches plus
    the stretch it is running now."""
    if job.gpus:
        return job.attained + len(job.gpus) * (now - job.held_since)
    return job.attained


class RankedPolicy(Policy):
    """A policy that is one ranking of jobs; subclasses say what the rank is."""

    incremental = True

    #: Whether a running job keeps its GPUs without competing while its grant has not
    #: ended (LAS's quantum; a grant without an end is re-decided at once). Otherwise
    #: every running job competes in every round.
    protects_grants: ClassVar[bool] = False
    #: Whether running jobs compete at all (False: a running job keeps its GPUs until it
    #: ends, and a round only hands out the free GPUs).
    preempts: ClassVar[bool] = True
    #: Whether waiting jobs are placed in rank order as they come, each passed over when
    #: no GPUs left hold its gang, instead of chosen by count and placed largest gang
    #: first. Only for a rule that never preempts.
    first_fit: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.first_fit and cls.preempts:
            raise TypeError(
                f"{cls.__name__}: a first-fit rule places waiting jobs in queue order and "
                "never preempts (set preempts = False)"
            )

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        # Grant ends matter only to a policy whose running jobs compete when their
        # grants end (LAS's quantum).
        self._books = Books(self._waiting_key, track_ends=self.preempts and self.protects_grants)

    @abstractmethod
    def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
        """Smaller runs first. It must not change while the job waits (it is cached)."""

    def protected(self, job: JobState, view: SchedulingView) -> bool:
        """Whether a running job keeps its GPUs this round without competing for them."""
        return self.protects_grants and job.until is not None and not view.ending(job)

    def changes(self, view: SchedulingView) -> Changes:
        """The round as what changes, from books kept across rounds: the ranking of the
        waiting jobs is kept, only competing running jobs are ranked."""
        view = self.with_books(view)
        books = self._books
        books.sync(view)
        if self.first_fit:  # a first-fit rule never preempts: only the queue moves
            return self._first_fit(view, self.grant_until(view))
        now, cluster, order = view.now, view.cluster, view.order
        assert order is not None and view.free is not None
        if not self.preempts:
            contenders = []
        elif not self.protects_grants:
            contenders = list(books.running())
        elif books.any_ending(view):
            contenders = [j for j in books.running() if not self.protected(j, view)]
        else:
            contenders = []
        keys: list[Key] = [
            (self.rank(j, now, cluster), 0, order[j.app], j.index, j) for j in contenders
        ]
        capacity = len(view.free) + sum(j.spec.gang for j in contenders)
        chosen = books.waiting.fill(capacity, keys)
        return place_changes(view, books, chosen, contenders, self.grant_until(view))

    def _first_fit(self, view: SchedulingView, until: float | None) -> Changes:
        """The waiting jobs in rank order, each placed on the best span the GPUs left
        offer when its turn comes, or passed over when none does (on a cluster of several
        GPU types a gang may fit the count and no one type): carved from the view's pool
        where it packs as a ``Packer`` does (the mechanism settles it), else a Packer."""
        books, cluster = self._books, view.cluster
        pool: Packer | FreePool = (
            view.free
            if isinstance(view.free, FreePool) and not cluster.typed
            else Packer(cluster, view.free or ())
        )
        start: Schedule = {}
        for job, gpus in books.waiting.first_fit(pool.take, pool.__len__):
            start[job] = Assignment(gpus, until)
            books.started.append(job)
            books.granted(job, until)
        return Changes([], start)

    def _waiting_key(self, job: JobState, view: SchedulingView) -> Key:
        """A waiting job's place in the ranking: (rank, 1 as it waits, the app's
        admission rank, its submission index, the job)."""
        assert view.order is not None
        return (self.rank(job, view.now, view.cluster), 1, view.order[job.app], job.index, job)

    def grant_until(self, view: SchedulingView) -> float | None:
        """When a grant made in this round ends (the policy is called again then), or None."""
        return None
