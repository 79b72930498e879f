"""``themis serve``: the simulator's mechanism, driven by the wall clock and real jobs.

Every tick the service (1) admits submitted apps and answers CLI requests from the store,
(2) collects job progress and lease ends from Ray, (3) applies successive halving, (4)
re-reads the GPU inventory, and (5) when GPUs come up for grabs — a lease ends, a job
ends, an app arrives, a node comes or goes — runs one policy round exactly as the
simulator does: it builds a :class:`SchedulingView` of the live ``AppState``s, calls
``policy.schedule(view)``, checks the schedule and applies it (``Simulator._apply``): jobs
no longer listed, or moved, are stopped; renewed ones keep running; new ones start.

Time is seconds since the store's epoch (fixed at first start), so arrival and finish
times, attained service and the time-averaged number of active apps keep their meaning
across restarts; the time the arbiter was down counts as time the apps waited.

Stopping is cooperative: the job is asked to checkpoint and return, and killed after a
grace period. A trial is never started twice at once: a restart granted while its last
run still checkpoints waits for that run to end (its GPUs are already reserved).
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
from themis.fairness.ftf import posthoc_rho
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.policies import PolicyOptions, Schedule, SchedulingView, make_policy
from themis.runtime.cluster import Inventory, read_inventory
from themis.runtime.halving import ENDED, next_stop, review
from themis.runtime.jobs import Launcher, RunningJob
from themis.runtime.lease import Outcome, Progress, TrialSpec
from themis.runtime.live import AppBook, LiveApp
from themis.runtime.store import RequestRow, Store
from themis.runtime.tokens import new_token, token_matches
from themis.simulator.engine import DEFAULT_BATCH_WINDOW

Key = tuple[str, str]  # (app id, trial id)


_POLICY = PolicyOptions()


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

    def policy_options(self) -> PolicyOptions:
        return PolicyOptions(lease=self.lease, fairness_knob=self.fairness_knob, seed=self.seed)


class ArbiterService:
    def __init__(
        self,
        store: Store,
        storage: Path,
        options: ServiceOptions,
        nodes: Callable[[], list[dict[str, Any]]],
        launcher: Launcher | None = None,
    ) -> None:
        self.store = store
        self.storage = Path(storage)
        self.options = options
        self.nodes = nodes
        self.launcher = launcher or Launcher(options.grace)
        self.policy = make_policy(options.policy, options.policy_options())
        self.epoch = store.epoch()
        self.inventory: Inventory = read_inventory(nodes())
        self.book = AppBook()
        self.running: dict[Key, RunningJob] = {}
        self.draining: dict[Key, RunningJob] = {}
        self.pending: dict[Key, tuple[int, ...]] = {}
        self.rounds = 0
        self._job_tokens: dict[str, str] = {}
        self._now = 0.0
        self._last_inventory = time.time()
        self._last_status = 0.0
        self._round_due = True  # a restarted arbiter hands out GPUs at once
        self._recover()

    # -- clock ----------------------------------------------------------------------------

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

    # -- start-up -------------------------------------------------------------------------

    def _recover(self) -> None:
        """Rebuild every app from the store; leases of a previous process are void (its
        job actors died with it), so their trials wait for the next round."""
        now = self.now()
        voided = self.store.void_leases()
        self.book = AppBook.rebuild(self.store, now)
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
            time.sleep(self.options.tick)

    def idle(self) -> bool:
        """Nothing to do: no app submitted or running, no job left in Ray."""
        return (
            not self.active
            and not self.draining
            and not self.store.apps(("submitted",))
            and not self.store.pending_requests()
        )

    def tick(self) -> None:
        now = self.now()
        needs_round, self._round_due = self._round_due, False
        needs_round = self._refresh_inventory(now) or needs_round
        needs_round = self._handle_requests(now) or needs_round
        needs_round = self._admit(now) or needs_round
        needs_round = self._collect(now) or needs_round
        needs_round = self._enforce_grace() or needs_round
        needs_round = self._apply_halving(now) or needs_round
        horizon = now + self.options.tick
        ending = any(
            j.until is not None and j.until <= horizon
            for a in self.active
            for j in a.running_jobs()
        )
        if (needs_round or ending) and self.active and self.cluster is not None:
            self._round(now)
        self._launch_pending()
        if time.time() - self._last_status >= self.options.status_every:
            self._write_status(now)

    # -- requests from the CLI ------------------------------------------------------------

    def _handle_requests(self, now: float) -> bool:
        changed = False
        for req in self.store.pending_requests():
            changed = self._answer(req, now) or changed
        return changed

    def _answer(self, req: RequestRow, now: float) -> bool:
        row = self.store.app(req.app_id)
        if row is None:
            self.store.answer(req.id, "refused", f"no app named '{req.app_id}'")
            return False
        if not token_matches(req.token, row.token_hash):
            self.store.answer(req.id, "refused", f"wrong token for app '{req.app_id}'")
            self.store.log(now, req.app_id, None, f"refused a {req.kind} request: wrong token")
            return False
        if row.state not in ("submitted", "running"):
            self.store.answer(req.id, "refused", f"app '{req.app_id}' is {row.state}")
            return False
        if req.kind == "cancel":
            self._cancel(req.app_id, now)
            self.store.answer(req.id, "done", f"cancelled app '{req.app_id}'")
            return True
        if req.kind == "release":
            trial_id = str(req.payload.get("trial", ""))
            key = (req.app_id, trial_id)
            live = self.apps.get(req.app_id)
            if live is None or key not in self.running:
                self.store.answer(req.id, "done", f"{trial_id} holds no GPUs")
                return False
            self._stop_job(live.job(trial_id), now, "waiting", "lease released by the app")
            self.store.answer(req.id, "done", f"released the lease of {trial_id}")
            return True
        self.store.answer(req.id, "refused", f"unknown request '{req.kind}'")
        return False

    # -- apps arriving and leaving --------------------------------------------------------

    def _admit(self, now: float) -> bool:
        cluster = self.cluster
        if cluster is None:
            return False
        admitted = False
        for row in self.store.apps(("submitted",)):
            spec = row.spec
            if spec.gpus_per_trial > cluster.size:
                self.store.update_app(row.app_id, state="rejected", finish=now)
                self.store.log(
                    now,
                    row.app_id,
                    None,
                    f"rejected: a trial needs {spec.gpus_per_trial} GPUs, "
                    f"the cluster has {cluster.size}",
                )
                continue
            trials = {t.trial_id: t.state for t in self.store.trials(row.app_id)}
            state = self.book.admit(row, trials, cluster, now).state
            self.store.update_app(
                row.app_id, state="running", arrival=now, t_cluster=state.t_cluster
            )
            message = f"admitted: {spec.trials} trials, T_cluster {state.t_cluster:.1f}s"
            self.store.log(now, row.app_id, None, message)
            admitted = True
        return admitted

    def _n_avg(self, app: AppState) -> float:
        return self.book.n_avg(app, self._now)

    def _app_done(self, app: AppState, now: float, state: str = "finished") -> None:
        n_avg = self.book.retire(app, now)
        rho = posthoc_rho(app.arrival, now, app.t_cluster, n_avg)
        self.store.update_app(app.app_id, state=state, finish=now, n_avg=n_avg, rho=rho, gpus=0)
        message = f"{state} after {now - app.arrival:.1f}s, rho {rho:.3f}"
        self.store.log(now, app.app_id, None, message)

    def _cancel(self, app_id: str, now: float) -> None:
        live = self.apps.get(app_id)
        if live is None:  # submitted, not admitted yet
            for trial in self.store.trials(app_id):
                self.store.update_trial(app_id, trial.trial_id, state="cancelled")
            self.store.update_app(app_id, state="cancelled", finish=now)
            return
        for job in live.state.jobs:
            if live.trial_state.get(job.job_id) in ENDED:
                continue
            if job.gpus:
                self._stop_job(job, now, "cancelled", "app cancelled")
            self.pending.pop((app_id, job.job_id), None)
            self._set_trial_state(live, job.job_id, "cancelled")
            job.finish(now)
        self._app_done(live.state, now, "cancelled")

    # -- rounds ---------------------------------------------------------------------------

    def _round(self, now: float) -> None:
        cluster = self.cluster
        assert cluster is not None
        self._now = now
        self.rounds += 1
        window = self.options.batch_window
        view = SchedulingView(now, cluster, list(self.active), self._n_avg, window)
        schedule = self.policy.schedule(view)
        check_schedule(schedule, self.active, cluster)
        for app in self.active:
            for job in app.running_jobs():
                grant = schedule.get(job)
                if grant is None or grant.gpus != job.gpus:
                    why = "lease ended" if view.ending(job) else "preempted"
                    self._stop_job(job, now, "waiting", why)
        for job, grant in schedule.items():
            if job.gpus:
                job.until = grant.until
                self._record_lease(job, now, renewed=True)
            else:
                self._start_job(job, grant.gpus, now)
                job.until = grant.until
                self._record_lease(job, now, renewed=False)

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
        self.pending[key] = gpus
        nodes = ", ".join(f"{n[:8]}x{c}" for n, c in self.inventory.per_node(gpus))
        self.store.log(
            now, key[0], key[1], f"granted GPUs {list(gpus)} ({nodes}) from step {int(job.done)}"
        )

    def _launch_pending(self) -> None:
        """Start the actors of granted trials whose previous run has ended."""
        for key, gpus in list(self.pending.items()):
            if key in self.draining:
                continue
            del self.pending[key]
            live = self.apps[key[0]]
            spec = live.spec
            trial = TrialSpec(
                key[0],
                key[1],
                self._token_for(key[0]),
                spec.entrypoint,
                spec.workdir,
                dict(spec.configs[live.index(key[1])]),
                spec.steps,
                str(self.storage / key[0] / key[1] / "checkpoint.pkl"),
                spec.checkpoint_every,
                tuple(self.inventory.per_node(gpus)),
                next_stop(spec.halving, spec.steps, live.durable.get(key[1], 0), live.decided),
            )
            self.running[key] = self.launcher.start(trial, self.inventory.per_node(gpus))
            self.store.update_trial(key[0], key[1], starts=self._starts(key) + 1)

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
        """End a job's lease: the model frees its GPUs now, its actor checkpoints and
        returns (or is killed after the grace period)."""
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
        self.pending.pop(key, None)
        running = self.running.pop(key, None)
        if running is not None:
            self.launcher.stop(running, time.time())
            self.draining[key] = running
        self.store.log(now, key[0], key[1], f"{why}: checkpoint and stop")

    def _set_trial_state(self, live: LiveApp, trial_id: str, state: str) -> None:
        live.trial_state[trial_id] = state
        self.store.update_trial(live.spec.name, trial_id, state=state)

    # -- what jobs report -----------------------------------------------------------------

    def accept_report(self, job: RunningJob, report: Progress | Outcome) -> bool:
        """A report counts only if it carries its app's token and names the trial the
        job was started for: an app reports (and so bids, through its progress) only for
        itself."""
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
        jobs = [*self.running.values(), *self.draining.values()]
        for job, progress in self.launcher.collect_polls(jobs):
            if job.app_id in self.apps and self.accept_report(job, progress):
                changed = self._on_progress(job, progress, now) or changed
        for job, outcome, why in self.launcher.collect_ends(jobs):
            if job.app_id not in self.apps:
                self._forget(job)
                continue
            if outcome is not None:
                if not self.accept_report(job, outcome):
                    outcome, why = None, "report refused"
                else:
                    changed = self._on_progress(job, outcome.last, now) or changed
            changed = self._on_end(job, outcome, why, now) or changed
        self.launcher.request_polls(jobs)
        return changed

    def _forget(self, rj: RunningJob) -> None:
        """Drop a job whose app has ended (cancelled): nothing it says matters now."""
        if self.running.get(rj.key) is rj:
            del self.running[rj.key]
        if self.draining.get(rj.key) is rj:
            del self.draining[rj.key]
        self.launcher.release(rj)

    def _on_progress(self, rj: RunningJob, p: Progress, now: float) -> bool:
        live = self.apps.get(rj.app_id)
        if live is None:
            return False
        rj.steps = max(rj.steps, p.steps)
        self._record_checkpoint(live, rj, p.checkpoint_step)
        job = live.job(rj.trial_id)
        if self.running.get(rj.key) is rj and job.gpus and self.cluster is not None:
            best = self.cluster.span(job.gpus) <= self.cluster.best_span(job.gang)
            job.advance(now, best)
            job.done = float(min(job.spec.work, p.steps))
        for line in p.logs:
            self.store.log(now, rj.app_id, rj.trial_id, line)
        halving = live.spec.halving
        if halving is None:
            return False
        recorded = False
        for steps, metrics in p.reports:
            value = metrics.get(halving.metric)
            if value is None:
                continue
            for rung in halving.rungs(live.spec.steps):
                if steps >= rung and rj.trial_id not in live.rungs.get(rung, {}):
                    live.rungs.setdefault(rung, {})[rj.trial_id] = value
                    self.store.add_rung(rj.app_id, rj.trial_id, rung, value)
                    recorded = True
        return recorded

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
        self._forget(rj)
        live = self.apps.get(rj.app_id)
        if live is None:
            return False
        if outcome is not None:
            self._record_checkpoint(live, rj, outcome.checkpoint_step)
        job = live.job(rj.trial_id)
        state = live.trial_state.get(rj.trial_id)
        if state in ENDED:
            return False
        if outcome is not None and outcome.status == "done":
            if live.spec.halving is not None and outcome.steps < live.spec.steps:
                self._park(live, job, outcome.steps, now)
            else:
                self._finish_trial(live, job, now, "finished", f"done after {outcome.steps} steps")
            return True
        if outcome is not None and outcome.status == "error":
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
        return False

    def _park(self, live: LiveApp, job: JobState, steps: int, now: float) -> None:
        """Pause a trial at a successive-halving rung: it gives its GPUs back and is no
        demand of its app until the rung is decided (the scheduler sees it as ended)."""
        cluster = self.cluster
        key = (job.app.app_id, job.job_id)
        if job.gpus and cluster is not None:
            job.stop(now, cluster.span(job.gpus) <= cluster.best_span(job.gang))
        self.store.drop_lease(*key)
        self.pending.pop(key, None)
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
        self.pending.pop(key, None)
        running = self.running.pop(key, None)
        if running is not None:
            self.launcher.stop(running, time.time())
            self.draining[key] = running
        job.finish(now)
        self._set_trial_state(live, job.job_id, state)
        self.store.update_trial(key[0], key[1], reason=why, attained=job.attained)
        self.store.log(now, key[0], key[1], why)
        if live.over():
            self._app_done(job.app, now)

    def _enforce_grace(self) -> bool:
        wall = time.time()
        for rj in list(self.draining.values()):
            if rj.kill_at is not None and wall >= rj.kill_at and not rj.killed:
                self.launcher.kill(rj)
                self.store.log(
                    self.now(), rj.app_id, rj.trial_id, "ignored its lease end: killed after grace"
                )
        return False

    # -- successive halving ---------------------------------------------------------------

    def _apply_halving(self, now: float) -> bool:
        changed = False
        for live in list(self.apps.values()):
            halving = live.spec.halving
            if halving is None:
                continue
            trials = [j.job_id for j in live.state.jobs]
            verdict = review(
                halving, live.spec.steps, trials, live.trial_state, live.durable, live.rungs
            )
            live.decided = verdict.decided
            for trial_id, why in verdict.stop:
                if live.spec.name in self.apps:
                    self._finish_trial(live, live.job(trial_id), now, "stopped", why)
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
        fresh = read_inventory(self.nodes())
        if fresh.slots == self.inventory.slots:
            return False
        old = self.inventory
        index = fresh.index()
        for app in list(self.active):
            for job in app.running_jobs():
                slots = [old.slots[g] for g in job.gpus]
                if all(s in index for s in slots):
                    continue
                key = (app.app_id, job.job_id)
                rj = self.running.get(key)
                self._stop_job(job, now, "waiting", "node lost")
                if rj is not None:
                    self.launcher.kill(rj)
        remap = {g: index[s] for g, s in enumerate(old.slots) if s in index}
        for app in self.active:
            for job in app.running_jobs():
                job.gpus = tuple(sorted(remap[g] for g in job.gpus))
            app.touch()
        self.pending = {
            k: tuple(sorted(remap[g] for g in gpus))
            for k, gpus in self.pending.items()
            if all(g in remap for g in gpus)
        }
        self.inventory = fresh
        size = 0 if fresh.cluster is None else fresh.cluster.size
        for app_id in self.apps:
            self.store.log(now, app_id, None, f"cluster changed: {size} GPUs")
        return True

    # -- status ---------------------------------------------------------------------------

    def _write_status(self, now: float) -> None:
        self._last_status = time.time()
        cluster = self.cluster
        if cluster is None:
            return
        self._now = now
        for app in self.active:
            rho = Agent(app, cluster).rho_with(now, self._n_avg(app), app.held())
            self.store.update_app(app.app_id, rho=rho, gpus=len(app.held()))

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Checkpoint every job (killing those that ignore it after the grace period)
        and leave the store ready for the next start."""
        now = self.now()
        for app in list(self.active):
            for job in app.running_jobs():
                self._stop_job(job, now, "waiting", "arbiter shutting down")
        self.pending.clear()
        deadline = time.time() + self.options.grace
        while self.draining and time.time() < deadline:
            self._collect(self.now())
            time.sleep(self.options.tick)
        for rj in list(self.draining.values()):
            self.launcher.kill(rj)
        self.store.void_leases()
        for app in self.active:
            self.store.update_app(app.app_id, gpus=0)


def check_schedule(schedule: Schedule, active: list[AppState], cluster: Cluster) -> None:
    """A policy that breaks the rules is a bug, never silently repaired (as in the
    simulator): no GPU twice, exact gangs, only live jobs of active apps."""
    seen: set[int] = set()
    ids = {id(a) for a in active}
    for job, grant in schedule.items():
        if job.finished_at is not None or id(job.app) not in ids:
            raise AssertionError(f"policy scheduled {job.job_id}, which cannot run")
        if len(grant.gpus) != job.gang:
            raise AssertionError(
                f"policy gave {job.job_id} {len(grant.gpus)} GPUs for a gang of {job.gang}"
            )
        for g in grant.gpus:
            if not 0 <= g < cluster.size or g in seen:
                raise AssertionError(f"policy granted GPU {g} twice or out of range")
            seen.add(g)
