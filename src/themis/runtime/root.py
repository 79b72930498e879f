"""The composition root of ``themis serve``: the one place that builds the rooms and
owns their start-up and shut-down order.

Start-up goes bottom up, each step refused before the next costs anything: the state
(lock, then store), the operator's tokens, the API's socket (a port in use is refused
before Ray starts), Ray (a local cluster and its reaper, or the given address) and the
driver that reaches it, then the loop, then the API on the socket already bound. The
loop runs on this thread until a signal or, with ``exit_when_done``, until nothing is
left; shut-down goes top down: the loop checkpoints its jobs, the API stops, then Ray.

Nothing else wires the rooms together: the CLI parses flags into a :class:`ServeConfig`
and calls :func:`serve`; no room imports this module.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.runtime.loop.options import ServiceOptions


@dataclass(frozen=True)
class LocalCluster:
    """The shape of the local Ray cluster serve starts when it joins none."""

    gpus: int
    machines: int
    racks: int
    host: str


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``themis serve`` was asked, checked by the CLI."""

    state_dir: Path
    options: ServiceOptions
    address: str | None  # a Ray cluster to join; None: start a local one
    local: LocalCluster
    storage: Path | None  # checkpoints; None: STATE_DIR/checkpoints
    exit_when_done: bool
    listen: tuple[str, int]
    init: bool
    url_file: str | None
    tls: tuple[str | None, str | None]

    @property
    def checkpoints(self) -> Path:
        return (self.storage or self.state_dir / "checkpoints").resolve()


def serve(config: ServeConfig, say: Callable[[str], None]) -> None:
    """Run the arbiter until a signal (or, with ``exit_when_done``, until idle); ``say``
    prints one line for the operator."""
    from themis.runtime.state.lock import StateLock
    from themis.runtime.state.store import DB_NAME, Store

    if not config.init and not (config.state_dir / DB_NAME).exists():
        Store(config.state_dir)  # refused with its one line; nothing is created
    lock = StateLock(config.state_dir)
    try:
        store = Store(config.state_dir, init=config.init)
    except BaseException:
        lock.release()
        raise
    try:
        _serve_with_state(config, store, say)
    finally:
        store.close()
        lock.release()


def _serve_with_state(config: ServeConfig, store: Any, say: Callable[[str], None]) -> None:
    from themis.runtime.api import server as api_server
    from themis.runtime.api.auth import OperatorTokens
    from themis.runtime.workers import ray_cluster, reaper
    from themis.runtime.workers.ray_driver import RayDriver

    tokens = OperatorTokens.load_or_create(config.state_dir)
    listening = api_server.ApiServer.bind(*config.listen)  # a port in use: refused before Ray
    api_server.forget_private_env()
    local = None
    watchdog = None
    address = config.address
    if address is None:
        shape = config.local
        # serve itself is never a Ray driver: the driver runs in a child process that
        # may die with Ray while serve goes on (ray_driver.py, docs/runtime.md).
        local = ray_cluster.start_local(
            shape.gpus, shape.machines, shape.racks, shape.host, connect=False
        )
        # Ends this run's Ray processes and removes its temp dir if serve dies unstopped
        # (kill -9 included): they lingered for minutes, the directory for ever.
        watchdog = reaper.start(local.temp_root)  # held (its pipe open) until serve ends
        address = local.address
        where = f"local Ray cluster {local.address} ({shape.machines} machines, {shape.gpus} GPUs)"
    else:
        where = f"Ray cluster {address}"
    try:
        driver = RayDriver(address, config.options.grace)
        driver.wait_connected(timeout=180)
    except BaseException:
        listening.close()
        if local is not None:
            local.shutdown()
        raise
    try:
        _run_loop_and_api(config, store, tokens, driver, listening, where, say)
    finally:
        driver.close()
        if local is not None:
            local.shutdown()
        if watchdog is not None and watchdog.stdin is not None:
            watchdog.stdin.close()  # stopped cleanly: it finds nothing left, and exits


def _run_loop_and_api(
    config: ServeConfig,
    store: Any,
    tokens: Any,
    driver: Any,
    listening: Any,
    where: str,
    say: Callable[[str], None],
) -> None:
    from themis.runtime.api import server as api_server
    from themis.runtime.api.auth import ADMIN_TOKEN_FILE, SUBMIT_TOKEN_FILE
    from themis.runtime.api.routes import ApiContext, make_api
    from themis.runtime.loop.commands import CommandQueue
    from themis.runtime.loop.metrics import ArbiterMetrics
    from themis.runtime.loop.service import ArbiterService

    stopping = {"flag": False}

    def stop(signum: int, frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    api = None
    state_dir = config.state_dir
    try:
        metrics = ArbiterMetrics()
        commands = CommandQueue()
        service = ArbiterService(
            store,
            config.checkpoints,
            config.options,
            driver.nodes,
            launcher=driver,
            metrics=metrics,
            commands=commands,
        )
        context = ApiContext(
            state_dir, tokens, commands, service.snapshot, metrics, service.cluster_view
        )
        api = api_server.ApiServer.start(
            make_api(context),
            *config.listen,
            *config.tls,
            sock=listening,
            metrics=context.api_metrics,
        )
        api_server.write_url(state_dir, api.url, config.url_file)
        cluster = service.cluster
        described = cluster.describe() if cluster else "no GPUs yet"
        say(f"themis serve: {where}; {described}; state in {state_dir}")
        say(
            f"themis serve: listening on {api.url} (tokens: {state_dir / ADMIN_TOKEN_FILE}, "
            f"{state_dir / SUBMIT_TOKEN_FILE})"
        )
        say(f"themis serve: dashboard at {api.url}/dashboard (it asks for a token)")
        try:
            service.run(lambda: stopping["flag"], exit_when_done=config.exit_when_done)
        finally:
            service.shutdown()
    finally:
        if api is not None:
            api.stop()
