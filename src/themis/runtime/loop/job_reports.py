"""What jobs report, and how they end.

Progress counts only from the job it was started as, with its app's job credential.
A job's first report that its function runs starts its lease's clock (``lease_book``);
checkpoints become durable progress; rung values go to ``rungs``. A job that ends frees
its GPUs and a round follows (``JobControl.take_freed``, whatever app the job was
of); a job past its grace is killed."""

from __future__ import annotations

import hmac
import math
import time

from themis.runtime.loop import rungs
from themis.runtime.loop.halving import ENDED
from themis.runtime.loop.live import LiveApp
from themis.runtime.loop.service_base import ServiceBase
from themis.runtime.workers.jobs import RunningJob
from themis.runtime.workers.lease import Outcome, Progress

#: What one poll may add to the event log: longer lines and further lines are cut.
MAX_LOG_LINE = 4000
MAX_LOG_LINES = 50


class ReportHandling(ServiceBase):
    """Reports and ends of jobs (mixin of ``ArbiterService``)."""

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
            if self.options.measure_restart_cost:  # launch to its function running
                self.restart_costs.started(rj.app_id, time.time() - rj.started_wall)
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
            if (
                self.options.measure_restart_cost
                and outcome.status == "paused"
                and rj.stop_sent is not None
                and not rj.killed
            ):  # told to stop, returned by itself: its step finished and checkpoint saved
                self.restart_costs.stopped(rj.app_id, time.time() - rj.stop_sent)
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

    def _enforce_grace(self) -> None:
        for rj in self.jobs.overdue():
            self.metrics.killed.inc()
            self.store.log(
                self.now(), rj.app_id, rj.trial_id, "ignored its lease end: killed after grace"
            )


def _out_of_range(report: Progress | Outcome, budget: int) -> str | None:
    """What is impossible in a report, or None. The job's code runs in the process that
    reports, so it can write anything there: a step count past what SQLite holds once
    raised in every tick that read it (issue 20)."""
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
    if any(not isinstance(line, str) for line in last.logs):
        return "log lines must be text"
    if isinstance(report, Outcome) and (
        report.status not in ("done", "paused", "error")
        or not (report.error is None or isinstance(report.error, str))
    ):
        return f"status {str(report.status)[:20]}"
    return None
