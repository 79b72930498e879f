"""Successive halving inside the loop: trials pause at rungs (giving their GPUs back),
are promoted, or end: ``stopped-early`` when they lose at a rung, ``failed`` when they
paused there without the metric (``halving.review`` decides; ``rungs`` records)."""

from __future__ import annotations

from themis.model.state import JobState
from themis.runtime.loop import rungs
from themis.runtime.loop.halving import STOPPED_EARLY
from themis.runtime.loop.live import LiveApp
from themis.runtime.loop.service_base import ServiceBase


class HalvingControl(ServiceBase):
    """Rung pauses, promotions and early stops (mixin of ``ArbiterService``)."""

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

    def _park(self, live: LiveApp, job: JobState, steps: int, now: float) -> None:
        """Pause a trial at a successive-halving rung: it gives its GPUs back and is no
        demand of its app until the rung is decided (the scheduler sees it as ended)."""
        key = self._release_trial(job, now)
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
