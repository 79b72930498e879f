"""``themis serve | submit | status | cancel | logs``: the runtime on a Ray cluster.

``serve`` runs the arbiter; the others talk to it through the state directory's database
(``runtime.client``), so they work from any shell on the arbiter's machine and need no
network port. Ray is imported by ``serve`` only.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from themis.cli import defaults
from themis.errors import ThemisError
from themis.fairness.ftf import RHO_MAX
from themis.policies import policy_names

#: The state directory: database, checkpoints (unless --storage), nothing else.
STATE_DIR = ".themis"

_STATE = click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=STATE_DIR,
    envvar="THEMIS_STATE_DIR",
    show_default=True,
    help="The arbiter's state directory (env THEMIS_STATE_DIR).",
)
_TOKEN = click.option(
    "--token",
    envvar="THEMIS_TOKEN",
    default=None,
    help="The app's token, printed by submit (env THEMIS_TOKEN).",
)


def _store(state_dir: str) -> Any:
    from themis.runtime.store import Store

    return Store(state_dir)


@click.command(short_help="Run the arbiter on a Ray cluster.")
@_STATE
@click.option("--address", default=None, help="Join this Ray cluster instead of starting one.")
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Logical GPUs of the local cluster.",
)
@click.option(
    "--machines",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Ray nodes the local cluster's GPUs are split over.",
)
@click.option(
    "--racks",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Racks the local machines are split over (label themis.rack).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address the local Ray nodes bind; loopback unless you mean otherwise.",
)
@click.option(
    "--storage",
    type=click.Path(file_okay=False),
    default=None,
    help="Checkpoint directory (default: STATE_DIR/checkpoints); shared by all nodes.",
)
@click.option(
    "--policy", type=click.Choice(policy_names()), default=defaults.POLICY, show_default=True
)
@click.option(
    "--lease",
    "lease_s",
    type=click.FloatRange(min=0, min_open=True),
    default=defaults.LEASE_S,
    show_default=True,
    help="Lease length in seconds.",
)
@click.option(
    "--fairness-knob",
    type=click.FloatRange(0, 1, max_open=True),
    default=defaults.FAIRNESS_KNOB,
    show_default=True,
)
@click.option(
    "--batch-window",
    type=click.FloatRange(min=0),
    default=defaults.BATCH_WINDOW_S,
    show_default=True,
    help="Lease ends this close (s) share one round.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds a job may take to checkpoint after its lease ends.",
)
@click.option("--exit-when-done", is_flag=True, help="Exit once no app is submitted or running.")
def serve(
    state_dir: str,
    address: str | None,
    gpus: int,
    machines: int,
    racks: int,
    host: str,
    storage: str | None,
    policy: str,
    lease_s: float,
    fairness_knob: float,
    batch_window: float,
    grace: float,
    exit_when_done: bool,
) -> None:
    """Run the Themis arbiter: start a local Ray cluster (--gpus over --machines) or join
    one (--address), then schedule submitted apps until interrupted."""
    try:
        import ray  # noqa: F401  (the runtime extra; the simulator runs without it)
    except ImportError:
        raise ThemisError(
            "the runtime needs Ray: pip install 'themis-scheduler[runtime]'", field="serve"
        ) from None
    from themis.runtime import ray_cluster
    from themis.runtime.arbiter_service import ArbiterService, ServiceOptions

    store = _store(state_dir)
    options = ServiceOptions(
        policy=policy,
        lease=lease_s,
        fairness_knob=fairness_knob,
        batch_window=batch_window,
        grace=grace,
    )
    local = None
    if address is None:
        local = ray_cluster.start_local(gpus, machines, racks, host)
        where = f"local Ray cluster {local.address} ({machines} machines, {gpus} GPUs)"
    else:
        ray_cluster.connect(address)
        where = f"Ray cluster {address}"
    import ray

    stopping = {"flag": False}

    def stop(signum: int, frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        service = ArbiterService(
            store, Path(storage or Path(state_dir) / "checkpoints").resolve(), options, ray.nodes
        )
        cluster = service.cluster
        click.echo(
            f"themis serve: {where}; "
            f"{cluster.describe() if cluster else 'no GPUs yet'}; state in {state_dir}",
            err=True,
        )
        try:
            service.run(lambda: stopping["flag"], exit_when_done=exit_when_done)
        finally:
            service.shutdown()
    finally:
        store.close()
        if local is not None:
            local.shutdown()
        else:
            ray.shutdown()


@click.command(short_help="Submit an app (app.yaml).")
@_STATE
@click.argument("app_file", type=click.Path(dir_okay=False))
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the token to this file (mode 0600).",
)
def submit(state_dir: str, app_file: str, token_file: str | None) -> None:
    """Submit the sweep described by APP_FILE; prints the app's token, which cancel
    needs."""
    from themis.runtime.client import submit as submit_app

    store = _store(state_dir)
    try:
        done = submit_app(store, app_file)
    finally:
        store.close()
    if token_file is not None:
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(done.token + "\n")
    click.echo(f"submitted app '{done.app_id}' ({done.trials} trials)")
    click.echo(f"token: {done.token}")


@click.command(short_help="Show apps, rho, GPUs, leases and trials.")
@_STATE
def status(state_dir: str) -> None:
    """One row per app: state, rho (estimated with what it holds while it runs, from its
    real finish once done), GPUs held, leases, trials alive/stopped/finished/failed, steps
    checkpointed."""
    from themis.runtime.client import status_rows

    store = _store(state_dir)
    try:
        rows = status_rows(store)
    finally:
        store.close()
    if not rows:
        click.echo("no apps")
        return
    table = Table(box=None, pad_edge=False)
    for name in ("app", "state", "rho", "GPUs", "leases", "alive", "stopped", "done", "failed"):
        table.add_column(name, justify="left" if name in ("app", "state") else "right")
    table.add_column("steps", justify="right")
    for r in rows:
        table.add_row(
            r.app_id,
            r.state,
            _rho(r.rho),
            str(r.gpus),
            str(r.leases),
            str(r.alive),
            str(r.stopped),
            str(r.finished),
            str(r.failed),
            f"{r.steps_done}/{r.steps_total}",
        )
    Console(highlight=False, width=120).print(table)


@click.command(short_help="Cancel an app.")
@_STATE
@click.argument("app")
@_TOKEN
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the arbiter's answer.",
)
def cancel(state_dir: str, app: str, token: str | None, wait: float) -> None:
    """Cancel APP: its jobs checkpoint and stop, its GPUs go back to the arbiter."""
    from themis.runtime.client import send_request

    store = _store(state_dir)
    try:
        click.echo(send_request(store, "cancel", app, token, wait=wait))
    finally:
        store.close()


@click.command(short_help="Show an app's event log.")
@_STATE
@click.argument("app")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until the app ends.")
def logs(state_dir: str, app: str, follow: bool) -> None:
    """APP's events: admission, leases granted, renewed and ended, checkpoints, early
    stops, failures, and what its trials logged (trial.log)."""
    from themis.runtime.client import log_lines

    store = _store(state_dir)
    try:
        lines, last = log_lines(store, app)
        for line in lines:
            click.echo(line)
        while follow:
            row = store.app(app)
            if row is None or row.state not in ("submitted", "running"):
                break
            time.sleep(0.5)
            lines, last = log_lines(store, app, last)
            for line in lines:
                click.echo(line)
    finally:
        store.close()


def _rho(value: float | None) -> str:
    """rho for the table: '-' before admission, 'inf' for an app that holds nothing and so
    could never finish as it stands (the estimator's cap)."""
    if value is None:
        return "-"
    return "inf" if value >= RHO_MAX else f"{value:.3f}"


#: The commands the main ``themis`` group adds (``cli.add_command`` each).
COMMANDS = (serve, submit, status, cancel, logs)
