"""What jobs report, and how they end.

Progress counts only from the job it was started as, with its app's job credential.
A job's first report that its function runs starts its lease's clock (``lease_book``);
checkpoints become durable progress; rung values go to ``rungs``. A job that ends frees
its GPUs and a round follows (``JobControl.take_freed``, whatever app the job was
of); a job past its grace is killed."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from themis.runtime.loop import rungs
from themis.runtime.loop.credentials import JobCredentials
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.halving import ENDED
from themis.runtime.loop.halving_control import HalvingControl
from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.lease_book import LeaseClock, lease_end_text
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.restart_cost import RestartCosts
from themis.runtime.loop.start_watch import StartWatch, resume_check
from themis.runtime.loop.trials import Trials
from themis.runtime.state.store import PRUNED, Store
from themis.runtime.workers.checkpoint import REFUSALS
from themis.runtime.workers.launcher import RunningJob
from themis.runtime.workers.lease import NOTE_CHARS, Outcome, Progress

#: How a tuner app's trial ends for good, its steps then all made (``_on_end``).
TUNER_ENDS = ("done", "pruned")


class ReportHandling:
    """Reports and ends of jobs."""

    def __init__(
        self,
        store: Store,
        book: AppBook,
        jobs: JobControl,
        clocks: dict[Key, LeaseClock],
        current: CurrentInventory,
        trials: Trials,
        halving: HalvingControl,
        credentials: JobCredentials,
        start_watch: StartWatch,
        restart_costs: RestartCosts | None,
        metrics: ArbiterMetrics,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.book = book
        self.jobs = jobs
        self.clocks = clocks
        self.current = current
        self.trials = trials
        self.halving = halving
        self.credentials = credentials
        self.start_watch = start_watch
        self.restart_costs = restart_costs  # None: restarts are not measured
        self.metrics = metrics
        self.now = clock

    def accept_report(self, job: RunningJob, report: Progress | Outcome) -> bool:
        """A report counts only if it carries its app's job credential and names the
        trial the job was started for: an app reports (and so bids, through its
        progress) only for itself."""
        live = self.book.apps.get(report.app_id)
        ok = (
            live is not None
            and (report.app_id, report.trial_id) == job.key
            and self.credentials.accepts(report.app_id, report.token)
        )
        if not ok:
            self.store.log(
                self.now(),
                job.app_id,
                job.trial_id,
                f"refused a report for {report.app_id}/{report.trial_id}: wrong token or trial",
            )
            return False
        problem = _out_of_range(report, job.spec.budget)
        if problem is not None:
            self.store.log(
                self.now(),
                job.app_id,
                job.trial_id,
                f"refused a report for {report.app_id}/{report.trial_id}: out of range ({problem})",
            )
            return False
        return True

    def collect(self, now: float) -> bool:
        """Take in every job's progress and every job end; True if a round is due."""
        changed = False
        jobs = self.jobs.jobs()
        launcher = self.jobs.launcher
        for job, progress in launcher.collect_polls(jobs):
            if job.app_id in self.book.apps and self.accept_report(job, progress):
                changed = self._on_progress(job, progress, now) or changed
        for job, outcome, why in launcher.collect_ends(jobs):
            if job.app_id not in self.book.apps:
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
        live = self.book.apps.get(rj.app_id)
        if live is None:
            return False
        rj.steps = max(rj.steps, p.steps)
        self._record_checkpoint(live, rj, p.checkpoint_step)
        job = live.job(rj.trial_id)
        current = self.jobs.running.get(rj.key) is rj
        if current and p.started and not rj.started:
            rj.started = True
            if self.restart_costs is not None:  # launch to its function running
                self.restart_costs.started(rj.app_id, time.time() - rj.started_wall)
            self.start_watch.started(rj.key)
            resume_check(live, rj, p, now, self.store, self.metrics)
            clock = self.clocks.get(rj.key)
            if clock is not None and job.gpus:
                job.until = clock.start(now)
                slots = [self.current.inventory.slots[g] for g in job.gpus]
                self.store.set_lease(rj.app_id, rj.trial_id, slots, now, job.until)
                until = lease_end_text(job.until, now)
                self.store.log(now, rj.app_id, rj.trial_id, f"started: lease until {until}")
        cluster = self.current.cluster
        if current and job.gpus and cluster is not None:
            best = cluster.span(job.gpus) <= cluster.best_span(job.gang)
            job.advance(now, best)
            job.done = float(min(job.spec.work, p.steps))
        if p.logs:  # queued: cut, rate-limited and written off the loop (log_writer)
            self.store.trial_lines(now, rj.app_id, rj.trial_id, p.logs)
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
        live = self.book.apps.get(rj.app_id)
        if live is None:
            return True
        if outcome is not None:
            self._record_checkpoint(live, rj, outcome.checkpoint_step)
            if (
                self.restart_costs is not None
                and outcome.status == "paused"
                and rj.stop_sent is not None
                and not rj.killed
            ):  # told to stop, returned by itself: its step finished and checkpoint saved
                self.restart_costs.stopped(rj.app_id, time.time() - rj.stop_sent)
        job = live.job(rj.trial_id)
        state = live.trial_state.get(rj.trial_id)
        if state in ENDED:
            return True
        if outcome is not None and live.spec.tuner is not None and outcome.status in TUNER_ENDS:
            # A tuner's objective keeps no checkpoint of ours, but a trial that ended made
            # its steps for good: they are its work (its pruning point for ``replay``).
            self._record_checkpoint(live, rj, outcome.steps)
        if outcome is not None and outcome.status == "pruned":
            # The trial's own tuner stopped it: it only gives up its own remaining steps.
            self.trials.finish(live, job, now, PRUNED, outcome.note or "pruned by its tuner")
            return True
        if outcome is not None and outcome.status == "done":
            if live.spec.halving is not None and outcome.steps < live.spec.steps:
                self.halving.park(live, job, outcome.steps, now)
            else:
                done = f"done after {outcome.steps} steps"
                why = f"{outcome.note} ({done})" if outcome.note else done
                self.trials.finish(live, job, now, "finished", why)
            return True
        if outcome is not None and outcome.status == "error":
            live.first_error = live.first_error or outcome.error
            self.trials.finish(live, job, now, "failed", f"failed: {outcome.error}")
            return True
        if rj.stop_sent is None:
            # Lost while it held its lease: killed, or its node died. It waits for GPUs
            # again and resumes from its last checkpoint.
            if job.gpus:
                self.trials.stop_job(job, now, "waiting", f"job lost ({why})")
            return True
        if outcome is None:
            self.store.log(now, rj.app_id, rj.trial_id, f"stopped without a reply ({why})")
        return True

    def enforce_grace(self) -> None:
        """Kill the jobs that ignored their lease end past the grace period."""
        for rj in self.jobs.overdue():
            self.metrics.killed.inc()
            self.store.log(
                self.now(), rj.app_id, rj.trial_id, "ignored its lease end: killed after grace"
            )


