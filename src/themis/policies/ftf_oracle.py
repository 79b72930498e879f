"""An oracle upper bound on finish-time fairness: per app, lexicographic min-max of Themis's
rho over time shares, re-solved at every event (formerly ``gavel-ftf``).

Not Gavel as it ships (that is ``gavel``): it starts from Gavel's finish-time-fairness
program (Narayanan et al., OSDI 2020) but minimizes Themis's per-app rho, takes the
lexicographic optimum, re-solves at every event and hands freed GPUs out at once.

Every call (arrival, job end, round end) the program (``_ftf_program``) is solved afresh
from the apps' current progress, with Themis's own rho, so the two policies are judged by
one yardstick. Rounds are global and ``lease`` seconds long: every grant ends at the round
end, and only then are running jobs preempted. Between round ends, GPUs that free up go to
the apps furthest behind their shares at once (work conservation). At a round end every GPU
is up for grabs and the deficit mechanism (``_deficit_rounds``) picks the jobs; an app's GPUs
go to its jobs in its app scheduler's order (jobs it already runs first, on their own GPUs,
then the longest remaining), and gangs are packed on the best span free (``Packer``).

Rho, and so the shares, are per app, as in Themis: the app, not the trial, is what should
finish fairly. See docs/policies/ftf_oracle.md for the program, the mechanism, and what
differs from Gavel and from Themis.
"""

from __future__ import annotations

from themis.agent.app_scheduler import order_measure
from themis.fairness.ftf import app_ideal_time
from themis.model.cluster import Cluster
from themis.model.placement import Packer
from themis.model.state import AppState, JobState
from themis.policies._deficit_rounds import Claim, DeficitLedger, pick_jobs
from themis.policies._ftf_program import FtfAllocation, app_load, solve
from themis.policies.base import (
    Assignment,
    Changes,
    Policy,
    PolicyOptions,
    Schedule,
    SchedulingView,
)
from themis.policies.registry import register


