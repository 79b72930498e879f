"""A trial's life on the books: granted, renewed, stopped, released, finished, and its
app done.

Every part of the loop that moves a trial (a round, a report, a cancel, a rung, a lost
node) does it through :class:`Trials`, so the scheduler's ``JobState``, the store, the
lease clocks and job control never disagree: one place keeps them in step."""

from __future__ import annotations

import time

from themis.fairness.ftf import app_ideal_time, posthoc_rho_over
from themis.fairness.ideal import PAPER
from themis.model.state import JobState
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.history import RhoHistory
from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.lease_book import LeaseClock, lease_end_text
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.outcomes import app_outcome
from themis.runtime.state.store import Store


class Trials:
    """Moves trials between states, keeping the books, the store and the jobs in step."""

    def __init__(
        self,
        store: Store,
        book: AppBook,
        jobs: JobControl,
        clocks: dict[Key, LeaseClock],
        current: CurrentInventory,
        metrics: ArbiterMetrics,
        rho_history: RhoHistory,
        ideal: str = PAPER,
    ) -> None:
        self.store = store
        self.book = book
        self.jobs = jobs
        self.clocks = clocks
        self.current = current
        self.metrics = metrics
        self.rho_history = rho_history
        #: The definition of the ideal time of the rho recorded when an app ends (the
        #: policy's ``ideal_time``).
        self.ideal = ideal

    def start_job(self, job: JobState, gpus: tuple[int, ...], now: float) -> None:
        """Grant ``gpus`` to a trial; its job launches once they are really free."""
        cluster = self.current.cluster
        assert cluster is not None
        gpus = tuple(sorted(gpus))
        job.start(gpus, job.app.profile.speed(len(gpus), cluster.span(gpus)), now)
        live = self.book.apps[job.app.app_id]
        key = (job.app.app_id, job.job_id)
        live.trial_state[job.job_id] = "running"
        self.jobs.grant(key, gpus)
        inventory = self.current.inventory
        nodes = ", ".join(f"{n[:8]}x{c}" for n, c in inventory.per_node(gpus))
        self.store.log(
            now, key[0], key[1], f"granted GPUs {list(gpus)} ({nodes}) from step {int(job.done)}"
        )

    def record_lease(self, job: JobState, now: float, renewed: bool) -> None:
        slots = [self.current.inventory.slots[g] for g in job.gpus]
        self.store.set_lease(job.app.app_id, job.job_id, slots, now, job.until)
        if renewed:
            until = lease_end_text(job.until, now)
            self.store.log(now, job.app.app_id, job.job_id, f"lease renewed until {until}")

    def stop_job(self, job: JobState, now: float, trial_state: str, why: str) -> None:
        """End a job's lease: the model stops its progress now; its actor checkpoints
        and returns (or is killed after the grace period), and until then its GPUs stay
        reserved (``JobControl.reserved``)."""
        cluster = self.current.cluster
        assert cluster is not None
        key = (job.app.app_id, job.job_id)
        best = cluster.span(job.gpus) <= cluster.best_span(job.gang)
        job.stop(now, best)
        live = self.book.apps[key[0]]
        # Until its last checkpoint is reported, the job has done what the store holds.
        job.done = float(min(job.spec.work, live.durable.get(key[1], 0)))
        job.app.touch()
        self.set_trial_state(live, key[1], trial_state)
        self.store.drop_lease(*key)
        self.clocks.pop(key, None)
        self.jobs.stop(key)
        self.store.log(now, key[0], key[1], f"{why}: checkpoint and stop")

    def set_trial_state(self, live: LiveApp, trial_id: str, state: str) -> None:
        live.trial_state[trial_id] = state
        self.store.update_trial(live.spec.name, trial_id, state=state)

    def release(self, job: JobState, now: float) -> Key:
        """Take a trial off its GPUs in the books (lease and lease clock gone); returns its
        (app, trial) key. Finishing and parking at a rung both start here."""
        cluster = self.current.cluster
        key = (job.app.app_id, job.job_id)
        if job.gpus and cluster is not None:
            job.stop(now, cluster.span(job.gpus) <= cluster.best_span(job.gang))
        self.store.drop_lease(*key)
        self.clocks.pop(key, None)
        return key

    def finish(self, live: LiveApp, job: JobState, now: float, state: str, why: str) -> None:
        key = self.release(job, now)
        self.jobs.stop(key)
        job.finish(now)
        self.set_trial_state(live, job.job_id, state)
        self.store.update_trial(key[0], key[1], reason=why, attained=job.attained)
        self.store.log(now, key[0], key[1], why)
        if live.over():
            self.app_done(live, now)

    def app_done(self, live: LiveApp, now: float, state: str | None = None) -> None:
        """The app is over: retired from the books, its rho recorded."""
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
        cluster = self.current.cluster
        shape = cluster.shape if cluster is not None else None
        if shape is None or self.ideal == PAPER:
            # the paper's; a slice needs the cluster, unknown only before the first inventory
            t_id = app.t_cluster * n_avg
        else:
            t_id = app_ideal_time(self.ideal, app, shape, n_avg)
        rho = posthoc_rho_over(app.arrival, now, t_id)
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
        if self.store.logs is not None:
            self.store.logs.forget(app.app_id)
