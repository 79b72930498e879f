"""``themis serve``'s scheduling loop: the simulator's mechanism, driven by the wall clock
and real jobs.

Every tick the loop (1) answers the commands the API queued (submit, cancel, release),
(2) admits submitted apps, (3) collects job progress and job ends from Ray, (4) kills
jobs past their grace, (5) applies successive halving, (6) re-reads the GPU inventory,
and (7) when GPUs come up for grabs — a lease ends, a job ends, an app arrives, a node
comes or goes — runs one policy round exactly as the simulator does: a view of the live
``AppState``s, ``policy.schedule(view)``, the simulator's own schedule check, then the
schedule applied: jobs no longer listed, or moved, are stopped; renewed ones keep
running; new ones start once their GPUs are really free.

Time is seconds since the store's epoch (fixed at first start), so arrival and finish
times, attained service and the time-averaged number of active apps keep their meaning
across restarts; the time the arbiter was down counts as time the apps waited.

The concerns live in their own modules: ``job_control`` (which jobs run, drain, wait),
``lease_book`` (leases from the real start; GPUs free only once really stopped),
``rungs`` and ``halving`` (successive halving), ``outcomes`` (how an app ended),
``commands`` (what the API asks), ``metrics`` (Prometheus), and the service's own parts
``service_requests``, ``service_reports``, ``service_halving``, ``service_status`` and
``service_inventory`` (their shared state declared in ``service_base``). This module holds
the state, admits apps and runs rounds.

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
from themis.fairness.ftf import posthoc_rho
from themis.mechanism.books import ViewBooks
from themis.mechanism.checks import check_schedule
from themis.mechanism.diff import stopping
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies import make_policy
from themis.runtime.loop.commands import CommandQueue
from themis.runtime.loop.halving import next_stop
from themis.runtime.loop.halving_control import HalvingControl
from themis.runtime.loop.history import RhoHistory
from themis.runtime.loop.inventory_tracking import InventoryTracking
from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.job_reports import ReportHandling
from themis.runtime.loop.lease_book import LeaseClock, RuntimeView, grant_length
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.options import ServiceOptions
from themis.runtime.loop.outcomes import app_outcome
from themis.runtime.loop.requests import RequestHandling
from themis.runtime.loop.restart_cost import RestartCosts
from themis.runtime.loop.status import StatusReporting
from themis.runtime.state.store import StateLost, Store
from themis.runtime.state.tokens import new_token
from themis.runtime.workers import checkpoint
from themis.runtime.workers.jobs import RunningJob
from themis.runtime.workers.lease import TrialSpec
from themis.runtime.workers.ray_inventory import Inventory, read_inventory

#: The store's ``meta`` key of the options of the last arbiter started on it.
SERVE_META = "serve"
#: A trial's checkpoint under ``<storage>/<app>/<trial>/`` (``runtime.checkpoint``).
CHECKPOINT_NAME = "checkpoint.themis"
log = logging.getLogger("themis.runtime")
#: Ticks failing in a row after which the loop gives up (a fault of the arbiter itself,
#: not of one app's input: every tick fails the same way).
MAX_FAILING_TICKS = 100


class ArbiterService(
    RequestHandling, ReportHandling, HalvingControl, StatusReporting, InventoryTracking
):
    """The scheduling loop. Its concerns are split over mixins, one module each:
    ``service_requests`` (commands from the API), ``service_reports`` (what jobs report,
    job ends, grace kills), ``service_halving`` (rungs: park, promote, stop),
    ``service_status`` (status rows, metrics, liveness), ``service_inventory`` (nodes
    coming and going). This class holds the state and decides the rounds."""

    def __init__(
        self,
        store: Store,
        storage: Path,
        options: ServiceOptions,
        nodes: Callable[[], list[dict[str, Any]]],
        launcher: Any = None,
        metrics: ArbiterMetrics | None = None,
        commands: CommandQueue | None = None,
    ) -> None:
        if launcher is None:
            from themis.runtime.workers.jobs import Launcher

            launcher = Launcher(options.grace)
        self.store = store
        self.storage = Path(storage)
        self.options = options
        self.nodes = nodes
        self.jobs = JobControl(launcher)
        self.metrics = metrics if metrics is not None else ArbiterMetrics()
        self.commands = commands if commands is not None else CommandQueue()
        self.policy = make_policy(options.policy, options.policy_options())
        self.restart_costs = RestartCosts(
            options.restart_cost, cap=options.lease, interval=options.lease
        )
        # The books every view carries (``mechanism/books.py``): the runtime keeps no
        # record of what changed, so every app is read as changed each round.
        self.view_books = ViewBooks()
        self.epoch = store.epoch()
        self.inventory: Inventory = read_inventory(nodes())
        self.book = AppBook()
        self.rho_history = RhoHistory()  # for the dashboard (runtime.dashboard)
        self.clocks: dict[Key, LeaseClock] = {}
        self.submitted: list[str] = []
        self.rounds = 0
        self.started_wall = time.time()
        self.heartbeat = time.time()
        self.ray_error: str | None = None
        self.ray_down_since: float | None = None
        self.metrics.ray_up.set(1)
        self._job_tokens: dict[str, str] = {}
        self._checkpoint_secret = checkpoint.load_or_create_secret(store.state_dir)
        self._checkpoint_keys: dict[str, str] = {}
        self._now = 0.0
        self._last_inventory = time.time()
        self._last_status = 0.0
        self._round_due = True  # a restarted arbiter hands out GPUs at once
        self._tell_restart_cost()
        self._record_cluster()
        self._record_options()
        self._recover()

    # -- views kept for callers and tests -------------------------------------------------

    def now(self) -> float:
        return time.time() - self.epoch

    @property
    def cluster(self) -> Cluster | None:
        return self.inventory.cluster

    @property
    def apps(self) -> dict[str, LiveApp]:
        return self.book.apps

    @property
    def active(self) -> list[AppState]:
        """The live apps' scheduler state, in arrival order."""
        return self.book.active

    @property
    def running(self) -> dict[Key, RunningJob]:
        return self.jobs.running

    @property
    def draining(self) -> dict[Key, RunningJob]:
        return self.jobs.draining

    @property
    def pending(self) -> dict[Key, tuple[int, ...]]:
        return self.jobs.pending

    # -- start-up -------------------------------------------------------------------------

    def _record_options(self) -> None:
        """Keep the policy and knobs this arbiter runs with (``meta.serve``), so that
        ``themis replay`` can say what the recorded run was scheduled by."""
        options = self.options
        record = {
            "policy": options.policy,
            "lease": options.lease,
            "fairness_knob": options.fairness_knob,
            "batch_window": options.batch_window,
            "seed": options.seed,
            "knobs": dict(options.knobs),
        }
        self.store.set_meta(SERVE_META, json.dumps(record, sort_keys=True))

    def _recover(self) -> None:
        """Rebuild every app from the store; leases of a previous process are void (its
        job actors died with it), so their trials wait for the next round."""
        now = self.now()
        voided = self.store.void_leases()
        self.book = AppBook.rebuild(self.store, now)
        self.submitted = [row.app_id for row in self.store.apps(("submitted",))]
        message = "arbiter restarted: resuming from the store"
        if voided:
            message += f" ({voided} leases of the previous process void)"
        for app_id in self.apps:
            self.store.log(now, app_id, None, message)

    # -- the loop -------------------------------------------------------------------------

    def run(self, should_stop: Callable[[], bool], exit_when_done: bool = False) -> None:
        """Tick until ``should_stop``. A tick that raises is logged, counted in
        ``themis_loop_faults_total{where="tick"}`` and the loop goes on: one app's input
        must not stop the arbiter (issue 20). Lost state, and a fault repeated on every
        tick, stop it."""
        failing = 0
        while not should_stop():
            try:
                self.tick()
                failing = 0
            except StateLost:
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
        return not (self.active or self.jobs.draining or self.submitted or len(self.commands))

    def tick(self) -> None:
        self.store.check_file()  # a deleted or replaced database stops the arbiter
        now = self.now()
        self.heartbeat = time.time()
        self.metrics.heartbeat.set(self.heartbeat)
        needs_round, self._round_due = self._round_due, False
        needs_round = self._refresh_inventory(now) or needs_round
        needs_round = self._handle_commands(now) or needs_round
        needs_round = self._admit(now) or needs_round
        needs_round = self._collect(now) or needs_round
        self._enforce_grace()
        # Every GPU that really comes free leads to a round, whatever freed it (a job's
        # end, a drain or a kill, of a live app or of one cancelled or done).
        needs_round = self.jobs.take_freed() or needs_round
        needs_round = self._apply_halving(now) or needs_round
        self._hold_unstarted_leases(now)
        horizon = now + self.options.tick
        ending = any(
            j.until is not None and j.until <= horizon
            for a in self.active
            for j in a.running_jobs()
        )
        if (needs_round or ending) and self.active and self.cluster is not None:
            self._round(now)
        self._launch_ready()
        if time.time() - self._last_status >= self.options.status_every:
            self._write_status(now)

    # -- apps arriving and leaving --------------------------------------------------------

    def _admit(self, now: float) -> bool:
        cluster = self.cluster
        if cluster is None or not self.submitted:
            return False
        admitted = False
        for app_id in list(self.submitted):
            self.submitted.remove(app_id)
            row = self.store.app(app_id)
            if row is None or row.state != "submitted":
                continue
            spec = row.spec
            if spec.gpus_per_trial > cluster.size:
                reason = (
                    f"a trial needs {spec.gpus_per_trial} GPUs and the cluster has {cluster.size}"
                )
                self._fail_unadmitted(app_id, now, reason)
                continue
            try:
                trials = {t.trial_id: t.state for t in self.store.trials(app_id)}
                state = self.book.admit(row, trials, cluster, now).state
                self.store.update_app(
                    app_id, state="running", arrival=now, t_cluster=state.t_cluster
                )
            except StateLost:
                raise
            except Exception as exc:  # noqa: BLE001 (one app never stops the loop)
                log.exception("themis serve: admitting %r failed", app_id)
                self.metrics.faults.labels("admit").inc()
                if app_id in self.book.apps:  # admitted in memory: undo it
                    self.book.retire(self.book.apps[app_id].state, now)
                self._fail_unadmitted(app_id, now, f"could not be admitted: {_brief(exc)}")
                continue
            message = f"admitted: {spec.trials} trials, T_cluster {state.t_cluster:.1f}s"
            self.store.log(now, app_id, None, message)
            admitted = True
        return admitted

    def _fail_unadmitted(self, app_id: str, now: float, reason: str) -> None:
        for trial in self.store.trials(app_id):
            self.store.update_trial(app_id, trial.trial_id, state="failed", reason=reason)
        self.store.update_app(app_id, state="failed", finish=now, reason=reason)
        self.store.log(now, app_id, None, f"failed: {reason}")

    def _n_avg(self, app: AppState) -> float:
        return self.book.n_avg(app, self._now)

    def _app_done(self, live: LiveApp, now: float, state: str | None = None) -> None:
        app = live.state
        if state is None:
            halving = live.spec.halving
            outcome = app_outcome(
                live.trial_state,
                live.first_error,
                None if halving is None else halving.metric,
                live.metric_seen,
                live.reported,
            )
            state, reason = outcome.state, outcome.reason
        else:
            reason = state
        n_avg = self.book.retire(app, now)
        rho = posthoc_rho(app.arrival, now, app.t_cluster, n_avg)
        self.store.update_app(
            app.app_id,
            state=state,
            finish=now,
            n_avg=n_avg,
            rho=rho,
            gpus=0,
            reason=reason,
            note=None,
        )
        self.rho_history.add(app.app_id, time.time(), rho)
        message = f"{state} after {now - app.arrival:.1f}s, rho {rho:.3f}: {reason}"
        self.store.log(now, app.app_id, None, message)
        self.metrics.forget_app(app.app_id)

    # -- rounds ---------------------------------------------------------------------------

    def _round(self, now: float) -> None:
        cluster = self.cluster
        assert cluster is not None
        started = time.perf_counter()
        self._now = now
        self.rounds += 1
        view = RuntimeView(
            now,
            cluster,
            list(self.active),
            self._n_avg,
            self.options.batch_window,
            reserved=self.jobs.reserved(),
        )
        self._tell_restart_cost()
        schedule = self.policy.schedule(self.view_books.fill(view))
        check_schedule(schedule, self.active, cluster)
        for job in stopping(schedule, self.active):
            why = "lease ended" if view.ending(job) else "preempted"
            self._stop_job(job, now, "waiting", why)
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
                self._record_lease(job, now, renewed=True)
                self.metrics.renewed.inc()
            else:
                self._start_job(job, grant.gpus, now)
                self.clocks[key] = LeaseClock(grant_length(grant.until, now))
                job.until = grant.until
                self._record_lease(job, now, renewed=False)
                self.metrics.granted.inc()
        self.metrics.round_seconds.observe(time.perf_counter() - started)
        self.metrics.auction_figures(self.policy.report())

    def _tell_restart_cost(self) -> None:
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

    def _hold_unstarted_leases(self, now: float) -> None:
        """A granted job's lease does not run down before the job really runs."""
        for key, clock in self.clocks.items():
            if clock.started_at is not None or clock.length is None:
                continue
            live = self.apps.get(key[0])
            if live is not None:
                job = live.job(key[1])
                if job.gpus:
                    job.until = clock.hold(now)

    def _record_lease(self, job: JobState, now: float, renewed: bool) -> None:
        slots = [self.inventory.slots[g] for g in job.gpus]
        self.store.set_lease(job.app.app_id, job.job_id, slots, now, job.until)
        if renewed:
            until = "open" if job.until is None else f"{job.until:.1f}"
            self.store.log(now, job.app.app_id, job.job_id, f"lease renewed until {until}")

    def _start_job(self, job: JobState, gpus: tuple[int, ...], now: float) -> None:
        cluster = self.cluster
        assert cluster is not None
        gpus = tuple(sorted(gpus))
        job.start(gpus, job.app.profile.speed(len(gpus), cluster.span(gpus)), now)
        live = self.apps[job.app.app_id]
        key = (job.app.app_id, job.job_id)
        live.trial_state[job.job_id] = "running"
        self.jobs.grant(key, gpus)
        nodes = ", ".join(f"{n[:8]}x{c}" for n, c in self.inventory.per_node(gpus))
        self.store.log(
            now, key[0], key[1], f"granted GPUs {list(gpus)} ({nodes}) from step {int(job.done)}"
        )

    def _launch_ready(self) -> None:
        """Start the actors of granted trials whose GPUs are really free."""
        for key in self.jobs.launch_ready(self._trial_spec, self.inventory.per_node):
            self.store.update_trial(key[0], key[1], starts=self._starts(key) + 1)

    def _trial_spec(self, key: Key, gpus: tuple[int, ...]) -> TrialSpec:
        live = self.apps[key[0]]
        spec = live.spec
        placement = self.inventory.per_node(gpus)
        return TrialSpec(
            key[0],
            key[1],
            self._token_for(key[0]),
            spec.entrypoint,
            spec.workdir,
            dict(spec.configs[live.index(key[1])]),
            spec.steps,
            str(self.storage / key[0] / key[1] / CHECKPOINT_NAME),
            spec.checkpoint_every,
            tuple(placement),
            next_stop(spec.halving, spec.steps, live.durable.get(key[1], 0), live.decided),
            master_addr=self.inventory.address(placement[0][0]),
            rank_per_gpu=spec.ranks == "gpu",
            checkpoint_key=self.checkpoint_key(key[0]),
        )

    def checkpoint_key(self, app_id: str) -> str:
        """The key that seals this app's checkpoints (``runtime.checkpoint``): handed to
        its jobs only, the same across restarts of the arbiter."""
        key = self._checkpoint_keys.get(app_id)
        if key is None:
            row = self.store.app(app_id)
            if row is None:
                raise KeyError(app_id)
            key = checkpoint.app_key(self._checkpoint_secret, app_id, row.submitted_at)
            self._checkpoint_keys[app_id] = key
        return key

    def _starts(self, key: Key) -> int:
        for trial in self.store.trials(key[0]):
            if trial.trial_id == key[1]:
                return trial.starts
        return 0

    def _token_for(self, app_id: str) -> str:
        """The credential this app's job actors report with.

        The app's own token is known only to its submitter (the store keeps its hash), so
        its jobs get one of their own: random, per app and per arbiter process, kept in
        memory only. Job actors die with the arbiter process that started them, so a
        restarted arbiter never needs an old one."""
        token = self._job_tokens.get(app_id)
        if token is None:
            token = self._job_tokens[app_id] = new_token()
        return token

    def _stop_job(self, job: JobState, now: float, trial_state: str, why: str) -> None:
        """End a job's lease: the model stops its progress now; its actor checkpoints
        and returns (or is killed after the grace period), and until then its GPUs stay
        reserved (``JobControl.reserved``)."""
        cluster = self.cluster
        assert cluster is not None
        key = (job.app.app_id, job.job_id)
        best = cluster.span(job.gpus) <= cluster.best_span(job.gang)
        job.stop(now, best)
        live = self.apps[key[0]]
        # Until its last checkpoint is reported, the job has done what the store holds.
        job.done = float(min(job.spec.work, live.durable.get(key[1], 0)))
        job.app.touch()
        self._set_trial_state(live, key[1], trial_state)
        self.store.drop_lease(*key)
        self.clocks.pop(key, None)
        self.jobs.stop(key)
        self.store.log(now, key[0], key[1], f"{why}: checkpoint and stop")

    def _set_trial_state(self, live: LiveApp, trial_id: str, state: str) -> None:
        live.trial_state[trial_id] = state
        self.store.update_trial(live.spec.name, trial_id, state=state)

    def _release_trial(self, job: JobState, now: float) -> tuple[str, str]:
        """Take a trial off its GPUs in the books (lease and lease clock gone); returns its
        (app, trial) key. Finishing and parking at a rung both start here."""
        cluster = self.cluster
        key = (job.app.app_id, job.job_id)
        if job.gpus and cluster is not None:
            job.stop(now, cluster.span(job.gpus) <= cluster.best_span(job.gang))
        self.store.drop_lease(*key)
        self.clocks.pop(key, None)
        return key

    def _finish_trial(self, live: LiveApp, job: JobState, now: float, state: str, why: str) -> None:
        key = self._release_trial(job, now)
        self.jobs.stop(key)
        job.finish(now)
        self._set_trial_state(live, job.job_id, state)
        self.store.update_trial(key[0], key[1], reason=why, attained=job.attained)
        self.store.log(now, key[0], key[1], why)
        if live.over():
            self._app_done(live, now)

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Checkpoint every job (killing those that ignore it after the grace period)
        and leave the store ready for the next start."""
        if self.store.lost:  # nothing can be recorded: end every job, write nothing
            for rj in [*self.jobs.running.values(), *self.jobs.draining.values()]:
                self.jobs.kill(rj)
            return
        now = self.now()
        for app in list(self.active):
            for job in app.running_jobs():
                self._stop_job(job, now, "waiting", "arbiter shutting down")
        self.jobs.pending.clear()
        deadline = time.time() + self.options.grace
        while self.jobs.draining and time.time() < deadline:
            self._collect(self.now())
            time.sleep(self.options.tick)
        for rj in list(self.jobs.draining.values()):
            self.jobs.kill(rj)
        self.store.void_leases()
        for app in self.active:
            self.store.update_app(app.app_id, gpus=0)


def _brief(exc: BaseException) -> str:
    """An exception as one short line, for an app's reason."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
