"""Successive halving inside the loop: trials pause at rungs (giving their GPUs back),
are promoted, or end: ``stopped-early`` when they lose at a rung, ``failed`` when they
paused there without the metric (``halving.review`` decides; ``rungs`` records)."""

from __future__ import annotations

from themis.model.state import JobState
from themis.runtime.loop import rungs
from themis.runtime.loop.halving import STOPPED_EARLY
from themis.runtime.loop.job_control import JobControl
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.trials import Trials
from themis.runtime.state.store import Store


class HalvingControl:
    """Rung pauses, promotions and early stops."""

    def __init__(self, store: Store, book: AppBook, jobs: JobControl, trials: Trials) -> None:
        self.store = store
        self.book = book
        self.jobs = jobs
        self.trials = trials

    def apply(self, now: float) -> bool:
        """Decide every rung whose values are in; True if a trial stopped or resumed."""
        changed = False
        apps = self.book.apps
        for live in list(apps.values()):
            verdict = rungs.verdict(live)
            if verdict is None:
                continue
            for trial_id, why in verdict.stop:
                if live.spec.name in apps:
                    state = "failed" if trial_id in verdict.silent else STOPPED_EARLY
                    self.trials.finish(live, live.job(trial_id), now, state, why)
                    changed = True
            if live.spec.name in apps:
                for trial_id in verdict.promote:
                    self.unpark(live, live.job(trial_id), now)
                    changed = True
        return changed

    def park(self, live: LiveApp, job: JobState, steps: int, now: float) -> None:
        """Pause a trial at a successive-halving rung: it gives its GPUs back and is no
        demand of its app until the rung is decided (the scheduler sees it as ended)."""
        key = self.trials.release(job, now)
        self.jobs.pending.pop(key, None)
        job.done = float(min(job.spec.work, steps))
        job.finished_at = now
        job.app.touch()
        self.trials.set_trial_state(live, job.job_id, "parked")
        self.store.log(now, key[0], key[1], f"paused at step {steps}: waiting for its rung")

    def unpark(self, live: LiveApp, job: JobState, now: float) -> None:
        job.finished_at = None
        job.done = float(min(job.spec.work, live.durable.get(job.job_id, 0)))
        job.updated_at = now
        job.app.touch()
        self.trials.set_trial_state(live, job.job_id, "waiting")
        self.store.log(now, live.spec.name, job.job_id, "promoted to the next rung")
