"""``themis serve``'s scheduling loop: the simulator's mechanism, driven by the wall clock
and real jobs.

Every tick the loop (1) re-reads the GPU inventory when due, (2) answers the commands the
API queued (submit, cancel, release), (3) admits submitted apps, (4) collects job
progress and job ends from Ray, (5) kills jobs past their grace, (6) applies successive
halving, and (7) when GPUs come up for grabs — a lease ends, a job ends, an app arrives,
a node comes or goes — runs one policy round exactly as the simulator does, then
launches the granted jobs whose GPUs are really free.

:class:`ArbiterService` builds the loop's parts, each with the collaborators it uses
(none inherits from another, as Ray Serve's controller builds its managers), and calls
them in that order: ``inventory_tracking``, ``requests``, ``admission``,
``job_reports``, ``halving_control``, ``rounds``, ``launches``, ``status``. They share
the books (``live.AppBook``), job control (``job_control``), the lease clocks
(``lease_book``) and the inventory in force (``current_inventory``), and move trials
only through ``trials``.

Time is seconds since the store's epoch (fixed at first start), so arrival and finish
times, attained service and the time-averaged number of active apps keep their meaning
across restarts; the time the arbiter was down counts as time the apps waited.

Progress counts as done only once checkpointed (``trials.steps_done``), so a crash of a
job, of a node or of the arbiter loses no completed step.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.state import AppState
from themis.policies import make_policy
from themis.runtime.loop.admission import Admission
from themis.runtime.loop.commands import CommandQueue
from themis.runtime.loop.credentials import JobCredentials
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.halving_control import HalvingControl
from themis.runtime.loop.history import RhoHistory
from themis.runtime.loop.inventory_tracking import InventoryTracking
from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.job_reports import ReportHandling
from themis.runtime.loop.launches import Launches
from themis.runtime.loop.lease_book import LeaseClock
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.options import ServiceOptions
from themis.runtime.loop.requests import RequestHandling
from themis.runtime.loop.restart_cost import RestartCosts
from themis.runtime.loop.rounds import Rounds
from themis.runtime.loop.start_watch import StartDeadlines, StartWatch
from themis.runtime.loop.status import StatusReporting
from themis.runtime.loop.trials import Trials
from themis.runtime.state.store import StateLost, Store
from themis.runtime.workers.launcher import JobLauncher, RunningJob
from themis.runtime.workers.lease import Outcome, Progress
from themis.runtime.workers.ray_inventory import read_inventory

#: The store's ``meta`` key of the options of the last arbiter started on it.
SERVE_META = "serve"
log = logging.getLogger("themis.runtime")
#: Ticks failing in a row after which the loop gives up (a fault of the arbiter itself,
#: not of one app's input: every tick fails the same way).
MAX_FAILING_TICKS = 100


class ArbiterService:
    """The scheduling loop: builds its parts and calls them, tick by tick."""

    def __init__(
        self,
        store: Store,
        storage: Path,
        options: ServiceOptions,
        nodes: Callable[[], list[dict[str, Any]]],
        launcher: JobLauncher | None = None,
        metrics: ArbiterMetrics | None = None,
        commands: CommandQueue | None = None,
    ) -> None:
        if launcher is None:
            from themis.runtime.workers.jobs import Launcher

            launcher = Launcher(options.grace)
        self.store = store
        self.storage = Path(storage)
        self.options = options
        self.jobs = JobControl(launcher)
        self.metrics = metrics if metrics is not None else ArbiterMetrics()
        self.commands = commands if commands is not None else CommandQueue()
        self.policy = make_policy(options.policy, options.knobs)
        self.epoch = store.epoch()
        self.current = CurrentInventory(read_inventory(nodes()))
        self.rho_history = RhoHistory()  # for the dashboard (api.dashboard)
        self.clocks: dict[Key, LeaseClock] = {}
        self.start_watch = StartWatch(options.start_deadline)
        self.restart_costs = RestartCosts(
            options.restart_cost, cap=options.lease, interval=options.lease
        )
        self._round_due = True  # a restarted arbiter hands out GPUs at once
        # App logs are queued and written off the loop, within per-app limits: the tick
        # never waits on what tenants write (state/log_writer.py).
        store.start_log_writer(options.log_limits, self.metrics.log_limited_count)
        # A restarted arbiter rebuilds every app from the store; leases of a previous
        # process are void (its job actors died with it), so their trials wait for the
        # next round.
        voided = store.void_leases()
        self.book = AppBook.rebuild(store, self.now())
        self.trials = Trials(
            store,
            self.book,
            self.jobs,
            self.clocks,
            self.current,
            self.metrics,
            self.rho_history,
            self.policy.options.ideal_time,
        )
        self.tracking = InventoryTracking(
            nodes, self.current, store, self.book, self.jobs, self.trials, self.metrics, options
        )
        self.admission = Admission(store, self.book, self.current, self.metrics)
        self.requests = RequestHandling(
            self.commands,
            store,
            self.book,
            self.jobs,
            self.admission,
            self.trials,
            self.current,
            self.metrics,
        )
        self.credentials = JobCredentials(store)
        self.halving = HalvingControl(store, self.book, self.jobs, self.trials)
        self.reports = ReportHandling(
            store,
            self.book,
            self.jobs,
            self.clocks,
            self.current,
            self.trials,
            self.halving,
            self.credentials,
            self.start_watch,
            self.restart_costs if options.measure_restart_cost else None,
            self.metrics,
            self.now,
        )
        self.start_deadlines = StartDeadlines(
            self.start_watch, self.book, self.jobs, self.trials, self.metrics
        )
        self.rounds = Rounds(
            self.policy,
            options,
            self.book,
            self.jobs,
            self.clocks,
            self.current,
            self.trials,
            self.metrics,
            self.restart_costs,
        )
        self.rounds.tell_restart_cost()
        self.launches = Launches(
            store, self.book, self.jobs, self.current, self.credentials, self.storage
        )
        self.status = StatusReporting(
            store,
            self.book,
            self.jobs,
            self.admission,
            self.rounds,
            self.tracking,
            self.current,
            self.metrics,
            self.rho_history,
            options,
            self.epoch,
        )
        self.tracking.record_cluster()
        self._record_options()
        message = "arbiter restarted: resuming from the store"
        if voided:
            message += f" ({voided} leases of the previous process void)"
        now = self.now()
        for app_id in self.book.apps:
            store.log(now, app_id, None, message)

    # -- views kept for callers and tests -------------------------------------------------

    def now(self) -> float:
        return time.time() - self.epoch

    @property
    def cluster(self) -> Cluster | None:
        return self.current.cluster

    @property
    def apps(self) -> dict[str, LiveApp]:
        return self.book.apps

    @property
    def active(self) -> list[AppState]:
        """The live apps' scheduler state, in arrival order."""
        return self.book.active

    @property
    def submitted(self) -> list[str]:
        return self.admission.submitted

    @property
    def running(self) -> dict[Key, RunningJob]:
        return self.jobs.running

    @property
    def draining(self) -> dict[Key, RunningJob]:
        return self.jobs.draining

    @property
    def pending(self) -> dict[Key, tuple[int, ...]]:
        return self.jobs.pending

    def snapshot(self) -> dict[str, Any]:
        """The loop's liveness, for ``status`` (read from the API thread)."""
        return self.status.snapshot()

    def cluster_view(self) -> dict[str, Any]:
        """What the dashboard needs that only the loop knows (read from the API thread)."""
        return self.status.cluster_view()

    def accept_report(self, job: RunningJob, report: Progress | Outcome) -> bool:
        return self.reports.accept_report(job, report)

    def checkpoint_key(self, app_id: str) -> str:
        return self.credentials.checkpoint_key(app_id)

    # -- start-up -------------------------------------------------------------------------

    def _record_options(self) -> None:
        """Keep the policy and every knob this arbiter runs with (``meta.serve``), so that
        ``themis replay`` simulates with them (``state/replay.recorded_settings``)."""
        self.store.set_meta(SERVE_META, json.dumps(self.options.record(), sort_keys=True))

    # -- the loop -------------------------------------------------------------------------

    def run(self, should_stop: Callable[[], bool], exit_when_done: bool = False) -> None:
        """Tick until ``should_stop``. A tick that raises is logged, counted in
        ``themis_loop_faults_total{where="tick"}`` and the loop goes on: one app's input
        must not stop the arbiter. Lost state, and a fault repeated on every tick, stop
        it."""
        failing = 0
        while not should_stop():
            try:
                self.tick()
                failing = 0
            except StateLost:
                self.store.give_up()
                raise
            except Exception as exc:  # noqa: BLE001
                failing += 1
                log.exception("themis serve: a scheduling tick failed; going on")
                self.metrics.faults.labels("tick").inc()
                self._round_due = True  # what the failed tick was to decide, retried
                if failing >= MAX_FAILING_TICKS:
                    raise ThemisError(
                        f"the scheduling loop failed {failing} ticks in a row; last: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
            if exit_when_done and self.idle():
                return
            self.commands.wait(self.options.tick)

    def idle(self) -> bool:
        """Nothing to do: no app submitted or running, no job left in Ray."""
        return not (
            self.book.active or self.jobs.draining or self.admission.submitted or len(self.commands)
        )

    def tick(self) -> None:
        self.store.check_file()  # a deleted or replaced database stops the arbiter
        now = self.now()
        self.status.beat()
        needs_round, self._round_due = self._round_due, False
        needs_round = self.tracking.refresh(now) or needs_round
        needs_round = self.requests.handle(now) or needs_round
        needs_round = self.admission.admit(now) or needs_round
        needs_round = self.reports.collect(now) or needs_round
        self.reports.enforce_grace()
        # Every GPU that really comes free leads to a round, whatever freed it (a job's
        # end, a drain or a kill, of a live app or of one cancelled or done).
        needs_round = self.jobs.take_freed() or needs_round
        needs_round = self.start_deadlines.enforce(now) or needs_round
        needs_round = self.halving.apply(now) or needs_round
        self.rounds.hold_unstarted_leases(now)
        ending = self.rounds.lease_ends_by(now + self.options.tick)
        if (needs_round or ending) and self.book.active and self.current.cluster is not None:
            self.rounds.run(now)
        self.launches.launch_ready()
        self.status.write_if_due(now)

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Checkpoint every job (killing those that ignore it after the grace period)
        and leave the store ready for the next start."""
        if self.store.lost:  # nothing can be recorded: end every job, write nothing
            for rj in [*self.jobs.running.values(), *self.jobs.draining.values()]:
                self.jobs.kill(rj)
            return
        now = self.now()
        for app in list(self.book.active):
            for job in app.running_jobs():
                self.trials.stop_job(job, now, "waiting", "arbiter shutting down")
        self.jobs.pending.clear()
        deadline = time.time() + self.options.grace
        while self.jobs.draining and time.time() < deadline:
            self.reports.collect(self.now())
            time.sleep(self.options.tick)
        for rj in list(self.jobs.draining.values()):
            self.jobs.kill(rj)
        self.store.void_leases()
        for app in self.book.active:
            self.store.update_app(app.app_id, gpus=0)
