"""Ray nodes coming and going: GPUs remapped, jobs on lost nodes stopped and killed; and
Ray itself unreachable: the arbiter goes on (API, status, the store) with a cluster of no
GPU, its leases lost, until Ray answers again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.job_control import JobControl
from themis.runtime.loop.live import AppBook
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.options import ServiceOptions
from themis.runtime.loop.trials import Trials
from themis.runtime.state.store import Store
from themis.runtime.workers.ray_inventory import (
    CLUSTER_META,
    Inventory,
    cluster_record,
    read_inventory,
)

#: The inventory while Ray is unreachable: no GPU to hand out.
NO_CLUSTER = Inventory(None, (), ())


class InventoryTracking:
    """The GPU inventory from Ray, and whether Ray answers at all."""

    def __init__(
        self,
        nodes: Callable[[], list[dict[str, Any]]],
        current: CurrentInventory,
        store: Store,
        book: AppBook,
        jobs: JobControl,
        trials: Trials,
        metrics: ArbiterMetrics,
        options: ServiceOptions,
    ) -> None:
        self.nodes = nodes
        self.current = current
        self.store = store
        self.book = book
        self.jobs = jobs
        self.trials = trials
        self.metrics = metrics
        self.options = options
        self.ray_error: str | None = None
        self.ray_down_since: float | None = None
        self._last_read = time.time()
        self.metrics.ray_up.set(1)

    def record_cluster(self) -> None:
        """Keep the cluster in the store (``meta.cluster``) whenever it changes, so that
        ``themis replay`` can simulate on the cluster the apps ran on. A cluster of no GPU
        (Ray unreachable) is not recorded: the last real one stays."""
        record = cluster_record(self.current.inventory)
        if record is not None:
            self.store.set_meta(CLUSTER_META, json.dumps(record, sort_keys=True))

    def refresh(self, now: float) -> bool:
        """Read Ray's nodes when due (every tick while Ray is lost); True if the
        inventory changed, so a round is due."""
        # A launcher that knows when Ray is lost (ray_driver.RayDriver) is asked every
        # tick, so the cluster empties at once rather than at the next periodic read.
        down = bool(getattr(self.jobs.launcher, "ray_down", False))
        due = time.time() - self._last_read >= self.options.inventory_every
        if not due and down == (self.ray_error is not None):
            return False
        self._last_read = time.time()
        try:
            nodes = self.nodes()
        except Exception as exc:  # Ray unreachable: keep going, say so in status
            return self._ray_lost(now, exc)
        if self.ray_error is not None:
            self.metrics.ray_up.set(1)
            down_for = time.time() - (self.ray_down_since or time.time())
            for app_id in self.book.apps:
                self.store.log(now, app_id, None, f"Ray is back after {down_for:.0f}s")
            self.ray_error = None
            self.ray_down_since = None
        return self._apply_inventory(read_inventory(nodes), now, "node lost")

    def _ray_lost(self, now: float, exc: Exception) -> bool:
        """Ray does not answer: no GPU until it does. Jobs cannot outlive the driver that
        owns them, so their leases are lost; their trials resume from their checkpoints
        once Ray is back."""
        error = str(exc) or type(exc).__name__
        error = error.strip().splitlines()[0][:300] if error.strip() else type(exc).__name__
        if self.ray_error is None:
            self.ray_down_since = time.time()
            self.metrics.ray_up.set(0)
            self.metrics.ray_lost.inc()
            for app_id in self.book.apps:
                self.store.log(
                    now,
                    app_id,
                    None,
                    f"Ray unreachable ({error}): leases lost; trials resume from their "
                    "checkpoints when Ray is back",
                )
        self.ray_error = error
        return self._apply_inventory(NO_CLUSTER, now, "Ray unreachable")

    def _apply_inventory(self, fresh: Inventory, now: float, why: str) -> bool:
        if fresh.slots == self.current.inventory.slots:
            return False
        old = self.current.inventory
        index = fresh.index()
        lost_nodes = {s[0] for s in old.slots if s not in index}
        for app in list(self.book.active):
            for job in app.running_jobs():
                slots = [old.slots[g] for g in job.gpus]
                if all(s in index for s in slots):
                    continue
                key = (app.app_id, job.job_id)
                rj = self.jobs.running.get(key)
                self.trials.stop_job(job, now, "waiting", why)
                if rj is not None:
                    self.jobs.kill(rj)
        for rj in list(self.jobs.draining.values()):
            if any(node in lost_nodes for node, _ in rj.spec.gang) and not rj.killed:
                self.jobs.kill(rj)
        remap = {g: index[s] for g, s in enumerate(old.slots) if s in index}
        for app in self.book.active:
            for job in app.running_jobs():
                job.gpus = tuple(sorted(remap[g] for g in job.gpus))
            app.touch()
        self.jobs.remap(remap)
        self.current.inventory = fresh
        self.record_cluster()
        size = 0 if fresh.cluster is None else fresh.cluster.size
        for app_id in self.book.apps:
            self.store.log(now, app_id, None, f"cluster changed: {size} GPUs")
        return True