def _out_of_range(report: Progress | Outcome, budget: int) -> str | None:
    """What is impossible in a report, or None. The job's code runs in the process that
    reports, so it can write anything there: a step count past what SQLite holds once
    raised in every tick that read it."""
    last = report.last if isinstance(report, Outcome) else report
    for name, value in (
        ("steps", report.steps),
        ("checkpoint_step", report.checkpoint_step),
        ("last.steps", last.steps),
        ("last.checkpoint_step", last.checkpoint_step),
    ):
        if type(value) is not int or not 0 <= value <= budget:
            return f"{name} {str(value)[:40]} not in 0..{budget}"
    for steps, metrics in last.reports:
        if type(steps) is not int or not 0 <= steps <= budget:
            return f"a metric at step {str(steps)[:40]} not in 0..{budget}"
        if not isinstance(metrics, dict) or any(
            not isinstance(k, str) or type(v) is not float or not math.isfinite(v)
            for k, v in metrics.items()
        ):
            return "metrics must be finite numbers by name"
    for p in (last,) if isinstance(report, Outcome) else (report,):
        if type(p.start_step) is not int or not 0 <= p.start_step <= budget:
            return f"start_step {str(p.start_step)[:40]} not in 0..{budget}"
        if p.refused not in ("", *REFUSALS):
            return f"refused {str(p.refused)[:20]}"
    if any(not isinstance(line, str) for line in last.logs):
        return "log lines must be text"
    if isinstance(report, Outcome) and (
        report.status not in ("done", "paused", "error", "pruned")
        or not (report.error is None or isinstance(report.error, str))
    ):
        return f"status {str(report.status)[:20]}"
    if isinstance(report, Outcome) and (
        not isinstance(report.note, str) or len(report.note) > NOTE_CHARS
    ):
        return f"a note of {NOTE_CHARS} characters at most"
    return None
