"""One policy round, exactly as the simulator runs it: a view of the live ``AppState``s,
``policy.schedule(view)``, the simulator's own schedule check, then the schedule applied:
jobs no longer listed, or moved, are stopped; renewed ones keep running; new ones start
once their GPUs are really free (``lease_book``)."""

from __future__ import annotations

import logging
import time

from themis.errors import ThemisError
from themis.mechanism.books import ViewBooks
from themis.mechanism.checks import check_schedule
from themis.mechanism.diff import stopping
from themis.policies import Policy
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.lease_book import LeaseClock, RuntimeView, grant_length
from themis.runtime.loop.live import AppBook
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.options import ServiceOptions
from themis.runtime.loop.restart_cost import RestartCosts
from themis.runtime.loop.trials import Trials

log = logging.getLogger("themis.runtime")


class Rounds:
    """Runs rounds of the policy and holds leases whose jobs have not started."""

    def __init__(
        self,
        policy: Policy,
        options: ServiceOptions,
        book: AppBook,
        jobs: JobControl,
        clocks: dict[Key, LeaseClock],
        current: CurrentInventory,
        trials: Trials,
        metrics: ArbiterMetrics,
        restart_costs: RestartCosts,
    ) -> None:
        self.policy = policy
        self.options = options
        self.book = book
        self.jobs = jobs
        self.clocks = clocks
        self.current = current
        self.trials = trials
        self.metrics = metrics
        self.restart_costs = restart_costs
        # The books every view carries (``mechanism/books.py``): the runtime keeps no
        # record of what changed, so every app is read as changed each round.
        self.view_books = ViewBooks()
        self.count = 0

    def lease_ends_by(self, horizon: float) -> bool:
        """Whether a running job's lease ends by ``horizon`` (a round is due then)."""
        return any(
            j.until is not None and j.until <= horizon
            for a in self.book.active
            for j in a.running_jobs()
        )

    def run(self, now: float) -> None:
        cluster = self.current.cluster
        assert cluster is not None
        started = time.perf_counter()
        self.count += 1
        active = self.book.active
        view = RuntimeView(
            now,
            cluster,
            list(active),
            lambda app: self.book.n_avg(app, now),
            self.options.batch_window,
            reserved=self.jobs.reserved(),
        )
        self.tell_restart_cost()
        schedule = self.policy.schedule(self.view_books.fill(view))
        check_schedule(schedule, active, cluster)
        for job in stopping(schedule, active):
            why = "lease ended" if view.ending(job) else "preempted"
            self.trials.stop_job(job, now, "waiting", why)
            self.metrics.preempted.inc()
        for job, grant in schedule.items():
            key = (job.app.app_id, job.job_id)
            if job.gpus:  # still on its GPUs after the stops: a renewal
                clock = self.clocks.get(key)
                if clock is None or clock.started_at is not None:
                    job.until = grant.until
                else:  # renewed before it even started: still counts from its start
                    clock.length = grant_length(grant.until, now)
                    job.until = clock.hold(now)
                self.trials.record_lease(job, now, renewed=True)
                self.metrics.renewed.inc()
            else:
                self.trials.start_job(job, grant.gpus, now)
                self.clocks[key] = LeaseClock(grant_length(grant.until, now))
                job.until = grant.until
                self.trials.record_lease(job, now, renewed=False)
                self.metrics.granted.inc()
        self.metrics.round_seconds.observe(time.perf_counter() - started)
        self.metrics.auction_figures(self.policy.report())

    def tell_restart_cost(self) -> None:
        """Tell the policy the cluster's restart cost when it moved enough (before a
        round, as the simulator tells it before a run). A policy that refuses the cost
        (Gandiva: not shorter than its slice) keeps the last one: logged and counted."""
        cost = self.restart_costs.to_tell(time.monotonic())
        if cost is None:
            return
        self.restart_costs.tell(cost, time.monotonic())
        try:
            self.policy.set_restart_cost(cost)
        except ThemisError as exc:
            log.warning("themis serve: the policy refused a restart cost: %s", exc.format())
            self.metrics.faults.labels("restart_cost").inc()
            return
        self.metrics.restart_cost.set(cost)

    def hold_unstarted_leases(self, now: float) -> None:
        """A granted job's lease does not run down before the job really runs."""
        for key, clock in self.clocks.items():
            if clock.started_at is not None or clock.length is None:
                continue
            live = self.book.apps.get(key[0])
            if live is not None:
                job = live.job(key[1])
                if job.gpus:
                    job.until = clock.hold(now)
