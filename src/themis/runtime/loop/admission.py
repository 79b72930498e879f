"""Submitted apps join the books once there is a cluster to measure them on
(``T_cluster`` is an app's time alone on the cluster it arrives at)."""

from __future__ import annotations

import logging

from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.live import AppBook
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.state.store import StateLost, Store

log = logging.getLogger("themis.runtime")


class Admission:
    """The queue of submitted apps, admitted in submission order."""

    def __init__(
        self, store: Store, book: AppBook, current: CurrentInventory, metrics: ArbiterMetrics
    ) -> None:
        self.store = store
        self.book = book
        self.current = current
        self.metrics = metrics
        self.submitted: list[str] = [row.app_id for row in store.apps(("submitted",))]

    def admit(self, now: float) -> bool:
        """Admit every submitted app; True if one joined the books."""
        cluster = self.current.cluster
        if cluster is None or not self.submitted:
            return False
        admitted = False
        for app_id in list(self.submitted):
            self.submitted.remove(app_id)
            row = self.store.app(app_id)
            if row is None or row.state != "submitted":
                continue
            spec = row.spec
            if spec.gpus_per_trial > cluster.size:
                reason = (
                    f"a trial needs {spec.gpus_per_trial} GPUs and the cluster has {cluster.size}"
                )
                self._fail(app_id, now, reason)
                continue
            try:
                trials = {t.trial_id: t.state for t in self.store.trials(app_id)}
                state = self.book.admit(row, trials, cluster, now).state
                self.store.update_app(
                    app_id, state="running", arrival=now, t_cluster=state.t_cluster
                )
            except StateLost:
                raise
            except Exception as exc:  # noqa: BLE001 (one app never stops the loop)
                log.exception("themis serve: admitting %r failed", app_id)
                self.metrics.faults.labels("admit").inc()
                if app_id in self.book.apps:  # admitted in memory: undo it
                    self.book.retire(self.book.apps[app_id].state, now)
                self._fail(app_id, now, f"could not be admitted: {brief(exc)}")
                continue
            message = f"admitted: {spec.trials} trials, T_cluster {state.t_cluster:.1f}s"
            self.store.log(now, app_id, None, message)
            admitted = True
        return admitted

    def _fail(self, app_id: str, now: float, reason: str) -> None:
        for trial in self.store.trials(app_id):
            self.store.update_trial(app_id, trial.trial_id, state="failed", reason=reason)
        self.store.update_app(app_id, state="failed", finish=now, reason=reason)
        self.store.log(now, app_id, None, f"failed: {reason}")


def brief(exc: BaseException) -> str:
    """An exception as one short line, for an app's reason."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
