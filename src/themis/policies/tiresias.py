"""Tiresias (Gu et al., NSDI 2019): discretized two-dimensional least attained service
(2D-LAS), preemptive and placement-unaware.

A job's attained service is two-dimensional: GPUs x time it has run (GPU-seconds). Jobs
sit in K priority queues split by service thresholds; every job starts in the top queue
and is demoted as its service crosses each threshold. Rules, per round:

- Queues are served in strict priority. Inside a queue, the order is that of the list
  the authors' simulator keeps (SymbioticLab/Tiresias, ``simulator/run_sim.py``,
  ``dlas_sim_jobs``): running jobs first, in the order they last started or entered the
  queue; then the waiting jobs preempted from there, the last preempted first; then the
  other waiting jobs, first come first served by the time they entered the queue (a new
  job: its app's arrival; a demoted job: its crossing; a promoted job: its promotion);
  ties by app arrival, then submission order. So a waiting job never preempts a running
  job of its own queue, except one that enters the queue in this very round: that one
  joins the tail, behind the queue's waiting jobs.
- A waiting job that does not fit the free GPUs preempts running jobs of lower queues
  (and those just entering its own), from the tail: the lowest queue first, in it the
  job entering it now, then the one that started or entered last, when that makes it fit
  (victims it does not need after all are spared). A job that cannot fit even so is
  passed over for the jobs behind it: no GPU idles while a waiting gang would fit.
- Starvation (off by default, as in the authors' default run): a waiting job below the
  top queue whose waiting time reaches ``promote_knob`` x its running time since it last
  entered the top queue is promoted back to the top queue; both times restart from zero,
  and the waiting time counts only from the job's first start after it entered the top
  queue (the paper's PROMOTEKNOB; the authors' ``last_pending_time``).
- Placement-unaware: a gang takes the lowest-numbered free GPUs, whatever their span.
  Jobs that keep running keep their exact GPUs.

The policy asks to be called again (``Assignment.until``) at the next threshold crossing
or promotion that can change the schedule, and at least at every multiple of the
re-allocation quantum (``PolicyOptions.lease``). A crossing due within the simulator's
batching window is handled in the current round. Parameter values and their sources:
``docs/policies/tiresias_las_srtf.md``.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right, insort
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies._quantum import quantum_end
from themis.policies._ranked import attained_at
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)
from themis.policies.registry import register

#: Service thresholds (GPU-seconds) between the queues: K = 3 queues split at 3,250 and
#: 7,200 GPU-seconds, the authors' default run (``dlas-gpu`` in SymbioticLab/Tiresias
#: ``simulator/run_sim.py``, with ``num_queue = 3`` and ``queue_limit`` in ``jobs.py``).
THRESHOLDS: tuple[float, ...] = (3250.0, 7200.0)

#: STARVELIMIT = PROMOTE_KNOB x running time since the job last entered the top queue.
#: Off (inf) as in the authors' default run; their ``dlas-gpu-8`` run sets 8.
PROMOTE_KNOB = math.inf

#: Times this close (seconds) are one instant, whatever the batching window.
_EPS = 1e-6

#: (time it entered its queue, its app's number, submission index, job): waiting jobs of
#: one queue sort in service order (apps are numbered in arrival order), so the apps' queues
#: merge as they are.
_Entry = tuple[tuple[int, float], int, int, JobState]


@dataclass
class _AppQueues:
    """One app's waiting jobs by queue, in service order, valid for one app version.

    ``next_promotion`` may be early (a job that has started since): a round then comes
    early and changes nothing.
    """

    version: int
    running: frozenset[JobState]
    queues: list[list[_Entry]]
    next_promotion: float
    touches: int = 0  # the app's ``touches`` when built


@register
class TiresiasPolicy(Policy):
    name = "tiresias"
    description = "discretized 2D-LAS priority queues, preemptive, placement-unaware (Tiresias)"

    def __init__(
        self,
        options: PolicyOptions,
        thresholds: Sequence[float] | None = None,
        promote_knob: float | None = None,
    ) -> None:
        """``thresholds`` and ``promote_knob`` default to ``options``' Tiresias settings,
        and those to the authors' default run (``THRESHOLDS``, ``PROMOTE_KNOB``)."""
        super().__init__(options)
        if thresholds is None:
            thresholds = options.tiresias_thresholds
            if thresholds is None:
                thresholds = THRESHOLDS
        if promote_knob is None:
            promote_knob = options.tiresias_promote_knob
            if promote_knob is None:
                promote_knob = PROMOTE_KNOB
        thresholds = tuple(float(t) for t in thresholds)
        if any(not (0 < t < math.inf) for t in thresholds) or list(thresholds) != sorted(
            set(thresholds)
        ):
            raise ThemisError(
                f"queue thresholds must be increasing positive GPU-seconds, got {thresholds}",
                field="thresholds",
            )
        if not promote_knob > 0:  # math.inf disables promotion
            raise ThemisError(f"promote knob must be > 0, got {promote_knob}", field="promote_knob")
        self.thresholds = thresholds
        self.promote_knob = float(promote_knob)
        # When each job last entered the top queue: (time, GPU-seconds attained then). Set
        # at its first start and at each promotion; a job never started has no mark.
        self._marks: dict[JobState, tuple[float, float]] = {}
        # The queue each job was last seen entering, and when (crossing or promotion). A
        # job without one is new: top queue, entered at its app's arrival. The queue is
        # also a floor: a job demoted because its crossing was due within the batching
        # window stays demoted while it waits just short of the threshold.
        self._entered: dict[JobState, tuple[int, float]] = {}
        # When each running job last started: with its queue entry, its place in its
        # queue's list in the authors' simulator, whose tail is preempted first.
        self._started: dict[JobState, float] = {}
        # When each waiting job was preempted from where it stood among the running jobs
        # of its queue: it then waits ahead of the queue's other waiting jobs (the
        # authors' lists move the waiting jobs behind the running ones at each event, so
        # a job just preempted stands before those that were waiting already).
        self._preempted: dict[JobState, float] = {}
        # Running jobs that entered their queue (crossed a threshold) in this round: at
        # the tail of their new queue, behind its waiting jobs, which may preempt them.
        self._fresh: set[JobState] = set()
        self._waiting: dict[AppState, _AppQueues] = {}
        # Apps numbered when first seen, in the order of the views' apps: arrival order.
        self._number: dict[AppState, int] = {}
        self._numbered = 0

    # -- a job's standing -------------------------------------------------------------------

    def standing(self, job: JobState, now: float, window: float = 0.0) -> tuple[float, int]:
        """(GPU-seconds attained since the job last entered the top queue, its queue: 0 is
        the top). A running job whose crossing is due within ``window`` seconds (the
        batching window) counts as past it."""
        mark = self._marks.get(job)
        service = attained_at(job, now) - (mark[1] if mark is not None else 0.0)
        ahead = window + _EPS if job.gpus else _EPS
        q = bisect_right(self.thresholds, service + job.gang * ahead)
        entered = self._entered.get(job)
        if entered is not None and entered[0] > q:
            q = entered[0]
        return service, q

    def promotion_at(self, job: JobState, service: float, queue: int) -> float:
        """When a job with this standing that waits from now on is promoted (inf: never).
        It has waited ``t - mark - ran`` at time ``t``, where ``ran = service / gang``."""
        mark = self._marks.get(job)
        if queue == 0 or mark is None or math.isinf(self.promote_knob):
            return math.inf
        return mark[0] + service / job.gang * (1.0 + self.promote_knob)

    def entered(self, job: JobState) -> float:
        """When the job entered the queue it is in."""
        entered = self._entered.get(job)
        return entered[1] if entered is not None else job.app.arrival

    # -- the round --------------------------------------------------------------------------

    incremental = True

    def schedule(self, view: SchedulingView) -> Schedule:
        return self._round(view)[0]

    def changes(self, view: SchedulingView) -> Changes:
        """The round as what changes: the jobs it preempts stop (a round knows them:
        no walk of every job), every other entry of the schedule that is not a running
        job left as it is starts, continues with a new grant end, or moves."""
        schedule, stopped = self._round(view)
        start = {
            j: a
            for j, a in schedule.items()
            if not (j.gpus and a.gpus == j.gpus and a.until == j.until)
        }
        return Changes(stopped, start)

    def _round(self, view: SchedulingView) -> tuple[Schedule, list[JobState]]:
        """The full schedule, and the running jobs it stops."""
        now, apps = view.now, view.apps
        if len(self._waiting) > len(apps):
            self._forget(apps)
        horizon = now + view.window + _EPS
        waiting = []
        number = self._number
        for app in apps:  # the common case inline: nothing changed, no promotion due
            if app not in number:
                number[app] = self._numbered
                self._numbered += 1
            cached = self._waiting.get(app)
            if cached is None or cached.version != app.version or cached.next_promotion <= horizon:
                cached = self._app_queues(app, now, view.window)
            waiting.append(cached)
        n_queues = len(self.thresholds) + 1
        # Jobs waiting per queue once this round is done (starts and victims applied below).
        still_waiting = [sum(len(a.queues[q]) for a in waiting) for q in range(n_queues)]

        # apps are in arrival order: their admission ranks (the simulator's books) or
        # their positions order them alike
        pos = view.order if view.order is not None else {app: k for k, app in enumerate(apps)}
        running = [j for app in apps for j in app.running_jobs()]
        fresh = self._fresh = set()
        stand = {j: self._observe(j, now, view.window) for j in running}
        held = [0] * n_queues  # GPUs held per queue by jobs running since before this round
        fresh_held = [0] * n_queues  # of which by jobs that entered the queue this round
        for job in running:
            held[stand[job][1]] += job.gang
        for job in fresh:
            fresh_held[stand[job][1]] += job.gang
        gpus: dict[JobState, tuple[int, ...]] = {j: j.gpus for j in running}
        free = sorted(view.free_gpus())
        victims: list[JobState] | None = None  # sorted when first needed
        preempted: list[JobState] = []
        passed: list[JobState] = []

        for q, job in _in_order(waiting):
            below = sum(held[q + 1 :]) + fresh_held[q]
            if not free and not below:  # no job of this queue or any lower one can start
                break
            stand[job] = self.standing(job, now)
            if job.gang <= len(free) and (taken := _take(free, job.gang, cluster=view.cluster)):
                gpus[job] = taken
                still_waiting[q] -= 1
            elif job.gang <= len(free) + below:
                if victims is None:
                    # The tail of the lowest queue first (see ``_place``).
                    victims = sorted(running, key=partial(_victim_rank, self, stand, pos))
                for victim in self._preempt(job, q, len(free), victims, stand, gpus):
                    for g in gpus.pop(victim):
                        insort(free, g)
                    held[stand[victim][1]] -= victim.gang
                    if victim in fresh:
                        fresh_held[stand[victim][1]] -= victim.gang
                    still_waiting[stand[victim][1]] += 1
                    preempted.append(victim)
                taken = _take(free, job.gang, cluster=view.cluster)
                if taken is None:  # typed cluster: freed by count, but no one type holds it
                    passed.append(job)
                    continue
                gpus[job] = taken
                still_waiting[q] -= 1
            else:
                passed.append(job)
        # Jobs passed over or preempted run if GPUs are left after all (victims on their
        # own GPUs when these are free: then they were not really preempted).
        left = sorted(passed + preempted, key=partial(_second_chance_rank, self, stand, pos))
        for job in left:
            if job.gang <= len(free) and job not in gpus:
                own = job.gpus if job.gpus and set(job.gpus) <= set(free) else None
                taken = _take(free, job.gang, own, view.cluster)
                if taken is not None:
                    gpus[job] = taken
                    still_waiting[stand[job][1]] -= 1

        marks, started = self._marks, self._started
        for job in gpus:
            if not job.gpus:
                started[job] = now
                mark = marks.get(job)
                if mark is None:  # first start
                    marks[job] = (now, 0.0)
                elif mark[0] == math.inf:  # first start since a promotion: waiting counts
                    marks[job] = (now, mark[1])  # from now on
        stopped = [j for j in preempted if j not in gpus]
        for job in stopped:
            if job not in fresh:  # a fresh job stood at the tail: it waits there
                self._preempted[job] = now
        until = self._next_call(view, gpus, stand, still_waiting, waiting, stopped)
        return {job: Assignment(g, until) for job, g in gpus.items()}, stopped

    def _observe(self, job: JobState, now: float, window: float) -> tuple[float, int]:
        """A running job's standing (``standing`` inlined: every running job, every round);
        a crossing since the last round is recorded: the job entered its new queue when its
        service reached the threshold."""
        mark = self._marks.get(job)
        if mark is None or mark[0] == math.inf:  # started by someone else
            mark = self._marks[job] = (now, 0.0 if mark is None else mark[1])
            self._started.setdefault(job, now)
        gang = job.spec.gang
        service = job.attained + gang * (now - job.held_since) - mark[1]
        q = bisect_right(self.thresholds, service + gang * (window + _EPS))
        entered = self._entered.get(job)
        known = entered[0] if entered is not None else 0
        if q > known:
            crossed = now - (service - self.thresholds[q - 1]) / gang
            self._entered[job] = (q, min(crossed, now))
            self._preempted.pop(job, None)
            if crossed >= now - window - _EPS:  # not one left for a later round
                self._fresh.add(job)
        elif known > q:
            q = known
        return service, q

    def _place(
        self, job: JobState, queue: int, pos: Mapping[AppState, int]
    ) -> tuple[int, bool, float, float, int, int]:
        """A running job's victim rank, lowest first: the lowest queue first and in it the
        tail of the queue's list, as in the authors' simulator, where a job joins the tail
        of its queue when it enters it and a waiting job moves to the tail at each round
        (so that the running jobs of a queue stand in the order they last started)."""
        entered = self.entered(job)
        last = max(entered, self._started.get(job, entered))
        return (-queue, job not in self._fresh, -last, -entered, -pos[job.app], -job.index)

    def _preempt(
        self,
        job: JobState,
        q: int,
        free: int,
        victims: list[JobState],
        stand: dict[JobState, tuple[float, int]],
        gpus: dict[JobState, tuple[int, ...]],
    ) -> list[JobState]:
        """The running jobs of queues below ``q`` that ``job`` takes GPUs from: in victim
        order until it fits, then the last-chosen spared while it still fits."""
        chosen: list[JobState] = []
        got = free
        fresh = self._fresh
        for victim in victims:
            queue = stand[victim][1]
            if queue < q or (queue == q and victim not in fresh):
                break  # victims are sorted lowest queue first, fresh first in a queue
            if victim in gpus:
                chosen.append(victim)
                got += victim.gang
                if got >= job.gang:
                    break
        surplus = got - job.gang
        for victim in reversed(chosen):
            if victim.gang <= surplus:
                chosen.remove(victim)
                surplus -= victim.gang
        return chosen

    def _next_call(
        self,
        view: SchedulingView,
        runs: dict[JobState, tuple[int, ...]],
        stand: dict[JobState, tuple[float, int]],
        still_waiting: list[int],
        waiting: list[_AppQueues],
        stopped: list[JobState],
    ) -> float:
        """The next quantum boundary, or the next threshold crossing or promotion that can
        change the schedule, whichever is first.

        Nothing else changes between rounds, so a crossing out of queue q matters only if
        by then a job of queue q + 1 or above waits (it may preempt the demoted job, which
        joins the tail of queue q + 1), and a
        promotion only if by then a job below the top queue runs (the promoted job may
        preempt it). The others are applied at the next round that comes anyway, exactly as
        if they had had a round of their own: crossings and promotions are dated when they
        were due. Promotions cached for apps whose jobs just started may be stale: the
        round then comes early and changes nothing.
        """
        now = view.now
        promotion = min((a.next_promotion for a in waiting), default=math.inf)
        for job in stopped:
            at = self.promotion_at(job, *stand[job])
            if at > now + _EPS:
                promotion = min(promotion, at)
        top_waiting = next((q for q, n in enumerate(still_waiting) if n > 0), len(still_waiting))
        wake = quantum_end(now, view.window, self.options.lease)
        first_crossing = math.inf
        low_running = False
        for job in runs:
            service, q = stand[job]
            low_running = low_running or q > 0
            if q < len(self.thresholds):
                crossing = now + (self.thresholds[q] - service) / job.gang
                first_crossing = min(first_crossing, crossing)
                if top_waiting <= q + 1 or promotion <= crossing:
                    wake = min(wake, crossing)
        if low_running or first_crossing <= promotion:
            wake = min(wake, promotion)
        if not wake > now:
            raise AssertionError(f"unreachable: tiresias asked to be called at {wake} <= {now}")
        return wake

    # -- per-app state ------------------------------------------------------------------------

    def _app_queues(self, app: AppState, now: float, window: float) -> _AppQueues:
        """The app's waiting jobs by queue, after promoting those due within ``window``."""
        cached = self._waiting.get(app)
        if cached is None or cached.touches != app.touches:  # touched: rebuilt
            cached = self._build(app)
        elif cached.version != app.version:
            self._update(app, cached)
        if cached.next_promotion <= now + window + _EPS:
            for queue in cached.queues[1:]:
                for *_, job in queue:
                    due = self.promotion_at(job, *self.standing(job, now))
                    if due <= now + window + _EPS:  # dated when due if that has passed
                        at = min(due, now)
                        # waiting counts again only once the job has run again (the
                        # authors' last_pending_time grows only while executed_time > 0)
                        self._marks[job] = (math.inf, job.attained)
                        self._entered[job] = (0, at)
                        self._preempted.pop(job, None)
            cached = self._build(app)
        return cached

    def _build(self, app: AppState) -> _AppQueues:
        """Sort the app's waiting jobs into queues."""
        number = self._number[app]
        queues: list[list[_Entry]] = [[] for _ in range(len(self.thresholds) + 1)]
        next_promotion = math.inf
        for job in app.idle_jobs():
            q, entry, promotion = self._waiting_entry(job, number)
            queues[q].append(entry)
            next_promotion = min(next_promotion, promotion)
        for queue in queues:
            queue.sort()
        built = _AppQueues(
            app.version, frozenset(app.running_jobs()), queues, next_promotion, app.touches
        )
        self._waiting[app] = built
        return built

    def _update(self, app: AppState, cached: _AppQueues) -> None:
        """Bring ``cached`` to the app's version: jobs that started (and maybe finished)
        since leave their queues, jobs that stopped without finishing join them."""
        cached.queues = [
            [e for e in queue if not e[3].gpus and e[3].finished_at is None]
            for queue in cached.queues
        ]
        number = self._number[app]
        for job in cached.running:
            if not job.gpus and job.finished_at is None:
                q, entry, promotion = self._waiting_entry(job, number)
                insort(cached.queues[q], entry)
                cached.next_promotion = min(cached.next_promotion, promotion)
        cached.version, cached.running = app.version, frozenset(app.running_jobs())

    def _waiting_entry(self, job: JobState, number: int) -> tuple[int, _Entry, float]:
        """A waiting job's queue, its entry there and when it is promoted (inf: never).
        ``standing``, ``entered`` and ``promotion_at`` inlined: this runs for every waiting
        job of every app that changed."""
        mark = self._marks.get(job)
        if mark is None:  # never started: top queue since its app arrived
            return 0, ((1, job.app.arrival), number, job.index, job), math.inf
        gang = job.spec.gang
        service = job.attained - mark[1]
        q = bisect_right(self.thresholds, service + gang * _EPS)
        entered = self._entered.get(job)
        if entered is not None and entered[0] >= q:
            q, at = entered
        else:  # still in the top queue it entered when its app arrived
            at = job.app.arrival
        preempted = self._preempted.get(job)
        key = (1, at) if preempted is None else (0, -preempted)
        if q == 0 or math.isinf(self.promote_knob):
            return q, (key, number, job.index, job), math.inf
        promotion = mark[0] + service / gang * (1.0 + self.promote_knob)
        return q, (key, number, job.index, job), promotion

    def _forget(self, apps: Sequence[AppState]) -> None:
        """Drop what is kept for apps that have finished."""
        active = set(apps)
        self._waiting = {a: v for a, v in self._waiting.items() if a in active}
        self._number = {a: v for a, v in self._number.items() if a in active}
        self._marks = {j: m for j, m in self._marks.items() if j.app in active}
        self._entered = {j: e for j, e in self._entered.items() if j.app in active}
        self._started = {j: t for j, t in self._started.items() if j.app in active}
        self._preempted = {j: t for j, t in self._preempted.items() if j.app in active}


