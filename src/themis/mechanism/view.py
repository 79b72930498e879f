"""What a policy reads and what it answers, as the mechanism (the simulator or the Ray
runtime) keeps and applies them: the :class:`SchedulingView` of one round, and the
:class:`Schedule` (or its :class:`Changes`) a policy returns.

They live beside the mechanism, not with the policies, because the arbiter, the policies,
the simulator and the runtime all speak them, and none of them may import another's
private parts (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from themis.mechanism.pool import FreePool
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState

#: Grant ends this close (seconds) are batched into one round by default (docs/design.md §5): a
#: round then holds several apps' GPUs at once instead of one lease at a time. The
#: simulator's default and the runtime's alike.
DEFAULT_BATCH_WINDOW = 30.0


class Assignment(NamedTuple):
    """One job's grant after a round: its GPUs (the whole gang) and when the grant ends
    (``None``: until the job finishes or a later round preempts it).

    A named tuple, not a frozen dataclass: every grant of every round makes one, and a
    frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``."""

    gpus: tuple[int, ...]
    until: float | None = None


Schedule = dict[JobState, Assignment]


@dataclass
class Changes:
    """A round's schedule as what changes (``Policy.changes``): ``start`` the jobs that
    get GPUs, in the order the full schedule would list them after the running jobs, and
    ``stop`` running jobs that lose theirs. It stands for the full schedule "every running
    job on its GPUs and grant end, except those in ``stop``, plus ``start``": a running
    job in ``start`` on its own GPUs continues, on other GPUs it moves."""

    stop: list[JobState] = field(default_factory=list)
    start: Schedule = field(default_factory=dict)


@dataclass
class SchedulingView:
    """What a policy sees in one round.

    ``apps`` are the active apps (arrived, unfinished) in arrival order. A running job's
    grant counts as ending in this round when it ends within ``window`` seconds from now:
    that is how lease ends close together are batched into one round.
    """

    now: float
    cluster: Cluster
    apps: Sequence[AppState]
    n_avg: Callable[[AppState], float]
    window: float = 0.0
    #: The mechanism's own books, when it keeps them (the simulator does; a snapshot
    #: policies must not change): the free GPUs (ids, the cluster's GPUs being listed in
    #: id order), the apps whose jobs started, stopped, finished or otherwise changed
    #: since the previous round (and new apps), and each active app's admission rank
    #: (the order of ``apps``). None: not kept, derive them from ``apps``.
    free: AbstractSet[int] | None = None
    changed: AbstractSet[AppState] | None = None
    order: Mapping[AppState, int] | None = None
    #: The running jobs whose grants end in this round (``ending``), apps in the order of
    #: ``apps`` and each app's jobs in submission order, when the mechanism keeps a book
    #: of grant ends (the simulator does); None: derive them from ``apps``.
    ending_grants: Sequence[JobState] | None = None
    #: How many equal slices the cluster is cut into for an app now: the active owners
    #: times its owner's active apps (``fairness/shares.py``). None: every active app is
    #: its own owner, so the number of active apps.
    share_count: Callable[[AppState], int] | None = None
    _busy: set[int] | None = field(default=None, init=False, repr=False)

    def slices(self, app: AppState) -> int:
        """The number of equal slices ``app``'s fair share is one of, now."""
        return len(self.apps) if self.share_count is None else self.share_count(app)

    def free_gpus(self) -> list[int]:
        """GPUs no running job holds (in the cluster's order)."""
        if self.free is not None:
            return sorted(self.free)
        if self._busy is None:  # computed on first use: not every policy asks
            self._busy = {g for app in self.apps for g in app.held()}
        busy = self._busy
        return [g.id for g in self.cluster.gpus if g.id not in busy]

    def free_set(self) -> set[int]:
        """The free GPUs as a set, for callers that need no order (no sort of the
        mechanism's books). Views that narrow ``free_gpus`` narrow this too."""
        free = self.free
        if isinstance(free, FreePool):
            return free.free.copy()  # a set's copy: no rehash of every free GPU
        if free is not None:
            return set(free)
        return set(self.free_gpus())

    def free_count(self) -> int:
        """How many GPUs no running job holds."""
        if self.free is not None:
            return len(self.free)
        return self.cluster.size - sum(len(app.held()) for app in self.apps)

    def ending(self, job: JobState) -> bool:
        """Whether ``job``'s grant ends in this round."""
        return job.until is not None and job.until <= self.now + self.window

    def ending_jobs(self) -> list[JobState]:
        """The running jobs whose grants end in this round, apps in order, then each app's
        jobs in submission order: from the mechanism's book when it keeps one, so a
        leasing round costs the grants that end, not every running job."""
        if self.ending_grants is not None:
            return list(self.ending_grants)
        return [j for app in self.apps for j in app.running_jobs() if self.ending(j)]

    def split_ending(self) -> tuple[Schedule, set[int], dict[str, list[JobState]]]:
        """What a leasing round starts from: the running jobs whose grants do not end now
        (they keep their GPUs and grant ends), the GPUs up for grabs (free, or held by a
        grant that ends now) and, per app id, its jobs whose grants end now."""
        keep: Schedule = {}
        pool = set(self.free_gpus())
        ending: dict[str, list[JobState]] = {}
        for app in self.apps:
            mine = ending[app.app_id] = []
            for job in app.running_jobs():
                if self.ending(job):
                    pool.update(job.gpus)
                    mine.append(job)
                else:
                    keep[job] = Assignment(job.gpus, job.until)
        return keep, pool, ending

    def running(self) -> list[JobState]:
        return [j for app in self.apps for j in app.jobs if j.gpus]
