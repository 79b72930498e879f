"""The arbiter's answers to the API's commands: submit, cancel, release.

Who may send which command was checked by the API (``runtime.auth``); here the loop
checks what only it knows: whether the app exists and is still active, whether a gang fits
the cluster at all, whether the name is free. A refusal is a :class:`ThemisError`, sent
back to the caller as one line."""

from __future__ import annotations

import logging

from themis.errors import ThemisError
from themis.runtime.loop import submit_replay
from themis.runtime.loop.admission import Admission
from themis.runtime.loop.commands import Command, CommandQueue
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.halving import ENDED
from themis.runtime.loop.job_control import JobControl
from themis.runtime.loop.live import AppBook
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.trials import Trials
from themis.runtime.state.store import Store

log = logging.getLogger("themis.runtime")


class RequestHandling:
    """Commands from the API, answered once."""

    def __init__(
        self,
        commands: CommandQueue,
        store: Store,
        book: AppBook,
        jobs: JobControl,
        admission: Admission,
        trials: Trials,
        current: CurrentInventory,
        metrics: ArbiterMetrics,
    ) -> None:
        self.commands = commands
        self.store = store
        self.book = book
        self.jobs = jobs
        self.admission = admission
        self.trials = trials
        self.current = current
        self.metrics = metrics

    def handle(self, now: float) -> bool:
        """Answer every queued command; True if one changed what a round would decide."""
        changed = False
        for command in self.commands.drain():
            try:
                changed = self._answer(command, now) or changed
            except ThemisError as exc:  # its kind picks the API's status (409, 503, 400)
                command.refuse(exc.format(), type(exc))
            except Exception as exc:  # noqa: BLE001 (one request never stops the loop)
                # A bug or an input the checks let through: refuse this request with its
                # reason, log and count it, and serve the others.
                log.exception("themis serve: %s of %r failed", command.kind, command.app_id)
                self.metrics.faults.labels("command").inc()
                command.refuse(
                    f"internal error while handling {command.kind}: {type(exc).__name__}: {exc}"[
                        :500
                    ]
                )
                changed = True
        return changed

    def _answer(self, command: Command, now: float) -> bool:
        if command.kind == "submit":
            return self._submit(command, now)
        row = self.store.app(command.app_id)
        if row is None:
            raise ThemisError(f"no app named {command.app_id!r}")
        if row.state not in ("submitted", "running"):
            raise ThemisError(f"app {command.app_id!r} is {row.state}")
        if command.kind == "cancel":
            self._cancel(command.app_id, now)
            command.answer(f"cancelled app '{command.app_id}'")
            return True
        if command.kind == "release":
            trial_id = str(command.payload.get("trial", ""))
            live = self.book.apps.get(command.app_id)
            if live is None or (command.app_id, trial_id) not in self.jobs.running:
                command.answer(f"{trial_id} holds no GPUs")
                return False
            self.trials.stop_job(live.job(trial_id), now, "waiting", "lease released by the app")
            command.answer(f"released the lease of {trial_id}")
            return True
        raise ThemisError(f"unknown request '{command.kind}'")

    def _submit(self, command: Command, now: float) -> bool:
        app = command.payload["app"]
        replayed = submit_replay.replay(self.store, command.payload, now)
        if replayed is not None:  # a retry of a submit already done: no new app
            command.answer(replayed)
            return False
        cluster = self.current.cluster
        if cluster is not None and app.gpus_per_trial > cluster.size:
            raise ThemisError(
                f"a trial needs {app.gpus_per_trial} GPUs and the cluster has "
                f"{cluster.size}: it could never run",
                source=command.payload.get("source"),
                field="gpus_per_trial",
            )
        payload = command.payload
        self.store.add_app(app, payload["token_hash"], payload["source"], payload.get("key"))
        self.admission.submitted.append(app.name)
        where = "waiting for the cluster's first GPU" if cluster is None else "admitted next"
        self.store.log(now, app.name, None, f"submitted: {app.trials} trials; {where}")
        command.answer({"app_id": app.name, "trials": app.trials})
        return True

    def _cancel(self, app_id: str, now: float) -> None:
        live = self.book.apps.get(app_id)
        if live is None:  # submitted, not admitted yet
            if app_id in self.admission.submitted:
                self.admission.submitted.remove(app_id)
            for trial in self.store.trials(app_id):
                self.store.update_trial(app_id, trial.trial_id, state="cancelled")
            self.store.update_app(app_id, state="cancelled", finish=now, reason="cancelled")
            self.store.log(now, app_id, None, "cancelled before admission")
            return
        for job in live.state.jobs:
            if live.trial_state.get(job.job_id) in ENDED:
                continue
            if job.gpus:
                self.trials.stop_job(job, now, "cancelled", "app cancelled")
            self.jobs.pending.pop((app_id, job.job_id), None)
            self.trials.set_trial_state(live, job.job_id, "cancelled")
            job.finish(now)
        self.trials.app_done(live, now, "cancelled")
