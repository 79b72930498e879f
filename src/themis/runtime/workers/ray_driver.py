"""The Ray driver in a child process, so that ``themis serve`` outlives Ray.

A Ray driver shares its fate with the cluster: when the GCS (the head) is gone, Ray's own
C++ core worker ends the driver process after ``gcs_rpc_server_reconnect_timeout_s``
(measured: 60 s; nothing in Python can catch it), and a head started again is a new
cluster that the old driver cannot rejoin. The arbiter's state, API and scheduling loop
must not share that fate, so ``serve`` is not a Ray driver: this module runs the driver
in a child process and talks to it through two queues.

- :func:`_driver_main` (the child) joins the cluster, then in a loop runs the commands it
  receives (start, stop, kill, release a job) with the in-process
  :class:`~themis.runtime.workers.jobs.Launcher`, polls its jobs, and sends back job progress,
  job ends and, every ``heartbeat`` seconds, the node list (``ray.nodes()``), which is
  also its heartbeat. It ignores SIGINT/SIGTERM (the arbiter drains jobs through it at
  shutdown) and dies with the arbiter (``PR_SET_PDEATHSIG``), taking its jobs with it,
  as Ray ends the actors of a driver that is gone: a restarted arbiter never finds
  jobs of an old one still running.
- :class:`RayDriver` (the arbiter's side) is the service's launcher and node source. It
  never blocks on Ray: commands are queued, answers are read when there. When the child
  exits or stays silent for ``stale_after`` seconds, Ray is *unreachable*: the child is
  killed (so no job of it can run on), every job it had is reported ended ("Ray
  unreachable"), :meth:`nodes` raises :class:`RayUnreachable` (the service then sees a
  cluster with no GPU and stops handing any out), and a new child is started after a
  backoff (1 s doubling to 30 s) until one joins the cluster again.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import signal
import time
from dataclasses import dataclass
from typing import Any

from themis.errors import ThemisError
from themis.runtime.workers.launcher import RunningJob
from themis.runtime.workers.lease import Outcome, Progress, TrialSpec


class RayUnreachable(RuntimeError):
    """The driver is not connected to a Ray cluster (down, or still joining)."""


@dataclass(frozen=True)
class DriverOptions:
    heartbeat: float = 1.0  # the child sends the node list this often
    stale_after: float = 15.0  # no word from a connected child this long: Ray is lost
    connect_timeout: float = 120.0  # a child that has not joined by then is restarted
    backoff: float = 1.0  # first wait before a new child; doubles up to backoff_max
    backoff_max: float = 30.0
    tick: float = 0.05  # the child's loop


class RayDriver:
    """Launcher and node list of the arbiter, backed by a Ray driver in a child process
    (see the module's doc). Same interface as :class:`~themis.runtime.workers.jobs.Launcher`,
    plus :meth:`nodes`, :attr:`ray_down`, :meth:`wait_connected` and :meth:`close`."""

    def __init__(self, address: str, grace: float, options: DriverOptions | None = None) -> None:
        import multiprocessing

        self.address = address
        self.grace = grace
        self.options = options or DriverOptions()
        self._ctx = multiprocessing.get_context("spawn")
        self._ids = itertools.count(1)
        self.jobs: dict[int, RunningJob] = {}
        self._progress: list[tuple[int, Progress]] = []
        self._ends: list[tuple[int, Outcome | None, str | None]] = []
        self._nodes: list[dict[str, Any]] | None = None
        self._proc: Any = None
        self._commands: Any = None
        self._events: Any = None
        self.connected = False
        self.error: str | None = None
        self.down_since: float | None = None
        self.children = 0  # driver processes started (1 + reconnections tried)
        self._spawned_at = 0.0
        self._last_word = 0.0
        self._next_spawn = 0.0
        self._backoff = self.options.backoff
        self._spawn()

    # -- the child process ----------------------------------------------------------------

    def _spawn(self) -> None:
        self._commands = self._ctx.Queue()
        self._events = self._ctx.Queue()
        self._proc = self._ctx.Process(
            target=_driver_main,
            args=(self.address, self.grace, self._commands, self._events, self.options),
            name="themis-ray-driver",
            daemon=True,
        )
        self._proc.start()
        self.children += 1
        self._spawned_at = self._last_word = time.monotonic()

    def _send(self, *message: Any) -> None:
        if self._proc is not None and self.connected:
            with contextlib.suppress(Exception):  # a queue of a child that just died
                self._commands.put(message)

    def _pump(self) -> None:
        """Read what the child sent; notice it gone; start a new one when due."""
        now = time.monotonic()
        if self._proc is None:
            if now >= self._next_spawn:
                self._spawn()
            return
        while True:
            try:
                event = self._events.get_nowait()
            except (queue.Empty, OSError, EOFError, ValueError):
                break
            self._last_word = now
            kind = event[0]
            if kind == "ready":
                self.connected = True
                self._backoff = self.options.backoff
            elif kind == "nodes":
                self._nodes = event[1]
                self.error = None
                self.down_since = None
            elif kind == "progress":
                self._progress.append((event[1], event[2]))
            elif kind == "end":
                self._ends.append((event[1], event[2], event[3]))
            elif kind == "error":
                self.error = event[1]
        if not self._proc.is_alive():
            why = self.error or f"the Ray driver process exited ({self._proc.exitcode})"
            self._lost(why)
        elif self.connected and now - self._last_word > self.options.stale_after:
            self._lost(f"no answer from Ray for {now - self._last_word:.0f}s")
        elif not self.connected and now - self._spawned_at > self.options.connect_timeout:
            self._lost(f"could not join {self.address} in {self.options.connect_timeout:.0f}s")

    def _lost(self, why: str) -> None:
        """The child is gone or silent: kill it, end every job it had, retry later."""
        proc = self._proc
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        for q in (self._commands, self._events):
            q.cancel_join_thread()
            q.close()
        self._proc = None
        self.connected = False
        self._nodes = None
        self.error = why
        if self.down_since is None:
            self.down_since = time.time()
        ended = {jid for jid, _, _ in self._ends}
        for jid in self.jobs:
            if jid not in ended:
                self._ends.append((jid, None, f"Ray unreachable: {why}"))
        self._next_spawn = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.options.backoff_max)

    # -- what the service asks ------------------------------------------------------------

    @property
    def ray_down(self) -> bool:
        """Whether Ray is unreachable now (checked on every call: cheap, never blocks)."""
        self._pump()
        return not self.connected or self._nodes is None

    def nodes(self) -> list[dict[str, Any]]:
        """The last node list the driver read (at most ``heartbeat`` seconds old)."""
        self._pump()
        if not self.connected or self._nodes is None:
            raise RayUnreachable(self.error or f"joining the Ray cluster at {self.address}")
        return self._nodes

    def wait_connected(self, timeout: float) -> None:
        """Block until the first node list is in (start-up); one clear error if the
        cluster cannot be joined."""
        deadline = time.monotonic() + timeout
        while True:
            self._pump()
            if self.connected and self._nodes is not None:
                return
            if self.error is not None or time.monotonic() > deadline:
                self.close()
                why = self.error or f"no answer from {self.address} in {timeout:.0f}s"
                raise ThemisError(why, field="--address")
            time.sleep(0.05)

    def close(self) -> None:
        """Let the child leave Ray (its remaining actors end with it), then reap it."""
        if self._proc is None:
            return
        if self.connected:
            self._send("quit")
            self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        for q in (self._commands, self._events):
            q.cancel_join_thread()
            q.close()
        self._proc = None
        self.connected = False

    # -- the launcher interface (see jobs.Launcher) ---------------------------------------

    def start(self, spec: TrialSpec, placement: list[tuple[str, int]]) -> RunningJob:
        jid = next(self._ids)
        job = RunningJob(spec.app_id, spec.trial_id, spec, [], None, time.time())
        job.extra["jid"] = jid
        self.jobs[jid] = job
        if self.connected:
            self._send("start", jid, spec, placement)
        else:
            self._ends.append((jid, None, f"Ray unreachable: {self.error or 'not joined'}"))
        return job

    def request_polls(self, jobs: list[RunningJob]) -> None:
        """The child polls its jobs by itself."""

    def collect_polls(self, jobs: list[RunningJob]) -> list[tuple[RunningJob, Progress]]:
        self._pump()
        wanted = {id(j) for j in jobs}
        out = [
            (self.jobs[jid], p)
            for jid, p in self._progress
            if jid in self.jobs and id(self.jobs[jid]) in wanted
        ]
        self._progress.clear()
        return out

    def collect_ends(
        self, jobs: list[RunningJob]
    ) -> list[tuple[RunningJob, Outcome | None, str | None]]:
        """Ends read by the last :meth:`collect_polls` (so a job's last progress always
        comes before its end), and every job of a driver that was lost."""
        wanted = {id(j) for j in jobs}
        out, keep = [], []
        for jid, outcome, why in self._ends:
            job = self.jobs.get(jid)
            if job is None:
                continue
            if id(job) in wanted:
                out.append((job, outcome, why))
            else:
                keep.append((jid, outcome, why))
        self._ends = keep
        return out

    def stop(self, job: RunningJob, now_wall: float) -> None:
        if job.stop_sent is None:
            job.stop_sent = now_wall
            job.kill_at = now_wall + self.grace
            self._send("stop", job.extra["jid"])

    def kill(self, job: RunningJob) -> None:
        job.killed = True
        self._send("kill", job.extra["jid"])

    def release(self, job: RunningJob) -> None:
        jid = job.extra["jid"]
        if self.jobs.get(jid) is job:
            del self.jobs[jid]
        self._send("release", jid)


# -- the child --------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the arbiter (its parent) dies, however it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _driver_main(
    address: str, grace: float, commands: Any, events: Any, options: DriverOptions
) -> None:
    parent = os.getppid()
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.getppid() != parent:
        return
    from themis.runtime.workers import ray_cluster

    try:
        ray_cluster.connect(address)
    except Exception as exc:
        events.put(("error", str(exc)[:500]))
        return
    import ray

    from themis.runtime.workers.jobs import Launcher, _short

    events.put(("ready",))
    launcher = Launcher(grace)
    jobs: dict[int, RunningJob] = {}
    last_nodes = 0.0
    try:
        while os.getppid() == parent:
            try:
                message = commands.get(timeout=options.tick)
            except queue.Empty:
                message = None
            while message is not None:
                if message[0] == "quit":
                    return
                _run_command(launcher, jobs, message, events, _short)
                try:
                    message = commands.get_nowait()
                except queue.Empty:
                    message = None
            live = list(jobs.values())
            for job, progress in launcher.collect_polls(live):
                events.put(("progress", job.extra["jid"], progress))
            for job, outcome, why in launcher.collect_ends(live):
                events.put(("end", job.extra["jid"], outcome, why))
                launcher.release(job)
                jobs.pop(job.extra["jid"], None)
            launcher.request_polls(list(jobs.values()))
            if time.monotonic() - last_nodes >= options.heartbeat:
                try:
                    nodes = ray.nodes()
                except Exception as exc:  # the GCS said no rather than hanging
                    events.put(("error", f"ray.nodes() failed: {_short(exc)}"))
                    return
                events.put(("nodes", nodes))
                last_nodes = time.monotonic()
    finally:
        for job in jobs.values():
            with contextlib.suppress(Exception):
                launcher.kill(job)
        with contextlib.suppress(Exception):
            ray.shutdown()


def _run_command(
    launcher: Any, jobs: dict[int, RunningJob], message: tuple, events: Any, short: Any
) -> None:
    kind, jid = message[0], message[1]
    if kind == "start":
        spec, placement = message[2], message[3]
        try:
            job = launcher.start(spec, placement)
        except Exception as exc:
            events.put(("end", jid, None, short(exc)))
            return
        job.extra["jid"] = jid
        jobs[jid] = job
        return
    job = jobs.get(jid)
    if job is None:
        return  # ended already (its end is on its way or read)
    if kind == "stop":
        launcher.stop(job, time.time())
    elif kind == "kill":
        launcher.kill(job)
    elif kind == "release":
        launcher.release(job)
        del jobs[jid]