@register
class FtfOraclePolicy(Policy):
    name = "ftf-oracle"
    description = "oracle FTF upper bound: per-app lexicographic min-max rho, every event"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        if options.lease <= 0:
            raise ValueError("the round length (lease) must be > 0 seconds")
        self._ledger = DeficitLedger(options.lease)
        self._cluster: Cluster | None = None
        self._gangs: dict[str, int] = {}  # largest gang of each app seen (its deficit bound)
        #: The last call's program answer, by app id (for explanations and tests).
        self.last_shares: dict[str, float] = {}
        self.last_allocation: FtfAllocation | None = None
        #: The round end of the last call's grants (all of them end then).
        self._round_end: float | None = None

    #: Every grant ends at the round's end, so between round ends no running job's grant
    #: ends: ``changes`` then answers from the free GPUs alone, without a walk of every
    #: running job (``schedule`` always walks them).
    incremental = True

    def schedule(self, view: SchedulingView) -> Schedule:
        keep, new, _ = self._round(view, walk=True)
        assert keep is not None
        keep.update(new)
        return keep

    def changes(self, view: SchedulingView) -> Changes:
        """The round ``schedule`` makes, as what changes: the running jobs whose grants end
        now and that were not picked again stop; the picked jobs start (or continue on
        their GPUs until the new round end)."""
        _, new, ending = self._round(view, walk=False)
        stop = [job for jobs in ending.values() for job in jobs if job not in new]
        start = {
            job: grant
            for job, grant in new.items()
            if not (job.gpus and grant.gpus == job.gpus and grant.until == job.until)
        }
        return Changes(stop, start)

    def _round(
        self, view: SchedulingView, walk: bool
    ) -> tuple[Schedule | None, Schedule, dict[str, list[JobState]]]:
        """The grants that stay (None when not walked), the new grants, and per app id its
        running jobs whose grants end now."""
        now = view.now
        if self._cluster is not view.cluster or (
            self._ledger.now is not None and now < self._ledger.now
        ):  # a new run: nothing carries over
            self._cluster = view.cluster
            self._ledger = DeficitLedger(self.options.lease)
            self._gangs = {}
            self._round_end = None
        apps = list(view.apps)
        self._ledger.advance(now, {a.app_id: self._largest_gang(a) for a in apps})
        shares = self._shares(view, apps)

        # Grants that do not end now stay; the rest, with the free GPUs, are up for grabs.
        keep: Schedule | None = None
        split = None if walk else self._split_between_round_ends(view, apps)
        if split is None:
            keep, pool, renewable = view.split_ending()
            held: dict[str, int] = {app.app_id: 0 for app in apps}
            round_end: float | None = None
            for job in keep:
                held[job.app.app_id] += job.gang
                if job.until is not None:
                    round_end = job.until if round_end is None else max(round_end, job.until)
        else:
            pool, renewable, held, round_end = split
        if round_end is None:  # a new round starts now
            round_end = now + self.options.lease
        self._round_end = round_end

        new: Schedule = {}
        if pool:
            claims = [
                Claim(
                    (app.arrival, app.app_id),
                    self._ledger.claim(app.app_id, shares[app.app_id]),
                    held[app.app_id],
                    _queue(app, renewable[app.app_id], now),
                )
                for app in apps
            ]
            chosen = pick_jobs(claims, len(pool))
            for job, gpus in _place(view.cluster, pool, chosen).items():
                new[job] = Assignment(gpus, round_end)
                held[job.app.app_id] += job.gang
        self._ledger.record(shares, held)
        return keep, new, renewable

    def _split_between_round_ends(
        self, view: SchedulingView, apps: list[AppState]
    ) -> tuple[set[int], dict[str, list[JobState]], dict[str, int], float | None] | None:
        """``split_ending`` without a walk of the running jobs when none of their grants
        ends now: every grant runs to the round end this policy handed out, so either no
        job runs (a new round: the free GPUs are every GPU) or none ends before that
        round end. None when grants do end now (walk them)."""
        idle = view.free_count() == view.cluster.size
        end = self._round_end
        if not idle and (end is None or end <= view.now + view.window):
            return None
        held = {app.app_id: 0 if idle else len(app.held()) for app in apps}
        return set(view.free_gpus()), {app.app_id: [] for app in apps}, held, None if idle else end

    def _largest_gang(self, app: AppState) -> int:
        gang = self._gangs.get(app.app_id)
        if gang is None:
            gang = self._gangs[app.app_id] = max((j.gang for j in app.jobs), default=1)
        return gang

    def _shares(self, view: SchedulingView, apps: list[AppState]) -> dict[str, float]:
        """Each active app's time share (GPUs) from the program; 0 for an app with nothing
        left to run (its jobs end now)."""
        now = view.now
        loads = []
        ids = []
        for app in apps:
            # N_avg counts the app itself, so it is >= 1; the guard only matters when the
            # simulator admits an app a rounding error after its arrival and averages over
            # that zero-length span (0 / epsilon).
            n_avg = max(view.n_avg(app), 1.0)
            load = app_load(
                app.profile,
                app.remaining_by_gang(now),
                view.cluster.shape,
                now - app.arrival,
                app_ideal_time(self.options.ideal_time, app, view.cluster.shape, n_avg),
            )
            if load is not None:
                loads.append(load)
                ids.append(app.app_id)
        shares = {a.app_id: 0.0 for a in apps}
        self.last_allocation = None
        if loads:
            allocation = solve(loads, float(view.cluster.size))
            shares.update(zip(ids, allocation.shares, strict=True))
            self.last_allocation = allocation
        self.last_shares = dict(shares)
        return shares


def _queue(app: AppState, renewable: list[JobState], now: float) -> list[JobState]:
    """The app scheduler's order (as Themis's agent walks it): jobs whose grant ends now,
    longest remaining first, so that they continue on their own GPUs; then waiting jobs,
    longest remaining first."""
    left = order_measure(app)
    renew = sorted(renewable, key=lambda j: -left(j, now))
    return renew + app.idle_jobs()


def _place(
    cluster: Cluster, pool: set[int], jobs: list[JobState]
) -> dict[JobState, tuple[int, ...]]:
    """GPUs for the chosen jobs out of ``pool``: continuing jobs keep theirs; new gangs are
    packed biggest first, each on the best span left. ``jobs`` fit ``pool`` by count, and
    any gang fits any GPUs of its size (at some span), so every job is placed."""
    packer = Packer(cluster, pool)
    placed: dict[JobState, tuple[int, ...]] = {}
    new = []
    for job in jobs:
        if job.gpus and packer.take_exact(job.gpus):
            placed[job] = job.gpus
        else:
            new.append(job)
    for job in sorted(new, key=lambda j: -j.gang):  # stable: ties keep the pick order
        gpus = packer.take(job.gang)
        if gpus is None:
            if cluster.typed:
                continue  # chosen by count, type-blind: no one type holds it this round
            raise AssertionError("chosen jobs must fit the pool by count")
        placed[job] = gpus
    return placed
