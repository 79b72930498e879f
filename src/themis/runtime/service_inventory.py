"""Ray nodes coming and going: GPUs remapped, jobs on lost nodes stopped and killed, and
Ray itself unreachable said in status instead of ending the arbiter."""

from __future__ import annotations

import time

from themis.runtime.cluster import read_inventory
from themis.runtime.service_base import ServiceBase


class InventoryTracking(ServiceBase):
    """The GPU inventory from Ray (mixin of ``ArbiterService``)."""

    def _refresh_inventory(self, now: float) -> bool:
        if time.time() - self._last_inventory < self.options.inventory_every:
            return False
        self._last_inventory = time.time()
        try:
            nodes = self.nodes()
        except Exception as exc:  # Ray unreachable: keep going, say so in status
            if self.ray_error is None:
                for app_id in self.apps:
                    self.store.log(now, app_id, None, f"Ray unreachable: {exc}")
            self.ray_error = f"{type(exc).__name__}: {exc}"[:300]
            return False
        self.ray_error = None
        fresh = read_inventory(nodes)
        if fresh.slots == self.inventory.slots:
            return False
        old = self.inventory
        index = fresh.index()
        lost_nodes = {s[0] for s in old.slots if s not in index}
        for app in list(self.active):
            for job in app.running_jobs():
                slots = [old.slots[g] for g in job.gpus]
                if all(s in index for s in slots):
                    continue
                key = (app.app_id, job.job_id)
                rj = self.jobs.running.get(key)
                self._stop_job(job, now, "waiting", "node lost")
                if rj is not None:
                    self.jobs.kill(rj)
        for rj in list(self.jobs.draining.values()):
            if any(node in lost_nodes for node, _ in rj.spec.gang) and not rj.killed:
                self.jobs.kill(rj)
        remap = {g: index[s] for g, s in enumerate(old.slots) if s in index}
        for app in self.active:
            for job in app.running_jobs():
                job.gpus = tuple(sorted(remap[g] for g in job.gpus))
            app.touch()
        self.jobs.remap(remap)
        self.inventory = fresh
        size = 0 if fresh.cluster is None else fresh.cluster.size
        for app_id in self.apps:
            self.store.log(now, app_id, None, f"cluster changed: {size} GPUs")
        return True
