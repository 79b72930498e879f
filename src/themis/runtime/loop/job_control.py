"""Job control: which trials have a job in Ray, which are told to stop, which wait to
start, and the rule that a job starts only on GPUs that are really free.

Three sets, keyed by (app, trial):

- ``running``: a job holds a live lease;
- ``draining``: the job was told to stop (lease ended, preempted, stopped early,
  cancelled) and has not returned yet; its GPUs stay *reserved* until it has (or was
  killed after the grace period);
- ``pending``: granted GPUs whose job is not launched yet, because the trial's previous
  job still drains or one of its GPUs is still reserved by another trial's.

The arbiter decides; this module only keeps these sets straight and talks to the
launcher (Ray, or a fake in tests). It is also the one place that sees GPUs really come
free (a job that ended, drained or was killed, whatever app it belonged to, live or
retired), so it says so (:meth:`JobControl.take_freed`) and the loop runs a round:
otherwise the GPUs of a cancelled app's draining jobs sat idle until something else
happened to ask for one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from themis.runtime.workers.launcher import JobLauncher, RunningJob
from themis.runtime.workers.lease import TrialSpec

Key = tuple[str, str]  # (app id, trial id)


class JobControl:
    def __init__(self, launcher: JobLauncher) -> None:
        self.launcher = launcher
        self.running: dict[Key, RunningJob] = {}
        self.draining: dict[Key, RunningJob] = {}
        self.pending: dict[Key, tuple[int, ...]] = {}
        self._freed = False

    def reserved(self) -> frozenset[int]:
        """GPUs of jobs told to stop that have not stopped yet."""
        return frozenset(g for rj in self.draining.values() for g in rj.gpus)

    def grant(self, key: Key, gpus: tuple[int, ...]) -> None:
        self.pending[key] = gpus

    def launch_ready(
        self,
        make_spec: Callable[[Key, tuple[int, ...]], TrialSpec],
        placement: Callable[[tuple[int, ...]], list[tuple[str, int]]],
    ) -> list[Key]:
        """Start the pending jobs whose GPUs are really free; returns their keys."""
        reserved = self.reserved()
        started = []
        for key, gpus in list(self.pending.items()):
            if key in self.draining or reserved.intersection(gpus):
                continue
            del self.pending[key]
            rj = self.launcher.start(make_spec(key, gpus), placement(gpus))
            rj.gpus = gpus
            self.running[key] = rj
            started.append(key)
        return started

    def stop(self, key: Key) -> RunningJob | None:
        """Tell the key's job to stop; it drains until it returns. Also drops a grant not
        launched yet."""
        self.pending.pop(key, None)
        rj = self.running.pop(key, None)
        if rj is not None:
            self.launcher.stop(rj, time.time())
            self.draining[key] = rj
        return rj

    def overdue(self) -> list[RunningJob]:
        """Draining jobs past their grace period, killed now."""
        wall = time.time()
        killed = []
        for rj in list(self.draining.values()):
            if rj.kill_at is not None and wall >= rj.kill_at and not rj.killed:
                self.launcher.kill(rj)
                killed.append(rj)
        return killed

    def kill(self, rj: RunningJob) -> None:
        self.launcher.kill(rj)

    def forget(self, rj: RunningJob) -> None:
        """The job has ended: its GPUs are free (its actors are released)."""
        if self.running.get(rj.key) is rj:
            del self.running[rj.key]
        if self.draining.get(rj.key) is rj:
            del self.draining[rj.key]
        if rj.gpus:
            self._freed = True
        self.launcher.release(rj)

    def take_freed(self) -> bool:
        """Whether GPUs came free since the last call (then a round is due)."""
        freed, self._freed = self._freed, False
        return freed

    def jobs(self) -> list[RunningJob]:
        return [*self.running.values(), *self.draining.values()]

    def remap(self, remap: dict[int, int]) -> None:
        """The inventory changed: GPU ids move (lost GPUs are dropped)."""
        for rj in self.jobs():
            rj.gpus = tuple(sorted(remap[g] for g in rj.gpus if g in remap))
        self.pending = {
            k: tuple(sorted(remap[g] for g in gpus))
            for k, gpus in self.pending.items()
            if all(g in remap for g in gpus)
        }
