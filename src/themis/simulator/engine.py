"""The simulation loop: a heap of timed events, a policy round after each batch of events
at one instant, and exact progress accounting in virtual seconds.

No wall clock is read anywhere: a run is a function of the workload, the cluster, the
policy and its seed.

The simulator keeps the truth and policies see estimates (DESIGN §9): apps are admitted
with their *declared* specs (``themis.model.knowledge``), while each job's true work, the
loss curves of online searches (``simulator/search.py``) and each app's true ``T_cluster``
stay here. Job ends, progress and the report use the truth; an app's ``t_cluster`` is the
estimate while it runs and the truth once it has finished (policies never see it again).
Each (re)start of a gang costs ``Conditions.restart_cost`` seconds of no progress.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from themis.errors import ThemisError
from themis.fairness.ftf import t_cluster
from themis.fairness.ideal import PAPER
from themis.fairness.shares import FairShares
from themis.mechanism.checks import check_changes, check_moves
from themis.mechanism.diff import stopping
from themis.mechanism.pool import FreePool
from themis.mechanism.view import DEFAULT_BATCH_WINDOW
from themis.model.cluster import Cluster
from themis.model.frozen import by_fields
from themis.model.gpu_types import with_type_times
from themis.model.knowledge import check_estimate_error, declared
from themis.model.lies import by_submitted_app, check_lie, claimed_profile
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, Workload
from themis.policies.base import Changes, Policy, Schedule, SchedulingView
from themis.simulator.events import AppArrival, Event, GrantEnd, JobEnd
from themis.simulator.search import SearchBook
from themis.workload.fits import check_fits

#: Events closer than this (seconds) are handled as one instant.
EPSILON = 1e-6
#: Seconds past a grant's end (and the batching window) within which a job's end event is
#: queued at its start (``Simulator._grants``); a later end waits for the grant's round.
_LATER = 1.0


@dataclass(frozen=True)
class Conditions:
    """What the world does to every policy alike (DESIGN §9).

    ``estimate_error`` E: each job's declared work is its true work times a factor drawn
    uniformly from [1 - E, 1 + E] with ``estimate_seed``, by default the run's seed
    (``PolicyOptions.seed``). A seed of its own lets an experiment draw several sets of
    errors on one workload (a generated trace is drawn with the run's seed too): the
    truthfulness experiment's contexts (``experiments/truthfulness.py``).
    ``restart_cost``: seconds a gang holds its GPUs without progress at each start, resume
    or migration (checkpoint load, process start). Both default to 0 here, so that the
    library reproduces earlier results; the CLI states its own defaults.
    """

    estimate_error: float = 0.0
    restart_cost: float = 0.0
    #: (app, factor): apps that misreport their work on purpose, declaring ``factor``
    #: times it (the truthfulness experiment, ``experiments/truthfulness.py``).
    misreport: tuple[tuple[str, float], ...] = ()
    #: (app, claim): apps that lie about their placement sensitivity ("flat" or
    #: "sensitive", ``model/lies.py``); policies see the claimed profile, progress the true.
    claims: tuple[tuple[str, str], ...] = ()
    #: The seed of the estimate errors; None: the run's seed.
    estimate_seed: int | None = None
    #: (app, factor): apps whose own scheduler orders their trials as if each had
    #: ``factor`` times its declared work, declaring the truth (``order`` in
    #: ``model/lies.py``).
    orders: tuple[tuple[str, float], ...] = ()

    def check(self) -> None:
        check_estimate_error(self.estimate_error)
        for _, claim in self.claims:
            check_lie("placement", claim)
        for app_id, factor in (*self.misreport, *self.orders):
            if not (math.isfinite(factor) and factor > 0):
                raise ThemisError(
                    f"{app_id}: the factor must be a number > 0, got {factor}",
                    field="--misreport",
                )
        if not (math.isfinite(self.restart_cost) and self.restart_cost >= 0):
            raise ThemisError(
                f"must be a number of seconds >= 0, got {self.restart_cost}",
                field="--restart-cost",
            )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)


class _NAvg:
    """Each app's time-averaged share count (``FairShares.n_eff``: active apps, or owners
    times the owner's apps), now: what a view's ``n_avg`` reads (a small object rather
    than the simulator, which holds the truth)."""

    __slots__ = ("shares", "now")

    def __init__(self, shares: FairShares) -> None:
        self.shares = shares
        self.now = 0.0

    def __call__(self, app: AppState) -> float:
        return self.shares.n_eff(app.app_id, self.now)

    def share_count(self, app: AppState) -> int:
        return self.shares.share_count(app.app_id)


class Interval(NamedTuple):
    """One job holding one GPU set without interruption.

    A named tuple, not a frozen dataclass: a run makes one per hold (1.1 million for
    Gandiva's time slices on the bundled trace), and a frozen dataclass's ``__init__``
    sets each field through ``object.__setattr__``, in Python even where the engine is
    compiled."""

    start: float
    end: float
    app_id: str
    job_id: str
    gpus: tuple[int, ...]
    best_span: bool


@dataclass
class SimulationResult:
    """What a run produced: every app's final state (arrival, finish, progress), every
    uninterrupted hold of a GPU set (``intervals``), the number of rounds and each app's
    ``N_avg`` over its life: the inputs of every reported metric (docs/metrics.md)."""

    policy: str
    workload: Workload
    cluster: Cluster
    apps: list[AppState]
    intervals: list[Interval]
    rounds: int
    n_avg: dict[str, float] = field(default_factory=dict)
    #: (from, to, GPUs) the policy kept idle on purpose (``Policy.held_idle``).
    held_idle: list[tuple[float, float, tuple[int, ...]]] = field(default_factory=list)
    #: (app, job) -> the iterations the job really ran: its true work, or for a trial of a
    #: search stopped at a rung, the rung (the job-level slowdown's isolated time,
    #: ``reports/metrics.py``). Absent: the workload's work.
    work_done: dict[tuple[str, str], float] = field(default_factory=dict)
    #: The policy's own figures (``Policy.report``: e.g. Themis's auctions that hit their
    #: limits).
    policy_report: dict[str, float] = field(default_factory=dict)
    #: The definition of rho's ideal time the policy ran with (``PolicyOptions.ideal_time``):
    #: the report's headline rho uses it, and shows the other beside it.
    ideal_time: str = PAPER


class Simulator:
    """One run of a policy on a workload and a cluster, in virtual seconds.

    Events (app arrivals, job ends, grant ends) are handled in time order, each followed by
    a round when it asks for one; a round also takes the grants that end within
    ``batch_window`` seconds, as the runtime batches lease ends. In a round the policy gets
    a :class:`~themis.policies.SchedulingView` and returns the schedule, which the
    simulator checks (no GPU twice, exact gangs) and applies. ``conditions`` say what the
    world does to every policy alike (estimate errors, restart costs, lying apps);
    ``on_app_finished(done, total)`` is called as apps finish (progress bars).
    """

    def __init__(
        self,
        workload: Workload,
        cluster: Cluster,
        policy: Policy,
        batch_window: float = DEFAULT_BATCH_WINDOW,
        on_app_finished: Callable[[int, int], None] | None = None,
        conditions: Conditions = Conditions(),
    ) -> None:
        check_fits(workload, cluster)
        conditions.check()
        policy.set_restart_cost(conditions.restart_cost)
        submitted = [a.app_id for a in workload.apps]
        # A lie told by an app that split itself holds for each of its parts.
        self._lies = by_submitted_app(conditions.misreport, submitted)
        self._claims = by_submitted_app(conditions.claims, submitted)
        self._orders = by_submitted_app(conditions.orders, submitted)
        self.workload = with_type_times(workload, cluster)
        self.cluster = cluster
        self.policy = policy
        self.batch_window = batch_window
        self.on_app_finished = on_app_finished
        self.conditions = conditions
        self.restart_cost = conditions.restart_cost
        self._estimate_seed = (
            policy.options.seed if conditions.estimate_seed is None else conditions.estimate_seed
        )
        #: The true profile of apps that claim another placement sensitivity.
        self._true_profiles: dict[AppState, ModelProfile] = {}
        self.active: list[AppState] = []
        self.all_apps: list[AppState] = []
        # Who shares the cluster (owners, and each owner's apps). An app enters the books
        # at its arrival, or up to EPSILON later when its arrival was batched with a later
        # event: N_avg is averaged from there.
        self.shares = FairShares()
        self._n_avg = _NAvg(self.shares)
        # The truth, never handed to a policy: each job's true work, where its current
        # run stops (its end, or its next rung), the searches, the apps' true T_cluster.
        self._work: dict[JobState, float] = {}
        self._stop_at: dict[JobState, float] = {}
        self._searches: dict[AppState, SearchBook] = {}
        self._true_specs: dict[AppState, AppSpec] = {}
        self._t_cluster: dict[AppState, float] = {}
        self.n_avg_lifetime: dict[str, float] = {}
        self.tokens: dict[int, int] = {}
        self.intervals: list[Interval] = []
        self.rounds = 0
        self._heap: list[tuple[float, int, Event]] = []
        # The end events of running jobs whose grants end first, kept out of the heap: most
        # such jobs are stopped when the grant ends (a time slice, a lease handed on), and
        # an end queued for each start made the heap hold one dead event per hold of a GPU
        # set (1.1 million under Gandiva). An end is queued once a renewal or the policy's
        # leaving the job be lets it run to it. A stopped job's end leaves only its time in
        # ``_ghosts``: a dead event handles nothing, but its time still counts in the
        # batching of one instant (``_run``), so the times are kept for that, exactly.
        self._later_ends: dict[JobState, tuple[float, int, Event]] = {}
        self._ghosts: list[float] = []
        self._seq = itertools.count()
        self._wakes: set[float] = set()
        self._grant_ends: list[tuple[float, int, JobState]] = []  # see any_grant_ending
        self._grant_seq = itertools.count()
        self._holder: dict[int, JobState] = {}  # GPU -> the running job on it (``_check``)
        # The books a view hands policies (``SchedulingView.free``, ``changed``, ``order``):
        # the free GPUs (kept only when the cluster lists its GPUs in id order, as
        # ``free_gpus`` returns them), the apps changed since the last round, and each
        # app's admission rank (the order of ``active``).
        in_order = all(g.id == k for k, g in enumerate(cluster.gpus))
        self._free = FreePool(cluster, range(cluster.size)) if in_order else None
        self._changed_apps: set[AppState] = set()
        self._rank: dict[AppState, int] = {}
        self._token = itertools.count(1)
        self._finished = 0

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        with _full_collections_deferred():
            return self._run()

    def _run(self) -> SimulationResult:
        for spec in sorted(self.workload.apps, key=lambda a: a.arrival):
            self._push(spec.arrival, AppArrival(spec))
        heap, ghosts = self._heap, self._ghosts
        while heap:
            if ghosts and ghosts[0] < heap[0][0]:
                first = now = heapq.heappop(ghosts)
                batch = []
            else:
                first, _, event = heapq.heappop(heap)
                batch = [event]
                now = first
            while heap and heap[0][0] <= first + EPSILON:
                now, _, event = heapq.heappop(heap)
                batch.append(event)
            while ghosts and ghosts[0] <= first + EPSILON:
                now = max(now, heapq.heappop(ghosts))
            # One instant: handled at its latest time, so nothing happens before it is due.
            needs_round = False
            for event in batch:
                needs_round = event.handle(self, now) or needs_round
            if needs_round and self.active:
                self._round(now)
        if self._finished != len(self.workload.apps):
            raise AssertionError("the event queue ran dry with apps unfinished")
        return SimulationResult(
            self.policy.name,
            self.workload,
            self.cluster,
            self.all_apps,
            self.intervals,
            self.rounds,
            dict(self.n_avg_lifetime),
            held_idle=self.policy.held_idle(),
            work_done=self._work_done(),
            policy_report=self.policy.report(),
            ideal_time=self.policy.options.ideal_time,
        )

    def _work_done(self) -> dict[tuple[str, str], float]:
        done: dict[tuple[str, str], float] = {}
        for app in self.all_apps:
            search = self._searches.get(app)
            for job in app.jobs:
                work = self._work[job]
                if search is not None:
                    work = search.realized(job.job_id, work)
                done[app.app_id, job.job_id] = work
        return done

    def _push(self, t: float, event: Event) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), event))

    # -- what events do ---------------------------------------------------------------------

    def admit(self, spec: AppSpec, now: float) -> None:
        profile = true_profile = self.workload.profiles[spec.model]
        claim = self._claims.get(spec.app_id)
        if claim is not None:
            profile = claimed_profile(true_profile, claim, list(self.workload.profiles.values()))
        app = AppState(
            declared(
                spec,
                self.conditions.estimate_error,
                self._estimate_seed,
                self._lies.get(spec.app_id, 1.0),
            ),
            profile,
            0.0,
            self._orders.get(spec.app_id, 1.0),
        )
        app.t_cluster = t_cluster(profile, app.remaining_by_gang(now), self.cluster.shape)
        self._true_specs[app] = spec
        if claim is not None:
            self._true_profiles[app] = true_profile
        if (app.spec is not spec or claim is not None) and spec.search is None:
            self._t_cluster[app] = _t_cluster_of(spec, true_profile, now, self.cluster)
        if spec.search is not None:
            self._searches[app] = SearchBook(spec, self.workload.curves)
        for job, truth in zip(app.jobs, spec.jobs, strict=True):
            self._work[job] = truth.work
            job.updated_at = job.held_since = now
            if truth.work <= 0:
                job.finish(spec.arrival)  # nothing to run (a trial that died at once)
        self.shares.arrive(now, app.app_id, spec.tenant)
        self._rank[app] = len(self.all_apps)
        app.changes = self._changed_apps
        self._changed_apps.add(app)
        self.active.append(app)
        self.all_apps.append(app)
        if not app.live_jobs():
            self._app_done(app, now, finish=spec.arrival)

    def job_reached(self, job: JobState, now: float) -> None:
        """``job``'s run reached where it was to stop: its end, or a rung of its search."""
        search = self._searches.get(job.app)
        rung = self._stop_at.pop(job, None)
        if search is None or rung is None or rung >= self._work[job]:
            self.finish_job(job, now)
            return
        self._stop(job, now)
        job.done = rung  # exactly at the rung: it resumes from there
        job.finished_at = now  # paused: no demand, the scheduler sees it as ended
        job.app.touch()
        _, resumed = search.reached(job.job_id, rung)
        for other in job.app.jobs:
            if other.job_id in resumed:
                other.finished_at = None
                other.updated_at = other.held_since = now
        job.app.touch()
        if all(j.finished_at is not None for j in job.app.jobs):
            self._app_done(job.app, now)

    def finish_job(self, job: JobState, now: float) -> None:
        self._stop(job, now)
        job.finish(now)
        if all(j.finished_at is not None for j in job.app.jobs):
            self._app_done(job.app, now)

    def _app_done(self, app: AppState, now: float, finish: float | None = None) -> None:
        """``finish`` defaults to ``now``; an app with no work finishes at its arrival."""
        search = self._searches.get(app)
        if search is not None:  # T_cluster of the work the trials did in the end
            spec = self._true_specs[app]
            did = tuple(replace(j, work=search.realized(j.job_id, j.work)) for j in spec.jobs)
            profile = self._true_profiles.get(app, app.profile)
            app.t_cluster = _t_cluster_of(replace(spec, jobs=did), profile, now, self.cluster)
        elif app in self._t_cluster:
            app.t_cluster = self._t_cluster[app]  # the truth, for the report
        app.finish = now if finish is None else finish
        self._changed_apps.add(app)
        self.n_avg_lifetime[app.app_id] = self.shares.n_eff(app.app_id, now)
        self.shares.leave(now, app.app_id)
        self.active.remove(app)
        self._finished += 1
        if self.on_app_finished is not None:
            self.on_app_finished(self._finished, len(self.workload.apps))

    def any_grant_ending(self, now: float) -> bool:
        """Whether a running job's grant ends within the batching window: the earliest
        current grant end, from a heap of (end, job) pushed whenever a job's end is set
        and dropped lazily once the job stopped or got another end, instead of a scan of
        every running job at each event."""
        self._wakes.discard(now)
        horizon = now + self.batch_window + EPSILON
        ends = self._grant_ends
        while ends:
            until, _, job = ends[0]
            if job.gpus and job.until == until:
                return until <= horizon
            heapq.heappop(ends)
        return False

    def _ending_grants(self, horizon: float) -> list[JobState]:
        """The running jobs whose grants end by ``horizon`` (``SchedulingView.ending``), in
        admission order, then submission order: read from the heap of grant ends, walking
        only the entries due by then (a heap's children are never due before their
        parent), so a round costs the grants that end, not every running job. Every
        running job with a grant end has a live entry there (one is pushed whenever its
        end changes; ``any_grant_ending`` drops only dead ones)."""
        ends = self._grant_ends
        found: dict[int, JobState] = {}
        stack = [0] if ends else []
        while stack:
            k = stack.pop()
            until, _, job = ends[k]
            if until > horizon:
                continue
            if job.gpus and job.until == until:
                found[id(job)] = job
            child = 2 * k + 1
            if child < len(ends):
                stack.append(child)
                if child + 1 < len(ends):
                    stack.append(child + 1)
        rank = self._rank
        return sorted(found.values(), key=lambda j: (rank[j.app], j.index))

    # -- rounds -----------------------------------------------------------------------------

    def _round(self, now: float) -> None:
        self._n_avg.now = now
        self.rounds += 1
        changed = frozenset(self._changed_apps)
        self._changed_apps.clear()  # from here on: changes for the next round
        horizon = now + self.batch_window
        ending = self._ending_grants(horizon)  # policies read it (``ending_jobs`` copies)
        view = SchedulingView(
            now,
            self.cluster,
            list(self.active),
            self._n_avg,
            self.batch_window,
            self._free,
            changed,
            self._rank,
            ending,
            share_count=self._n_avg.share_count,
        )
        if self.policy.incremental:
            changes = self.policy.changes(view)
            try:
                self._check_changes(changes)
            except AssertionError:
                if self._free is not None:
                    self._free.restore()  # whatever the policy carved from the pool
                raise
            self._apply_changes(changes, now)  # settles the pool (``FreePool.settle``)
        else:
            schedule = self.policy.schedule(view)
            self._check(schedule)
            self._apply(schedule, now)
        later = self._later_ends
        if later:
            for job in ending:  # a grant the policy let end with the job running on
                if job in later and (job.until is None or job.until <= horizon + EPSILON):
                    heapq.heappush(self._heap, later.pop(job))
        # No job runs (each holds its GPUs) and no event is due, not even a dead one.
        if not self._holder and not self._heap and not self._ghosts:
            raise AssertionError(
                f"policy '{self.policy.name}' left every GPU idle at t={now} with work waiting"
            )

    def _check(self, schedule: Schedule) -> None:
        """The schedule against the rules (``mechanism/checks.py``), in time proportional
        to the grants that change: the simulator knows which running job holds each GPU."""
        check_moves(schedule, self.active, self.cluster.size, self._holder)

    def _check_changes(self, changes: Changes) -> None:
        """``_check`` of the schedule ``changes`` stands for, in time proportional to the
        changes."""
        check_changes(changes, self.cluster.size, self._holder)

    def _apply_changes(self, changes: Changes, now: float) -> None:
        """``_apply`` of the schedule ``changes`` stands for, in the same order: stops in
        the order of the active apps and their jobs, then starts in schedule order."""
        start = changes.start
        moving = [j for j in changes.stop if j not in start]
        moving += [j for j, a in start.items() if j.gpus and a.gpus != j.gpus]
        if len(moving) > 1:
            rank = self._rank
            moving.sort(key=lambda j: (rank[j.app], j.index))
        # The pool still holds the policy's drafts: it is settled on the outcome at once
        # instead of undoing the drafts and redoing them GPU by GPU.
        holder = self._holder
        freed = [g for job in moving for g in job.gpus if holder.get(g) is job]
        for job in moving:
            self._stop(job, now, release=False)
        taken = [g for job, grant in start.items() if not job.gpus for g in grant.gpus]
        self._grants(start, now, take=False)
        if self._free is not None:
            self._free.settle(freed, taken)

    def _apply(self, schedule: Schedule, now: float) -> None:
        for job in stopping(schedule, self.active):
            self._stop(job, now)
        self._grants(schedule, now)

    def _grants(self, schedule: Schedule, now: float, take: bool = True) -> None:
        """Start or extend the grants of ``schedule``; the GPUs of the jobs that start
        leave the free pool unless ``take`` is False (the caller settles the pool)."""
        free = self._free if take else None
        later = self._later_ends
        for job, grant in schedule.items():
            end: tuple[float, int, Event] | None
            if not job.gpus:
                end = self._start(job, grant.gpus, now)
                for g in job.gpus:
                    self._holder[g] = job
                if free is not None:
                    for g in job.gpus:
                        free.remove(g)
            else:
                end = later.pop(job, None) if later else None
            until = grant.until
            if until is not None and until != job.until:
                heapq.heappush(self._grant_ends, (until, next(self._grant_seq), job))
            job.until = until
            if end is not None:
                if until is None or end[0] <= until + self.batch_window + _LATER:
                    heapq.heappush(self._heap, end)
                else:
                    later[job] = end
            if until is not None and until not in self._wakes:
                self._wakes.add(until)
                self._push(until, GrantEnd())

    def _start(self, job: JobState, gpus: tuple[int, ...], now: float) -> tuple[float, int, Event]:
        """Start ``job`` on ``gpus``; returns its end event as a heap entry (its place
        in the order of events taken now), for ``_grants`` to queue or keep back."""
        cluster = self.cluster
        gpu_type = cluster.gang_type(gpus) if cluster.typed else None
        profile = (
            self._true_profiles.get(job.app, job.app.profile) if self._claims else job.app.profile
        )
        rate = profile.speed(len(gpus), cluster.span(gpus), gpu_type)
        job.start(tuple(sorted(gpus)), rate, now, self.restart_cost)
        token = next(self._token)
        self.tokens[id(job)] = token
        stop = self._work[job]
        search = self._searches.get(job.app)
        if search is not None:
            stop = min(stop, search.stop_point(job.done))
            self._stop_at[job] = stop
        left = stop - job.done
        if not left > 0.0:  # exactly max(0.0, left), as remaining_at was
            left = 0.0
        return (now + self.restart_cost + left / job.rate, next(self._seq), JobEnd(job, token))

    def _stop(self, job: JobState, now: float, release: bool = True) -> None:
        """Stop ``job``; its GPUs go back to the free pool unless ``release`` is False
        (the caller settles the pool)."""
        pool = self._free if release else None
        best = self.cluster.span(job.gpus) <= self.cluster.best_span(job.gang)
        if job.started_at is not None and now > job.started_at:
            # ``tuple.__new__``: the named tuple without its Python ``__new__`` (67 against
            # 210 ns, and no Python frame in a compiled engine); one per hold of a GPU set.
            self.intervals.append(
                tuple.__new__(
                    Interval, (job.started_at, now, job.app.app_id, job.job_id, job.gpus, best)
                )
            )
        for g in job.gpus:
            if self._holder.get(g) is job:
                del self._holder[g]
                if pool is not None:
                    pool.add(g)
        job.stop(now, best)
        self.tokens.pop(id(job), None)
        if self._later_ends:
            end = self._later_ends.pop(job, None)
            if end is not None:
                heapq.heappush(self._ghosts, end[0])


_gc_lock = threading.Lock()
_gc_depth = 0  # runs under way (threads may run simulators side by side)
_gc_saved = (0, 0, 0)


@contextmanager
def _full_collections_deferred() -> Iterator[None]:
    """Run without the garbage collector's full (oldest-generation) collections; young
    collections go on, and the thresholds are restored when the last run ends.

    A run only accumulates: one ``Interval`` per hold of a GPU set (1.1 million for
    Gandiva's 60 s slices on the bundled trace) and the apps' states, all alive until
    the report. CPython starts a full collection each time the objects that survived
    young collections grow by a quarter, and each one walks every object alive: 22
    collections took 6.5 of Gandiva's 38 CPU seconds and freed nothing. Nothing is
    decided differently: the collector frees no object the run still uses.
    """
    global _gc_depth, _gc_saved
    with _gc_lock:
        if _gc_depth == 0:
            _gc_saved = gc.get_threshold()
            gc.set_threshold(_gc_saved[0], _gc_saved[1], 1 << 30)
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0:
                gc.set_threshold(*_gc_saved)


def simulate(
    workload: Workload,
    cluster: Cluster,
    policy: Policy,
    batch_window: float = DEFAULT_BATCH_WINDOW,
    on_app_finished: Callable[[int, int], None] | None = None,
    conditions: Conditions = Conditions(),
) -> SimulationResult:
    """Run ``policy`` on ``workload`` and ``cluster`` to the end (see :class:`Simulator`);
    ``themis.reports.summarize`` turns the result into the reported figures."""
    return Simulator(workload, cluster, policy, batch_window, on_app_finished, conditions).run()


def _t_cluster_of(spec: AppSpec, profile: ModelProfile, now: float, cluster: Cluster) -> float:
    """``T_cluster`` of ``spec``'s jobs as written (the truth the report needs)."""
    return t_cluster(profile, AppState(spec, profile, 0.0).remaining_by_gang(now), cluster.shape)
