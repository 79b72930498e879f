"""The admitted apps as the scheduler sees them, and how they are rebuilt from the store.

Each unfinished app is a :class:`LiveApp`: its spec, its token hash, the simulator's
``AppState`` (one ``JobState`` per trial) and the runtime's view of its trials (store
state, checkpointed steps, successive-halving metrics). :class:`AppBook` holds them with
the time-averaged number of active apps (``N_avg``), which needs every app's arrival and
finish, so a restarted arbiter replays those from the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from themis.fairness.ftf import t_cluster
from themis.fairness.shares import FairShares
from themis.model.cluster import Cluster
from themis.model.state import AppState, JobState
from themis.runtime.loop.app_model import app_profile, app_spec
from themis.runtime.loop.halving import ENDED
from themis.runtime.state.appfile import AppFile
from themis.runtime.state.store import AppRow, Store


@dataclass
class LiveApp:
    """An admitted, unfinished app."""

    spec: AppFile
    token_hash: str
    state: AppState
    trial_state: dict[str, str]  # trial -> its state in the store
    durable: dict[str, int]  # trial -> steps in its last checkpoint
    rungs: dict[int, dict[str, float]] = field(default_factory=dict)
    decided: tuple[int, ...] = ()  # successive-halving rungs decided so far
    reported: set[str] = field(default_factory=set)  # metric names trials reported
    metric_seen: bool = False  # some trial reported the halving metric
    first_error: str | None = None  # the first trial failure, for the app's outcome

    @property
    def app_id(self) -> str:
        return self.spec.name

    def index(self, trial_id: str) -> int:
        for k, job in enumerate(self.state.jobs):
            if job.job_id == trial_id:
                return k
        raise KeyError(trial_id)

    def job(self, trial_id: str) -> JobState:
        return self.state.jobs[self.index(trial_id)]

    def over(self) -> bool:
        """Every trial finished, stopped, failed or cancelled."""
        return all(s in ENDED for s in self.trial_state.values())


class AppBook:
    """The live apps in arrival order, and the active-app count over time."""

    def __init__(self) -> None:
        self.apps: dict[str, LiveApp] = {}
        self.active: list[AppState] = []
        #: Who shares the cluster over time (each app is its own owner here): ``N_avg``.
        self.shares = FairShares()

    @classmethod
    def rebuild(cls, store: Store, now: float) -> AppBook:
        """Every admitted app from the store: finished ones for ``N_avg`` only, running ones
        with their trials' checkpointed progress (parked trials stay paused)."""
        book = cls()
        changes: list[tuple[float, int, str]] = []
        for row in store.apps():
            if row.arrival is None:
                continue
            changes.append((row.arrival, +1, row.app_id))
            if row.finish is not None:
                changes.append((row.finish, -1, row.app_id))
        for t, delta, app_id in sorted(changes, key=lambda c: (c[0], -c[1])):
            if delta > 0:
                book.shares.arrive(t, app_id, app_id)
            else:
                book.shares.leave(t, app_id)
        for row in store.apps(("running",)):
            assert row.arrival is not None and row.t_cluster is not None
            state = AppState(app_spec(row.spec, row.arrival), app_profile(row.spec), row.t_cluster)
            live = LiveApp(row.spec, row.token_hash, state, {}, {}, store.rungs(row.app_id))
            live.metric_seen = bool(live.rungs)
            for trial in store.trials(row.app_id):
                job = live.job(trial.trial_id)
                job.updated_at = now
                job.done = float(min(trial.steps_done, trial.budget))
                job.attained = trial.attained
                live.trial_state[trial.trial_id] = trial.state
                live.durable[trial.trial_id] = trial.steps_done
                if trial.state in ENDED:
                    job.finish(now)
                elif trial.state == "parked":
                    job.finished_at = now  # paused at a rung: no demand until decided
            book.apps[row.app_id] = live
            book.active.append(state)
        return book

    def admit(
        self, row: AppRow, trial_states: dict[str, str], cluster: Cluster, now: float
    ) -> LiveApp:
        """A submitted app arrives now; ``T_cluster`` is its time alone on ``cluster``."""
        state = AppState(app_spec(row.spec, now), app_profile(row.spec), 0.0)
        for job in state.jobs:
            job.updated_at = now
        state.t_cluster = t_cluster(state.profile, state.remaining_by_gang(now), cluster.shape)
        self.shares.arrive(now, row.app_id, row.app_id)
        live = LiveApp(
            row.spec, row.token_hash, state, dict(trial_states), dict.fromkeys(trial_states, 0)
        )
        self.apps[row.app_id] = live
        self.active.append(state)
        return live

    def n_avg(self, app: AppState, now: float) -> float:
        return self.shares.n_eff(app.app_id, now)

    def retire(self, app: AppState, now: float) -> float:
        """The app is over at ``now``: returns its ``N_avg`` over its lifetime."""
        n_avg = self.n_avg(app, now)
        app.finish = now
        self.shares.leave(now, app.app_id)
        self.active.remove(app)
        del self.apps[app.app_id]
        return n_avg
