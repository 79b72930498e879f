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
``commands`` (what the API asks), ``metrics`` (Prometheus). This module decides.

Progress counts as done only once checkpointed (``trials.steps_done``), so a crash of a
job, of a node or of the arbiter loses no completed step.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.agent.agent import Agent
from themis.errors import ThemisError
from themis.fairness.ftf import RHO_MAX, posthoc_rho
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies import PolicyOptions, make_policy
from themis.runtime import rungs
from themis.runtime.cluster import Inventory, read_inventory
from themis.runtime.commands import Command, CommandQueue
from themis.runtime.halving import ENDED, STOPPED_EARLY, next_stop
from themis.runtime.job_control import JobControl, Key
from themis.runtime.jobs import RunningJob
from themis.runtime.lease import Outcome, Progress, TrialSpec
from themis.runtime.lease_book import LeaseClock, RuntimeView, grant_length
from themis.runtime.live import AppBook, LiveApp
from themis.runtime.metrics import ArbiterMetrics
from themis.runtime.outcomes import app_outcome
from themis.runtime.store import Store
from themis.runtime.tokens import new_token
from themis.simulator.engine import DEFAULT_BATCH_WINDOW, check_schedule

_POLICY = PolicyOptions()
#: What one poll may add to the event log: longer lines and further lines are cut.
MAX_LOG_LINE = 4000
MAX_LOG_LINES = 50


@dataclass(frozen=True)
class ServiceOptions:
    """Knobs of the service. The policy's defaults are the simulator's (real jobs run for
    minutes to hours); tests shrink them to seconds."""

    policy: str = "themis"
    lease: float = _POLICY.lease
    fairness_knob: float = _POLICY.fairness_knob
    batch_window: float = DEFAULT_BATCH_WINDOW
    grace: float = 30.0
    tick: float = 0.2
    inventory_every: float = 2.0
    status_every: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        # A grace as long as the lease lets a job that ignores its lease end hold its
        # GPUs for a whole second lease: the livelock of issue 12.
        if not self.grace < self.lease:
            raise ThemisError(
                f"--grace ({self.grace:g}s) must be shorter than --lease ({self.lease:g}s)",
                field="--grace",
            )

    def policy_options(self) -> PolicyOptions:
        return PolicyOptions(lease=self.lease, fairness_knob=self.fairness_knob, seed=self.seed)


