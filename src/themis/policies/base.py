"""The one question every policy answers: given the cluster, the apps and the time,
which jobs hold which GPUs until when?

A policy reads a :class:`SchedulingView` (a snapshot it must not change) and returns a
:class:`Schedule`: every job that should run after this round, with its GPUs and the time
its grant ends (``None``: until the job finishes or the next round preempts it). Jobs not
listed stop. The mechanism (the simulator, or the Ray runtime) applies the schedule, checks
it (no GPU twice, exact gangs), and calls the policy again at the next arrival, job end or
grant end.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from themis.auction.budget import DEFAULT_NODE_LIMIT
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies._pool import FreePool


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


#: How Themis's arbiter ranks apps for the offer, the leftover and reservations: by the
#: rho of the work they have done (``verified_rho``: observed progress only, so no
#: declaration moves it; an app that has made nothing by its standing), with N the larger
#: of the app's N_avg and the apps sharing the cluster now (``verified``) or its N_avg
#: alone (``verified-avg-n``, the default until 2026-12-06), the latter with the apps that
#: cannot run on what they hold first (``verified-tiered``, 0.2's default), or by the rho
#: their declared remaining work gives (the paper's).
RANKINGS = ("verified", "verified-avg-n", "verified-tiered", "declared")
#: How a Themis bid values a bundle (``--valuation``): the paper's rho ratio, or the ratio of
#: the remaining times alone, which no uniform misstatement of work can move.
VALUATIONS = ("paper", "remaining")


@dataclass(frozen=True)
class PolicyOptions:
    """Knobs shared by policies; each uses the ones it needs.

    Defaults: see ``docs/`` and the README. ``lease`` is the grant length in seconds for
    policies that lease (Themis) and the re-allocation quantum for the others.
    """

    lease: float = 600.0
    fairness_knob: float = 0.8
    seed: int = 0
    max_menu: int = 32
    #: Themis: how long a reservation for a waiting gang may hold GPUs idle (None: one
    #: lease; 0: no reservations). See docs/gangs.md.
    reservation_bound: float | None = None
    #: Themis: align lease ends to multiples of this many seconds (0: not aligned).
    lease_align: float = 0.0
    #: Themis: rank apps by the rho of the work they have done ("verified") or by the
    #: rho their declared remaining work gives ("declared"). See docs/knowledge.md.
    ranking: str = "verified"
    #: Themis: the worst-off share (0..1) of the apps that want GPUs whose ending leases
    #: are renewed in place instead of auctioned (0: every ending lease is auctioned, as
    #: in the paper). The offered apps always keep theirs when it is > 0. docs/design.md.
    renewal_share: float = 0.0
    #: Themis: an app that holds no more than its fair share (1/N of the cluster, per
    #: owner when apps have owners) keeps its ending leases, renewed in place. None: on
    #: when a restart costs time (the run's restart cost, told through
    #: ``Policy.set_restart_cost``, is above 0), where handing GPUs round buys a restart
    #: each way; off where restarts are free. See docs/knowledge.md, "Renewal within the
    #: fair share".
    renew_within_share: bool | None = None
    #: Themis: the worst-off app, holding no GPU, starts its next gang before the auction
    #: when it fits the free GPUs on its best span (a reservation made and fulfilled in one
    #: round; ``Arbiter._starts_at_once``). Off (the default of 0.2.0 and before): such a
    #: gang bids in the auction, as in the paper. See docs/gangs.md, section 2.
    gang_at_once: bool = True
    #: Themis: how a bid values a bundle: "paper" (rho with nothing over rho with the
    #: bundle, elapsed time included) or "remaining" (the app's remaining time with
    #: nothing over its remaining time with the bundle). See docs/knowledge.md.
    valuation: str = "paper"
    #: gavel, gavel-mmf: when the allocation is solved again, as Gavel's ``simulator`` does
    #: (with the counters' reset, at most every 1920 s) or its ``cluster`` scheduler (at
    #: every arrival and completion). See docs/policies/gavel.md.
    gavel_resolve: str = "simulator"
    #: Tiresias: service thresholds (GPU-seconds) between its queues (None: the authors'
    #: default, ``tiresias.THRESHOLDS``) and its PROMOTEKNOB (None: the default, off).
    tiresias_thresholds: tuple[float, ...] | None = None
    tiresias_promote_knob: float | None = None
    #: Gandiva: the round-robin time slice in seconds (Gandiva switches about every 60 s;
    #: not the lease).
    gandiva_slice: float = 60.0
    #: Themis: search nodes one auction may take, deterministic (None: no limit), and
    #: wall-clock seconds (None: no deadline; the runtime sets one). docs/auction.md.
    auction_node_limit: int | None = DEFAULT_NODE_LIMIT
    auction_deadline: float | None = None


class Policy(ABC):
    """A scheduling policy: a subclass sets ``name`` (what ``--policy`` and
    :func:`make_policy` call it) and a one-line ``description``, and answers
    :meth:`schedule`. The mechanism calls it at every arrival, job end and grant end; a
    policy keeps whatever state it needs between rounds, but reads the world only through
    the view (never a job's true work: docs/knowledge.md)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    def __init__(self, options: PolicyOptions) -> None:
        self.options = options

    #: Whether ``changes`` answers (the simulator then asks it instead of ``schedule``:
    #: a round then costs what changes, not every running job).
    incremental: ClassVar[bool] = False

    @abstractmethod
    def schedule(self, view: SchedulingView) -> Schedule:
        """The full set of jobs that run after this round."""

    def changes(self, view: SchedulingView) -> Changes:
        """This round as what changes (see ``Changes``): the same round as ``schedule``,
        for policies that set ``incremental``. The default derives it from ``schedule``."""
        schedule = self.schedule(view)
        running = view.running()
        return Changes(
            [j for j in running if j not in schedule],
            {
                j: a
                for j, a in schedule.items()
                if not (j.gpus and a.gpus == j.gpus and a.until == j.until)
            },
        )

    def set_restart_cost(self, restart_cost: float) -> None:
        """The run's restart cost (seconds of no progress per start), told before the run:
        a policy refuses one under which it could not make progress, before a run that
        would never end (Gandiva), or adapts to it (Themis); the default ignores it. A
        platform knows this cost (its checkpoint and reload time), so a policy may read it."""
        return None

    def report(self) -> dict[str, float]:
        """Figures of the policy's own mechanism for the run's summary (e.g. the idle
        GPU-time its reservations cost); empty for policies with nothing to add."""
        return {}

    def held_idle(self) -> list[tuple[float, float, tuple[int, ...]]]:
        """(from, to, GPUs) wherever the policy kept free GPUs idle on purpose (Themis's
        reservations), so that checks of work conservation can tell them from waste."""
        return []

    @staticmethod
    def keep_running(view: SchedulingView) -> Schedule:
        """The current schedule unchanged: a starting point for non-preemptive rounds."""
        return {j: Assignment(j.gpus, j.until) for j in view.running()}
