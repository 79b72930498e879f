"""Runs of a batch as Ray tasks: ``--ray auto`` (a Ray started here, one CPU per core) or
``--ray ADDRESS`` (a cluster started with ``ray start --head``).

Each run is one task needing one CPU; the task runs :func:`runner.compute`, which sends
back the run's record and its files as text, and the driver (this process) writes them:
the same bytes as the local process pool's, whichever node ran the task. Every node must
have the same themis installed (the driver checks each result's code digest) and the
workload travels with the task, so the nodes need no copy of the trace.

Progress is per finished run: a task cannot report its apps back without an actor in
between, and a sweep's interest is in runs done. Ray is the ``runtime`` extra; it is
imported only here, when ``--ray`` is given.

Stopping: Ctrl-C or SIGTERM in the driver cancels the tasks not done (``force``: their
worker processes are killed) and, for ``auto``, stops the Ray this process started.
Ray's driver installs its own SIGTERM handler (``sys.exit``); the CLI's is put back so
SIGTERM unwinds as everywhere else in themis (exit 143). Ray also turns an exception that
a signal handler raises inside ``ray.wait`` into a plain ``KeyboardInterrupt``; the
engine re-raises the handler's own exception (the CLI's ``Terminated`` for SIGTERM).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from themis.errors import ThemisError
from themis.experiments.runner import Outcome, Outcomes, ProgressFn, RunRequest, compute

AUTO = "auto"
#: Seconds between checks for finished tasks (signals are handled between two).
POLL_S = 0.2
#: What starting or joining Ray changes in this process's environment.
RAY_ENVIRONMENT = ("RAY_ADDRESS", "RAY_TMPDIR", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
#: Seconds to wait for the head's port to answer before calling the address wrong.
CONNECT_TIMEOUT_S = 10.0


def require_ray(workers: int | None = None, where: str = AUTO) -> None:
    """A clear one-line error when the runtime extra is not installed, when nothing
    answers at the address ``where``, or when ``--workers`` is given too (Ray runs as
    many tasks at once as its cluster has CPUs)."""
    if workers is not None:
        raise ThemisError("--workers and --ray do not go together", field="--workers")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ThemisError(
            "needs Ray, which is not installed: pip install 'themis-scheduler[runtime]'",
            field="--ray",
        ) from None
    if where != AUTO:
        _reachable(where)


class RayEngine:
    """A context manager: called, it starts or joins Ray (once, so a batch whose runs
    are all reused starts nothing), runs the requests as tasks and yields each outcome
    as its task finishes; left, it disconnects (and stops the Ray it started)."""

    def __init__(self, where: str, cpus: int | None = None) -> None:
        self.where = where
        self.cpus = cpus
        self.temp_root: str | None = None
        #: Whether this engine connected (then it disconnects); a Ray the caller had
        #: initialised already is used and left as it was.
        self.connected = False
        #: What the SIGTERM handler raised, while Ray was in the way (module doc).
        self.signalled: BaseException | None = None
        self.previous_handler: Any = None
        #: The Ray variables of the environment as they were (put back on exit).
        self.environment = {k: os.environ.get(k) for k in RAY_ENVIRONMENT}

    def __enter__(self) -> RayEngine:
        require_ray()
        return self

    def _up(self) -> None:
        import ray

        if ray.is_initialized():
            return

        from themis.runtime.workers.ray_cluster import (
            LOOPBACK,
            loopback_addresses,
            loopback_environment,
        )

        terminate = signal.getsignal(signal.SIGTERM)
        quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
        try:
            if self.where == AUTO:
                os.environ.pop("RAY_ADDRESS", None)  # a Ray of our own, not the one named
                self.temp_root = tempfile.mkdtemp(prefix="thx-")  # short: socket paths
                loopback_environment(self.temp_root)
                ray.init(
                    num_cpus=self.cpus or os.cpu_count() or 1,
                    num_gpus=0,
                    include_dashboard=False,
                    _temp_dir=os.path.join(self.temp_root, "ray"),
                    **quiet,
                )
            else:
                _reachable(self.where)
                if self.where.rsplit(":", 1)[0] in (LOOPBACK, "localhost"):
                    loopback_addresses()
                ray.init(address=self.where, **quiet)
            self.connected = True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            self._clean()
            text = " ".join(str(exc).split())
            raise ThemisError(
                f"cannot start or join Ray at {self.where}: {text}", field="--ray"
            ) from None
        finally:
            if callable(terminate):
                self.previous_handler = terminate
                signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        try:
            self.previous_handler(signum, frame)
        except BaseException as exc:
            self.signalled = exc
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        import ray

        if self.connected:
            ray.shutdown()
            self.connected = False
        if self.previous_handler is not None:
            signal.signal(signal.SIGTERM, self.previous_handler)
            self.previous_handler = None
        for key, value in self.environment.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._clean()

    def _clean(self) -> None:
        if self.temp_root is not None:
            shutil.rmtree(self.temp_root, ignore_errors=True)
            self.temp_root = None

    def cpus_available(self) -> int:
        """The cluster's CPUs (0 while Ray is not started: nothing has run)."""
        import ray

        if not self.connected:
            return 0
        return int(ray.cluster_resources().get("CPU", 0))

    def __call__(self, requests: Sequence[RunRequest], on_progress: ProgressFn | None) -> Outcomes:
        import ray
        from ray.exceptions import RayError

        self._up()
        task = ray.remote(num_cpus=1, max_retries=0)(_run_task)
        labels: dict[Any, str] = {task.remote(r): r.label for r in requests}
        pending = list(labels)
        try:
            while pending:
                try:
                    done, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
                except KeyboardInterrupt:
                    if self.signalled is not None:
                        raise self.signalled from None
                    raise
                for ref in done:
                    try:
                        outcome: Outcome = ray.get(ref)
                    except RayError as exc:  # the worker died, the node left ...
                        text = " ".join(str(exc).split())[:300]
                        outcome = Outcome(labels[ref], None, error=f"{type(exc).__name__}: {text}")
                    if on_progress is not None:
                        apps = outcome.record.summary.apps if outcome.record else 1
                        on_progress(outcome.label, apps, apps)
                    yield outcome
        finally:  # Ctrl-C, SIGTERM, the consumer stopping: nothing keeps running
            for ref in pending:
                with contextlib.suppress(Exception):  # already finished or gone
                    ray.cancel(ref, force=True)


def _reachable(address: str) -> None:
    """A one-line error at once when nothing listens at ``HOST:PORT`` (Ray itself retries
    a wrong address for minutes before it gives up). Other forms (``ray://...``) are left
    to Ray."""
    import socket

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "/" in host:
        return
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise ThemisError(
        f"no Ray cluster answers at {address} ({reason}); start one with 'ray start --head' "
        "or use --ray auto",
        field="--ray",
    )


def _run_task(request: RunRequest) -> Outcome:
    """The task: one run, reported when done (a task has no queue back for apps)."""
    return compute(request)