class ArbiterService:
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
            from themis.runtime.jobs import Launcher

            launcher = Launcher(options.grace)
        self.store = store
        self.storage = Path(storage)
        self.options = options
        self.nodes = nodes
        self.jobs = JobControl(launcher)
        self.metrics = metrics if metrics is not None else ArbiterMetrics()
        self.commands = commands if commands is not None else CommandQueue()
        self.policy = make_policy(options.policy, options.policy_options())
        self.epoch = store.epoch()
        self.inventory: Inventory = read_inventory(nodes())
        self.book = AppBook()
        self.clocks: dict[Key, LeaseClock] = {}
        self.submitted: list[str] = []
        self.rounds = 0
        self.started_wall = time.time()
        self.heartbeat = time.time()
        self.ray_error: str | None = None
        self._job_tokens: dict[str, str] = {}
        self._now = 0.0
        self._last_inventory = time.time()
        self._last_status = 0.0
        self._round_due = True  # a restarted arbiter hands out GPUs at once
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
        while not should_stop():
            self.tick()
            if exit_when_done and self.idle():
                return
            self.commands.wait(self.options.tick)

    def idle(self) -> bool:
        """Nothing to do: no app submitted or running, no job left in Ray."""
        return not (self.active or self.jobs.draining or self.submitted or len(self.commands))

    def tick(self) -> None:
        now = self.now()
        self.heartbeat = time.time()
        self.metrics.heartbeat.set(self.heartbeat)
        needs_round, self._round_due = self._round_due, False
        needs_round = self._refresh_inventory(now) or needs_round
        needs_round = self._handle_commands(now) or needs_round
        needs_round = self._admit(now) or needs_round
        needs_round = self._collect(now) or needs_round
        self._enforce_grace()
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

    # -- commands from the API ------------------------------------------------------------

    def _handle_commands(self, now: float) -> bool:
        changed = False
        for command in self.commands.drain():
            try:
                changed = self._answer(command, now) or changed
            except ThemisError as exc:
                command.refuse(exc.format())
        return changed

    def _answer(self, command: Command, now: float) -> bool:
        if command.kind == "submit":
            return self._submit(command, now)
        row = self.store.app(command.app_id)
        if row is None:
            raise ThemisError(f"no app named '{command.app_id}'")
        if row.state not in ("submitted", "running"):
            raise ThemisError(f"app '{command.app_id}' is {row.state}")
        if command.kind == "cancel":
            self._cancel(command.app_id, now)
            command.answer(f"cancelled app '{command.app_id}'")
            return True
        if command.kind == "release":
            trial_id = str(command.payload.get("trial", ""))
            live = self.apps.get(command.app_id)
            if live is None or (command.app_id, trial_id) not in self.jobs.running:
                command.answer(f"{trial_id} holds no GPUs")
                return False
            self._stop_job(live.job(trial_id), now, "waiting", "lease released by the app")
            command.answer(f"released the lease of {trial_id}")
            return True
        raise ThemisError(f"unknown request '{command.kind}'")

    def _submit(self, command: Command, now: float) -> bool:
        app = command.payload["app"]
        cluster = self.cluster
        if cluster is not None and app.gpus_per_trial > cluster.size:
            raise ThemisError(
                f"a trial needs {app.gpus_per_trial} GPUs and the cluster has "
                f"{cluster.size}: it could never run",
                source=command.payload.get("source"),
                field="gpus_per_trial",
            )
        self.store.add_app(app, command.payload["token_hash"], command.payload["source"])
        self.submitted.append(app.name)
        where = "waiting for the cluster's first GPU" if cluster is None else "admitted next"
        self.store.log(now, app.name, None, f"submitted: {app.trials} trials; {where}")
        command.answer({"app_id": app.name, "trials": app.trials})
        return True

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
                for trial in self.store.trials(app_id):
                    self.store.update_trial(app_id, trial.trial_id, state="failed", reason=reason)
                self.store.update_app(app_id, state="failed", finish=now, reason=reason)
                self.store.log(now, app_id, None, f"failed: {reason}")
                continue
            trials = {t.trial_id: t.state for t in self.store.trials(app_id)}
            state = self.book.admit(row, trials, cluster, now).state
            self.store.update_app(app_id, state="running", arrival=now, t_cluster=state.t_cluster)
            message = f"admitted: {spec.trials} trials, T_cluster {state.t_cluster:.1f}s"
            self.store.log(now, app_id, None, message)
            admitted = True
        return admitted

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
        message = f"{state} after {now - app.arrival:.1f}s, rho {rho:.3f}: {reason}"
        self.store.log(now, app.app_id, None, message)
        self.metrics.forget_app(app.app_id)

    def _cancel(self, app_id: str, now: float) -> None:
        live = self.apps.get(app_id)
        if live is None:  # submitted, not admitted yet
            if app_id in self.submitted:
                self.submitted.remove(app_id)
            for trial in self.store.trials(app_id):
                self.store.update_trial(app_id, trial.trial_id, state="cancelled")
            self.store.update_app(app_id, state="cancelled", finish=now, reason="cancelled")
            self.store.log(now, app_id, None, "cancelled before admission")
            return
        for job in live.state.jobs:
            if live.trial_state.get(job.job_id) in ENDED:
                continue
            if job.gpus:
                self._stop_job(job, now, "cancelled", "app cancelled")
            self.jobs.pending.pop((app_id, job.job_id), None)
            self._set_trial_state(live, job.job_id, "cancelled")
            job.finish(now)
        self._app_done(live, now, "cancelled")

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
        schedule = self.policy.schedule(view)
        check_schedule(schedule, self.active, cluster)
        for app in self.active:
            for job in app.running_jobs():
                grant = schedule.get(job)
                if grant is None or grant.gpus != job.gpus:
                    why = "lease ended" if view.ending(job) else "preempted"
                    self._stop_job(job, now, "waiting", why)
                    self.metrics.preempted.inc()
        for job, grant in schedule.items():
            key = (job.app.app_id, job.job_id)
            if job.gpus:
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
            str(self.storage / key[0] / key[1] / "checkpoint.pkl"),
            spec.checkpoint_every,
            tuple(placement),
            next_stop(spec.halving, spec.steps, live.durable.get(key[1], 0), live.decided),
            master_addr=self.inventory.address(placement[0][0]),
        )

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

    # -- what jobs report -----------------------------------------------------------------

    def accept_report(self, job: RunningJob, report: Progress | Outcome) -> bool:
        """A report counts only if it carries its app's job credential and names the
        trial the job was started for: an app reports (and so bids, through its
        progress) only for itself."""
        live = self.apps.get(report.app_id)
        ok = (
            live is not None
            and (report.app_id, report.trial_id) == job.key
            and report.app_id in self._job_tokens
            and hmac.compare_digest(report.token, self._job_tokens[report.app_id])
        )
        if not ok:
            self.store.log(
                self.now(),
                job.app_id,
                job.trial_id,
                f"refused a report for {report.app_id}/{report.trial_id}: wrong token or trial",
            )
        return ok

    def _collect(self, now: float) -> bool:
        changed = False
        jobs = self.jobs.jobs()
        launcher = self.jobs.launcher
        for job, progress in launcher.collect_polls(jobs):
            if job.app_id in self.apps and self.accept_report(job, progress):
                changed = self._on_progress(job, progress, now) or changed
        for job, outcome, why in launcher.collect_ends(jobs):
            if job.app_id not in self.apps:
                self.jobs.forget(job)
                continue
            if outcome is not None:
                if not self.accept_report(job, outcome):
                    outcome, why = None, "report refused"
                else:
                    changed = self._on_progress(job, outcome.last, now) or changed
            changed = self._on_end(job, outcome, why, now) or changed
        launcher.request_polls(self.jobs.jobs())
        return changed

    def _on_progress(self, rj: RunningJob, p: Progress, now: float) -> bool:
        live = self.apps.get(rj.app_id)
        if live is None:
            return False
        rj.steps = max(rj.steps, p.steps)
        self._record_checkpoint(live, rj, p.checkpoint_step)
        job = live.job(rj.trial_id)
        current = self.jobs.running.get(rj.key) is rj
        if current and p.started and not rj.started:
            rj.started = True
            clock = self.clocks.get(rj.key)
            if clock is not None and job.gpus:
                job.until = clock.start(now)
                slots = [self.inventory.slots[g] for g in job.gpus]
                self.store.set_lease(rj.app_id, rj.trial_id, slots, now, job.until)
                until = "open" if job.until is None else f"{job.until:.1f}"
                self.store.log(now, rj.app_id, rj.trial_id, f"started: lease until {until}")
        if current and job.gpus and self.cluster is not None:
            best = self.cluster.span(job.gpus) <= self.cluster.best_span(job.gang)
            job.advance(now, best)
            job.done = float(min(job.spec.work, p.steps))
        for k, line in enumerate(p.logs):
            if k == MAX_LOG_LINES:
                self.store.log(now, rj.app_id, rj.trial_id, f"[{len(p.logs) - k} lines cut]")
                break
            if len(line) > MAX_LOG_LINE:
                line = line[:MAX_LOG_LINE] + " [cut]"
            self.store.log(now, rj.app_id, rj.trial_id, line)
        return rungs.record(live, self.store, rj.trial_id, p.reports)

    def _record_checkpoint(self, live: LiveApp, rj: RunningJob, step: int) -> None:
        rj.checkpoint_step = max(rj.checkpoint_step, step)
        if step > live.durable.get(rj.trial_id, 0):
            live.durable[rj.trial_id] = step
            job = live.job(rj.trial_id)
            self.store.update_trial(
                rj.app_id,
                rj.trial_id,
                steps_done=step,
                attained=job.attained,
                checkpoint=rj.spec.checkpoint_path,
            )
            if not job.gpus and job.finished_at is None:
                job.done = float(min(job.spec.work, step))
                job.app.touch()

    def _on_end(self, rj: RunningJob, outcome: Outcome | None, why: str | None, now: float) -> bool:
        """A job has ended: its GPUs are free now (a round follows to hand them out)."""
        self.jobs.forget(rj)
        live = self.apps.get(rj.app_id)
        if live is None:
            return True
        if outcome is not None:
            self._record_checkpoint(live, rj, outcome.checkpoint_step)
        job = live.job(rj.trial_id)
        state = live.trial_state.get(rj.trial_id)
        if state in ENDED:
            return True
        if outcome is not None and outcome.status == "done":
            if live.spec.halving is not None and outcome.steps < live.spec.steps:
                self._park(live, job, outcome.steps, now)
            else:
                self._finish_trial(live, job, now, "finished", f"done after {outcome.steps} steps")
            return True
        if outcome is not None and outcome.status == "error":
            live.first_error = live.first_error or outcome.error
            self._finish_trial(live, job, now, "failed", f"failed: {outcome.error}")
            return True
        if rj.stop_sent is None:
            # Lost while it held its lease: killed, or its node died. It waits for GPUs
            # again and resumes from its last checkpoint.
            if job.gpus:
                self._stop_job(job, now, "waiting", f"job lost ({why})")
            return True
        if outcome is None:
            self.store.log(now, rj.app_id, rj.trial_id, f"stopped without a reply ({why})")
        return True

    def _park(self, live: LiveApp, job: JobState, steps: int, now: float) -> None:
        """Pause a trial at a successive-halving rung: it gives its GPUs back and is no
        demand of its app until the rung is decided (the scheduler sees it as ended)."""
        cluster = self.cluster
        key = (job.app.app_id, job.job_id)
        if job.gpus and cluster is not None:
            job.stop(now, cluster.span(job.gpus) <= cluster.best_span(job.gang))
        self.store.drop_lease(*key)
        self.clocks.pop(key, None)
        self.jobs.pending.pop(key, None)
        job.done = float(min(job.spec.work, steps))
        job.finished_at = now
        job.app.touch()
        self._set_trial_state(live, job.job_id, "parked")
        self.store.log(now, key[0], key[1], f"paused at step {steps}: waiting for its rung")

    def _unpark(self, live: LiveApp, job: JobState, now: float) -> None:
        job.finished_at = None
        job.done = float(min(job.spec.work, live.durable.get(job.job_id, 0)))
        job.updated_at = now
        job.app.touch()
        self._set_trial_state(live, job.job_id, "waiting")
        self.store.log(now, live.spec.name, job.job_id, "promoted to the next rung")

    def _finish_trial(self, live: LiveApp, job: JobState, now: float, state: str, why: str) -> None:
        cluster = self.cluster
        key = (job.app.app_id, job.job_id)
        if job.gpus and cluster is not None:
            job.stop(now, cluster.span(job.gpus) <= cluster.best_span(job.gang))
        self.store.drop_lease(*key)
        self.clocks.pop(key, None)
        self.jobs.stop(key)
        job.finish(now)
        self._set_trial_state(live, job.job_id, state)
        self.store.update_trial(key[0], key[1], reason=why, attained=job.attained)
        self.store.log(now, key[0], key[1], why)
        if live.over():
            self._app_done(live, now)

    def _enforce_grace(self) -> None:
        for rj in self.jobs.overdue():
            self.metrics.killed.inc()
            self.store.log(
                self.now(), rj.app_id, rj.trial_id, "ignored its lease end: killed after grace"
            )

    # -- successive halving ---------------------------------------------------------------

    def _apply_halving(self, now: float) -> bool:
        changed = False
        for live in list(self.apps.values()):
            verdict = rungs.verdict(live)
            if verdict is None:
                continue
            for trial_id, why in verdict.stop:
                if live.spec.name in self.apps:
                    state = "failed" if trial_id in verdict.silent else STOPPED_EARLY
                    self._finish_trial(live, live.job(trial_id), now, state, why)
                    changed = True
            if live.spec.name in self.apps:
                for trial_id in verdict.promote:
                    self._unpark(live, live.job(trial_id), now)
                    changed = True
        return changed

    # -- the inventory --------------------------------------------------------------------

    def _refresh_inventory(self, now: float) -> bool:
        if time.time() - self._last_inventory < self.options.inventory_every:
            return False
        self._last_inventory = time.time()
        try:
            nodes = self.nodes()
        except Exception as exc:  # Ray unreachable: keep going, say so in status
            if self.ray_error is None:
                for app_id in self.apps:
                    self.store.log(now, app_id, None, f"Ray unreachable: {exc}")
            self.ray_error = f"{type(exc).__name__}: {exc}"[:300]
            return False
        self.ray_error = None
        fresh = read_inventory(nodes)
        if fresh.slots == self.inventory.slots:
            return False
        old = self.inventory
        index = fresh.index()
        lost_nodes = {s[0] for s in old.slots if s not in index}
        for app in list(self.active):
            for job in app.running_jobs():
                slots = [old.slots[g] for g in job.gpus]
                if all(s in index for s in slots):
                    continue
                key = (app.app_id, job.job_id)
                rj = self.jobs.running.get(key)
                self._stop_job(job, now, "waiting", "node lost")
                if rj is not None:
                    self.jobs.kill(rj)
        for rj in list(self.jobs.draining.values()):
            if any(node in lost_nodes for node, _ in rj.spec.gang) and not rj.killed:
                self.jobs.kill(rj)
        remap = {g: index[s] for g, s in enumerate(old.slots) if s in index}
        for app in self.active:
            for job in app.running_jobs():
                job.gpus = tuple(sorted(remap[g] for g in job.gpus))
            app.touch()
        self.jobs.remap(remap)
        self.inventory = fresh
        size = 0 if fresh.cluster is None else fresh.cluster.size
        for app_id in self.apps:
            self.store.log(now, app_id, None, f"cluster changed: {size} GPUs")
        return True

    # -- status ---------------------------------------------------------------------------

    def _write_status(self, now: float) -> None:
        self._last_status = time.time()
        cluster = self.cluster
        self.metrics.queue.set(len(self.submitted))
        for app_id in self.submitted:
            note = "waiting for the cluster's first GPU" if cluster is None else "admitted next"
            self.store.update_app(app_id, note=note)
        if cluster is None:
            return
        self._now = now
        waiting = 0
        reserved = self.jobs.reserved()
        free = len(cluster.gpus) - len({g for a in self.active for g in a.held()} | reserved)
        for app in self.active:
            held = app.held()
            rho = Agent(app, cluster).rho_with(now, self._n_avg(app), held)
            live = self.apps[app.app_id]
            idle = [j for j in app.jobs if not j.gpus and j.finished_at is None]
            waiting += len(idle)
            self.store.update_app(
                app.app_id, rho=rho, gpus=len(held), note=self._why_idle(live, held, rho, free)
            )
            self.metrics.gpus.labels(app.app_id).set(len(held))
            self.metrics.rho.labels(app.app_id).set(min(rho, RHO_MAX))
        self.metrics.waiting.set(waiting)

    def _why_idle(self, live: LiveApp, held: tuple[int, ...], rho: float, free: int) -> str | None:
        """Why an app holds no GPU, in a few words (None when it holds some)."""
        if held:
            starting = sum(1 for k in self.jobs.pending if k[0] == live.app_id)
            return f"{starting} granted, waiting for GPUs to drain" if starting else None
        states = list(live.trial_state.values())
        if states and all(s in ("parked", *ENDED) for s in states):
            return "every live trial paused at a rung, waiting for its decision"
        if free:
            return f"waiting for the next round ({free} GPUs free)"
        return f"waiting: other apps hold every GPU until their leases end (rho {rho:.2f})"

    def snapshot(self) -> dict[str, Any]:
        """The loop's liveness, for ``status`` (read from the API thread)."""
        cluster = self.cluster
        return {
            "heartbeat": self.heartbeat,
            "started": self.started_wall,
            "rounds": self.rounds,
            "gpus": 0 if cluster is None else cluster.size,
            "machines": len(self.inventory.nodes),
            "ray_error": self.ray_error,
            "tick": self.options.tick,
        }

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Checkpoint every job (killing those that ignore it after the grace period)
        and leave the store ready for the next start."""
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
