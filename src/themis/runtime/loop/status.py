"""What ``status`` and ``/metrics`` show about the loop: rho and GPUs per app, why an app
holds nothing, and the loop's own liveness."""

from __future__ import annotations

import time
from typing import Any

from themis.agent.agent import Agent
from themis.fairness.ftf import RHO_MAX
from themis.runtime.loop.admission import Admission
from themis.runtime.loop.current_inventory import CurrentInventory
from themis.runtime.loop.halving import ENDED
from themis.runtime.loop.history import RhoHistory
from themis.runtime.loop.inventory_tracking import InventoryTracking
from themis.runtime.loop.job_control import JobControl
from themis.runtime.loop.live import AppBook, LiveApp
from themis.runtime.loop.metrics import ArbiterMetrics
from themis.runtime.loop.options import ServiceOptions
from themis.runtime.loop.rounds import Rounds
from themis.runtime.state.store import Store


class StatusReporting:
    """Status rows, metrics and liveness."""

    def __init__(
        self,
        store: Store,
        book: AppBook,
        jobs: JobControl,
        admission: Admission,
        rounds: Rounds,
        tracking: InventoryTracking,
        current: CurrentInventory,
        metrics: ArbiterMetrics,
        rho_history: RhoHistory,
        options: ServiceOptions,
        epoch: float,
    ) -> None:
        self.store = store
        self.book = book
        self.jobs = jobs
        self.admission = admission
        self.rounds = rounds
        self.tracking = tracking
        self.current = current
        self.metrics = metrics
        self.rho_history = rho_history
        self.options = options
        #: The definition of the ideal time of the rho shown (the policy's).
        self.ideal = options.knobs.ideal_time
        self.epoch = epoch
        self.started_wall = time.time()
        self.heartbeat = time.time()
        self._last_written = 0.0

    def beat(self) -> None:
        """The loop is alive now (``status`` and ``/metrics`` show its age)."""
        self.heartbeat = time.time()
        self.metrics.heartbeat.set(self.heartbeat)

    def write_if_due(self, now: float) -> None:
        if time.time() - self._last_written >= self.options.status_every:
            self.write(now)

    def write(self, now: float) -> None:
        """Each app's rho, GPUs and why it waits, into the store and the metrics."""
        self._last_written = time.time()
        cluster = self.current.cluster
        submitted = self.admission.submitted
        self.metrics.queue.set(len(submitted))
        for app_id in submitted:
            note = "waiting for the cluster's first GPU" if cluster is None else "admitted next"
            self.store.update_app(app_id, note=note)
        if cluster is None:
            if self.tracking.ray_error is not None:
                since = time.strftime("%H:%M:%S", time.localtime(self.tracking.ray_down_since))
                note = f"Ray unreachable since {since}: waiting for Ray (leases lost)"
            else:
                note = "waiting for the cluster's first GPU"
            for app in self.book.active:
                self.store.update_app(app.app_id, gpus=0, note=note)
                self.metrics.gpus.labels(app.app_id).set(0)
            return
        waiting = 0
        wall = time.time()
        reserved = self.jobs.reserved()
        active = self.book.active
        free = len(cluster.gpus) - len({g for a in active for g in a.held()} | reserved)
        for app in active:
            held = app.held()
            agent = Agent(app, cluster, ideal=self.ideal)
            rho = agent.rho_with(now, self.book.n_avg(app, now), held)
            live = self.book.apps[app.app_id]
            idle = [j for j in app.jobs if not j.gpus and j.finished_at is None]
            waiting += len(idle)
            self.store.update_app(
                app.app_id, rho=rho, gpus=len(held), note=self._why_idle(live, held, rho, free)
            )
            self.metrics.gpus.labels(app.app_id).set(len(held))
            self.metrics.rho.labels(app.app_id).set(min(rho, RHO_MAX))
            self.rho_history.add(app.app_id, wall, rho)
        self.metrics.waiting.set(waiting)

    def _why_idle(self, live: LiveApp, held: tuple[int, ...], rho: float, free: int) -> str | None:
        """Why an app holds no GPU, in a few words (None when it holds some)."""
        if held:
            starting = sum(1 for k in self.jobs.pending if k[0] == live.app_id)
            return f"{starting} granted, waiting for GPUs to drain" if starting else None
        states = list(live.trial_state.values())
        if states and all(s in ("parked", *ENDED) for s in states):
            return "every live trial paused at a rung, waiting for its decision"
        if free:
            return f"waiting for the next round ({free} GPUs free)"
        return f"waiting: other apps hold every GPU until their leases end (rho {rho:.2f})"

    def snapshot(self) -> dict[str, Any]:
        """The loop's liveness, for ``status`` (read from the API thread)."""
        inventory = self.current.inventory  # replaced whole by the loop, never in place
        cluster = inventory.cluster
        return {
            "heartbeat": self.heartbeat,
            "started": self.started_wall,
            "rounds": self.rounds.count,
            "gpus": 0 if cluster is None else cluster.size,
            "machines": len(inventory.nodes),
            "ray_error": self.tracking.ray_error,
            "ray_down_since": self.tracking.ray_down_since,
            "tick": self.options.tick,
        }

    def cluster_view(self) -> dict[str, Any]:
        """What the dashboard needs that only the loop knows (read from the API thread):
        the machines of the GPU inventory, the GPUs of jobs told to stop that still hold
        them (draining: ``[node id, slot, app, trial]``), each app's rho over time, and
        the epoch the store's times count from. Leases, trials and events come from the
        store."""
        inventory = self.current.inventory  # replaced whole by the loop, never in place
        draining = []
        for (app_id, trial_id), job in list(self.jobs.draining.items()):
            for g in job.gpus:
                if 0 <= g < len(inventory.slots):
                    node_id, slot = inventory.slots[g]
                    draining.append([node_id, slot, app_id, trial_id])
        return {
            "epoch": self.epoch,
            "machines": [
                {
                    # m0, m1, ...: the scheduler's machine index, as GPU names say it
                    # (a Ray node id's prefix told a user nothing).
                    "name": f"m{k}",
                    "node_id": node.node_id,
                    "rack": node.rack,
                    "gpus": node.gpus,
                    "gpu_type": node.gpu_type,
                    "address": node.address,
                }
                for k, node in enumerate(inventory.nodes)
            ],
            "rho": self.rho_history.series(),
            "draining": draining,
        }
