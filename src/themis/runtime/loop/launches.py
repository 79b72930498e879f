"""Granted trials become jobs in Ray once their GPUs are really free: what each job is
told (its trial's configuration, steps, checkpoint, placement, rendezvous, credentials)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from themis.runtime.loop.credentials import JobCredentials
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.halving import next_stop
from themis.runtime.loop.job_control import JobControl, Key
from themis.runtime.loop.live import AppBook
from themis.runtime.state.store import Store
from themis.runtime.workers.lease import TrialSpec

#: A trial's checkpoint under ``<storage>/<app>/<trial>/`` (``workers.checkpoint``).
CHECKPOINT_NAME = "checkpoint.themis"
#: A tuner app's study, by default: ``<storage>/<app>/optuna.db``.
STUDY_NAME = "optuna.db"
#: A Ray Tune app's searcher and scheduler: ``<storage>/<app>/tune/``.
TUNE_DIR = "tune"


class Launches:
    """Launches granted jobs and counts their starts in the store."""

    def __init__(
        self,
        store: Store,
        book: AppBook,
        jobs: JobControl,
        current: CurrentInventory,
        credentials: JobCredentials,
        storage: Path,
    ) -> None:
        self.store = store
        self.book = book
        self.jobs = jobs
        self.current = current
        self.credentials = credentials
        self.storage = storage

    def launch_ready(self) -> None:
        """Start the actors of granted trials whose GPUs are really free."""
        inventory = self.current.inventory
        for key in self.jobs.launch_ready(self.trial_spec, inventory.per_node):
            self.store.update_trial(key[0], key[1], starts=self._starts(key) + 1)

    def trial_spec(self, key: Key, gpus: tuple[int, ...]) -> TrialSpec:
        live = self.book.apps[key[0]]
        spec = live.spec
        inventory = self.current.inventory
        placement = inventory.per_node(gpus)
        return TrialSpec(
            key[0],
            key[1],
            self.credentials.token_for(key[0]),
            spec.entrypoint,
            spec.workdir,
            dict(spec.configs[live.index(key[1])]),
            spec.steps,
            str(self.storage / key[0] / key[1] / CHECKPOINT_NAME),
            spec.checkpoint_every,
            tuple(placement),
            next_stop(spec.halving, spec.steps, live.durable.get(key[1], 0), live.decided),
            master_addr=inventory.address(placement[0][0]),
            rank_per_gpu=spec.ranks == "gpu",
            checkpoint_key=self.credentials.checkpoint_key(key[0]),
            expected_step=int(live.durable.get(key[1], 0)),
            tuner=self._tuner(key[0]),
        )

    def _tuner(self, app_id: str) -> dict[str, Any] | None:
        """The app's declared study for its jobs, its storage resolved: by default a
        SQLite file beside the app's checkpoints (kept across restarts of serve); a
        relative SQLite path is under the app's workdir."""
        spec = self.book.apps[app_id].spec
        if spec.tuner is None:
            return None
        tuner = spec.tuner.to_dict()
        if tuner["kind"] == "ray-tune":  # the searcher's and scheduler's sealed state
            tuner["state_dir"] = str(self.storage / app_id / TUNE_DIR)
            return tuner
        url = tuner["storage"] or f"sqlite:///{self.storage / app_id / STUDY_NAME}"
        prefix = "sqlite:///"
        if url.startswith(prefix) and not url[len(prefix) :].startswith("/"):
            url = prefix + str(Path(spec.workdir) / url[len(prefix) :])
        tuner["storage"] = url
        return tuner

    def _starts(self, key: Key) -> int:
        for trial in self.store.trials(key[0]):
            if trial.trial_id == key[1]:
                return trial.starts
        return 0
