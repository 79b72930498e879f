"""What the loop checks about a job's start: that it comes, and where it resumed from.

**The start deadline.** A granted job's lease counts from the report that its training
function runs (``lease_book``); until then its lease end moves with the clock. A job
that never gets there (a module that sleeps at import, a restore that blocks) would so
hold its GPUs for ever. :class:`StartWatch` names the jobs launched longer than the
start deadline ago that have not reported running; the loop stops each like a lease
end (told to stop, killed after the grace), so its GPUs are free again at most the
deadline plus the grace after its launch. The trial waits for GPUs again; after
:data:`MAX_START_TIMEOUTS` such timeouts in a row it fails: a start that hangs three
times is a fault of the app's code (an import that never returns), and each retry
costs the cluster the deadline plus the grace. The count lives in the arbiter's memory
(a restart forgets it: at worst three more tries).

**The resume point.** :func:`resume_check` compares the step a job resumed from with
the steps the arbiter counts as checkpointed. A job below that count found its
checkpoint missing or refused it (``workers.lease._restore``): the count is reset down
to where the job really is, said in the app's log and counted, so that no completed
step is counted twice and no lost one is counted as done.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.trials import Trials
from themis.runtime.state.store import Store
from themis.runtime.workers.checkpoint import REFUSALS
from themis.runtime.workers.launcher import RunningJob
from themis.runtime.workers.lease import Progress

log = logging.getLogger(__name__)

#: Start timeouts in a row after which a trial fails.
MAX_START_TIMEOUTS = 3


@dataclass
class StartWatch:
    """Start deadlines of launched jobs, and each trial's timeouts in a row."""

    deadline: float  # seconds from launch (ServiceOptions.start_deadline)
    misses: dict[Key, int] = field(default_factory=dict)

    def overdue(self, running: dict[Key, RunningJob], wall: float) -> list[RunningJob]:
        """Jobs with a live lease launched ``deadline`` seconds ago or more that have not
        reported that their function runs."""
        return [
            rj
            for rj in running.values()
            if not rj.started and rj.stop_sent is None and wall - rj.started_wall >= self.deadline
        ]

    def missed(self, key: Key) -> int:
        """One more timeout of ``key``'s trial: how many in a row now."""
        self.misses[key] = self.misses.get(key, 0) + 1
        return self.misses[key]

    def started(self, key: Key) -> None:
        self.misses.pop(key, None)

    def why(self, misses: int) -> str:
        return (
            f"did not reach its training function within {self.deadline:g}s of its launch "
            f"(start timeout {misses} of {MAX_START_TIMEOUTS})"
        )


class StartDeadlines:
    """The loop's part that stops the jobs past their start deadline."""

    def __init__(
        self,
        watch: StartWatch,
        book: AppBook,
        jobs: JobControl,
        trials: Trials,
        metrics: ArbiterMetrics,
    ) -> None:
        self.watch = watch
        self.book = book
        self.jobs = jobs
        self.trials = trials
        self.metrics = metrics

    def enforce(self, now: float) -> bool:
        """Stop each job past its start deadline as a lease end is stopped (killed after
        the grace if it does not return); its trial waits again, or fails after
        :data:`MAX_START_TIMEOUTS` in a row. True if any was stopped (a round follows)."""
        overdue = self.watch.overdue(self.jobs.running, time.time())
        for rj in overdue:
            live = self.book.apps.get(rj.app_id)
            if live is None or not live.job(rj.trial_id).gpus:
                continue
            job = live.job(rj.trial_id)
            misses = self.watch.missed(rj.key)
            why = self.watch.why(misses)
            self.metrics.start_timeouts.inc()
            log.warning("themis serve: %s/%s %s", rj.app_id, rj.trial_id, why)
            if misses >= MAX_START_TIMEOUTS:
                self.watch.started(rj.key)  # forgotten: the trial is over
                live.first_error = live.first_error or why
                self.trials.finish(live, job, now, "failed", f"failed: {why}")
            else:
                self.trials.stop_job(job, now, "waiting", why)
        return bool(overdue)


def resume_check(
    live: LiveApp, rj: RunningJob, p: Progress, now: float, store: Store, metrics: ArbiterMetrics
) -> None:
    """A job has reported that its function runs: count a refused checkpoint, and reset
    the trial's durable steps down to where the job resumed if it is below them."""
    if p.refused:
        metrics.checkpoints_refused.labels(p.refused if p.refused in REFUSALS else "invalid").inc()
    durable = live.durable.get(rj.trial_id, 0)
    if p.start_step >= durable:
        return
    live.durable[rj.trial_id] = p.start_step
    store.update_trial(rj.app_id, rj.trial_id, steps_done=p.start_step)
    cause = f"its checkpoint was refused ({p.refused})" if p.refused else "no checkpoint found"
    store.log(
        now,
        rj.app_id,
        rj.trial_id,
        f"resumed from step {p.start_step}, not {durable}: {cause}; steps done reset to "
        f"{p.start_step}",
    )
    metrics.trial_resets.inc()