def _in_order(waiting: list[_AppQueues]) -> Iterator[tuple[int, JobState]]:
    """Waiting jobs in service order: by queue, then the preempted ones, last preempted
    first, then the others by the time they entered it; then the app's arrival (its
    number), then submission."""
    for q in range(len(waiting[0].queues) if waiting else 0):
        for *_, job in heapq.merge(*(a.queues[q] for a in waiting if a.queues[q])):
            yield q, job


def _take(
    free: list[int],
    gang: int,
    own: tuple[int, ...] | None = None,
    cluster: Cluster | None = None,
) -> tuple[int, ...] | None:
    """Remove ``gang`` GPUs from the sorted free list: ``own`` if given, else the lowest.

    On a typed cluster a gang never mixes types: the lowest ``gang`` free GPUs of one type
    (the type whose ``gang``-th free GPU comes first: type-blind); None if no type has that many."""
    if own is not None:
        taken: tuple[int, ...] = own
    elif cluster is None or not cluster.typed:
        taken = tuple(free[:gang])
    else:
        by_type: dict[str | None, list[int]] = {}
        found = None
        for g in free:
            same = by_type.setdefault(cluster.type_of[g], [])
            same.append(g)
            if len(same) == gang:
                found = tuple(same)
                break
        if found is None:
            return None
        taken = found
    for g in taken:
        free.remove(g)
    return taken


# Module functions bound with ``partial``, not lambdas: mypyc (2.4) stops with an internal
# error on a closure inside a method of a decorated (``@register``) class.
def _victim_rank(
    policy: TiresiasPolicy,
    stand: Mapping[JobState, tuple[float, int]],
    pos: Mapping[AppState, int],
    job: JobState,
) -> tuple[int, bool, float, float, int, int]:
    return policy._place(job, stand[job][1], pos)


def _second_chance_rank(
    policy: TiresiasPolicy,
    stand: Mapping[JobState, tuple[float, int]],
    pos: Mapping[AppState, int],
    job: JobState,
) -> tuple[int, float, int, int]:
    return (stand[job][1], policy.entered(job), pos[job.app], job.index)
