"""``themis serve | submit | status | cancel | logs | token``: the runtime on a Ray cluster.

``serve`` runs the arbiter: it owns the state directory (locked, one arbiter per state)
and serves an authenticated HTTP API. The other commands are clients of that API
(``--server`` / ``THEMIS_SERVER``, ``--token`` / ``THEMIS_TOKEN``), so they work from
any directory and any machine that can reach it, and never touch a state directory.
Ray is imported by ``serve`` only, and FastAPI/uvicorn too: ``themis --help`` stays fast
and a client machine needs no runtime extra.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from themis.cli import defaults
from themis.cli.config_file import config_option
from themis.cli.groups import HelpGroup
from themis.cli.inert import cell, inert
from themis.cli.json_output import JSON_OPTION, emit
from themis.cli.policy_flags import policy_flags_of, policy_values
from themis.errors import ThemisError
from themis.fairness.ftf import RHO_MAX
from themis.policies import PolicyOptions, policy_names
from themis.runtime.loop.options import RUNTIME_KNOBS, RUNTIME_SHOWN, ServiceOptions

#: The state directory: database, lock, operator tokens, checkpoints (unless --storage).
STATE_DIR = ".themis"
#: Where serve listens by default: loopback only.
DEFAULT_LISTEN = "127.0.0.1:7878"
_STATE = click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=STATE_DIR,
    envvar="THEMIS_STATE_DIR",
    show_default=True,
    help="The arbiter's state directory (env THEMIS_STATE_DIR).",
)
_SERVER = click.option(
    "--server",
    envvar="THEMIS_SERVER",
    default="http://127.0.0.1:7878",
    show_default=True,
    help="The arbiter's URL (env THEMIS_SERVER).",
)
_TOKEN = click.option(
    "--token",
    envvar="THEMIS_TOKEN",
    default=None,
    help="An app's token (printed by submit), or the operator's submit or admin token "
    "(env THEMIS_TOKEN).",
)


def _client(server: str, token: str | None) -> Any:
    from themis.runtime.api.client import Client

    return Client(server, token)


@click.command(short_help="Run the arbiter on a Ray cluster.")
@config_option
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
@policy_flags_of(RUNTIME_KNOBS, RUNTIME_SHOWN)
@click.option(
    "--seed",
    type=int,
    default=defaults.SEED,
    show_default=True,
    help="Seed of the policy's random choices.",
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
@click.option(
    "--start-timeout",
    type=click.FloatRange(min=0, min_open=True, max=1e9),
    default=None,
    help="Seconds a launched job may take to reach its training function before it is "
    "stopped like a lease end [default: the lease, at least 60].",
)
@click.option(
    "--restart-cost",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds one restart of a job costs, told to the policy until restarts are "
    "measured (start-up and restore, plus the save at a stop; see docs/runtime.md).",
)
@click.option(
    "--measure-restart-cost/--fixed-restart-cost",
    default=True,
    show_default=True,
    help="Measure restarts and tell the policy the cluster's estimate, or keep "
    "--restart-cost for the whole run.",
)
@click.option("--exit-when-done", is_flag=True, help="Exit once no app is submitted or running.")
@click.option(
    "--listen",
    default=DEFAULT_LISTEN,
    show_default=True,
    help="HOST:PORT of the HTTP API; port 0 picks a free one (printed, and written to "
    "STATE_DIR/server.url). Loopback unless you mean otherwise: see docs/runtime.md.",
)
@click.option("--init", is_flag=True, help="Create the state database if it does not exist.")
@click.option(
    "--url-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the API's URL here.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Serve HTTPS with this certificate (PEM).",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="The certificate's private key (PEM).",
)
def serve(
    state_dir: str,
    address: str | None,
    gpus: int,
    machines: int,
    racks: int,
    host: str,
    storage: str | None,
    policy: str,
    seed: int,
    batch_window: float,
    grace: float,
    start_timeout: float | None,
    restart_cost: float,
    measure_restart_cost: bool,
    exit_when_done: bool,
    listen: str,
    init: bool,
    url_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    **knobs: Any,
) -> None:
    """Run the Themis arbiter: start a local Ray cluster (--gpus over --machines) or join
    one (--address), serve the API on --listen, and schedule submitted apps until
    interrupted. The operator's tokens are in STATE_DIR/admin.token and submit.token."""
    from themis.runtime.api import server as api_server

    # Made first: a bad knob, or a grace not shorter than the lease, is refused before
    # anything starts.
    options = ServiceOptions(
        policy=policy,
        knobs=PolicyOptions.of({**policy_values(knobs), "seed": seed}),
        batch_window=batch_window,
        grace=grace,
        start_timeout=start_timeout,
        restart_cost=restart_cost,
        measure_restart_cost=measure_restart_cost,
    )
    api_host, port = api_server.parse_listen(listen)
    if (tls_cert is None) != (tls_key is None):
        raise ThemisError("--tls-cert and --tls-key go together", field="--tls-cert")
    try:
        import fastapi  # noqa: F401
        import ray  # noqa: F401  (the runtime extra; the simulator runs without it)
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ThemisError(
            f"the runtime needs {exc.name}: pip install 'themis-scheduler[runtime]'",
            field="serve",
        ) from None
    if not api_server.is_loopback(api_host) and tls_cert is None:
        click.echo(
            f"themis serve: warning: the API listens on {api_host} without TLS; tokens cross "
            "the network in clear (see docs/runtime.md, TLS)",
            err=True,
        )
    from themis.runtime.root import LocalCluster, ServeConfig
    from themis.runtime.root import serve as serve_runtime

    config = ServeConfig(
        state_dir=Path(state_dir),
        options=options,
        address=address,
        local=LocalCluster(gpus, machines, racks, host),
        storage=None if storage is None else Path(storage),
        exit_when_done=exit_when_done,
        listen=(api_host, port),
        init=init,
        url_file=url_file,
        tls=(tls_cert, tls_key),
    )
    serve_runtime(config, say=lambda line: click.echo(inert(line), err=True))


@click.command(short_help="Submit an app (app.yaml).")
@_SERVER
@_TOKEN
@click.argument("app_file", type=click.Path(dir_okay=False))
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the app's new token to this file (mode 0600).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check APP_FILE as the arbiter would (fields, limits, search space) and print the "
    "trials it draws; submit nothing, need no server. The arbiter still checks what only "
    "it knows: the name is free, a gang fits its cluster, the workdir exists there.",
)
@JSON_OPTION
def submit(
    server: str,
    token: str | None,
    app_file: str,
    token_file: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Submit the sweep described by APP_FILE with the operator's submit (or admin)
    token; prints the app's own token, which cancel and logs need."""
    if dry_run:
        _check_app_file(app_file, as_json)
        return
    done = _client(server, token).submit(app_file)
    if token_file is not None:
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(done["token"] + "\n")
    if as_json:
        emit(done)
    else:
        click.echo(inert(f"submitted app '{done['app_id']}' ({done['trials']} trials)"))
        click.echo(inert(f"token: {done['token']}"))
    if done.get("replayed"):
        click.echo(
            "themis submit: the arbiter had taken this submit before its answer was lost; "
            "this is that app, with a new token (the lost one is void)",
            err=True,
        )


def _check_app_file(app_file: str, as_json: bool) -> None:
    """``submit --dry-run``: the app file checked here with the arbiter's own rules."""
    from themis.runtime.state.appfile import load_app_file

    app = load_app_file(app_file)
    if as_json:
        emit({"valid": True, "app": app.to_dict()})
        return
    gang = f"{app.gpus_per_trial} GPU{'s' if app.gpus_per_trial != 1 else ''} each"
    halving = "" if app.halving is None else ", successive halving"
    click.echo(
        inert(
            f"{app_file}: valid: app '{app.name}', {app.trials} trials of {gang}, "
            f"{app.steps} steps{halving}; nothing submitted"
        )
    )
    for k, config in enumerate(app.configs):
        click.echo(inert(f"  t{k:03d} {config}"))


@click.command(short_help="Show the arbiter's liveness and every app.")
@_SERVER
@_TOKEN
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the API's answer (GET /v1/status) as JSON; with --watch one line each.",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Refresh every --every seconds until Ctrl-C (a terminal is cleared each time); "
    "an arbiter that stops answering is reported on stderr and asked again.",
)
@click.option(
    "--every",
    type=click.FloatRange(min=0.5),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between refreshes with --watch.",
)
@click.option(
    "--all",
    "every_app",
    is_flag=True,
    help="Every app the state holds, page by page; without it, the first page: active "
    "apps, then the last to end (200 in all).",
)
def status(
    server: str, token: str | None, as_json: bool, watch: bool, every: float, every_app: bool
) -> None:
    """First line: whether the arbiter is alive (its scheduling loop's last tick, Ray).
    Then one row per app: state, rho (estimated with what it holds while it runs, from
    its real finish once done), GPUs held, leases, trials alive / stopped early /
    finished / failed, steps checkpointed, and why: how it ended, or why it holds no
    GPU. An app's token shows that app only. Exit code 3 when the arbiter is not alive
    (with --watch: at the last refresh, after Ctrl-C)."""
    import json

    client = _client(server, token)
    clear = watch and not as_json and sys.stdout.isatty()
    alive = True
    last_error: str | None = None
    try:
        while True:
            try:
                answer = _status_pages(client, every_app)
            except ThemisError as exc:
                if not watch:
                    raise
                # Watching: an arbiter that stops answering is news, not the end; said
                # once, not every refresh, until it answers again or the error changes.
                alive = False
                error = exc.format()
                if error != last_error:
                    click.echo(inert(f"themis: {error}; asking again every {every:g} s"), err=True)
                    last_error = error
                time.sleep(every)
                continue
            if last_error is not None:
                click.echo("themis: the arbiter answers again", err=True)
                last_error = None
            alive = answer["arbiter"]["state"] == "alive"
            if as_json:
                # One document; with --watch one per line (JSON Lines), flushed each time.
                click.echo(json.dumps(answer, indent=None if watch else 2))
            else:
                if clear:
                    click.clear()
                _print_status(server, answer)
            if not watch:
                break
            time.sleep(every)
    except KeyboardInterrupt as exc:
        from themis.cli.main import Terminated

        if not watch or isinstance(exc, Terminated):
            raise
    if not alive:
        raise click.exceptions.Exit(3)


def _status_pages(client: Any, every_app: bool) -> dict[str, Any]:
    """The first page of ``GET /v1/status``, or every page joined (``--all``)."""
    answer = client.status()
    while every_app and answer.get("next") is not None:
        more = client.status(offset=answer["next"])
        answer = {**more, "apps": answer["apps"] + more["apps"]}
    return answer


def _print_status(server: str, answer: dict[str, Any]) -> None:
    """The liveness line and the apps' table."""
    click.echo(inert(_liveness_line(server, answer["arbiter"])))
    rows = answer["apps"]
    if not rows:
        click.echo("no apps")
        return
    _print_table(rows)
    left = int(answer.get("apps_total") or len(rows)) - len(rows)
    if left > 0:
        click.echo(
            f"... and {left} more apps that ended earlier ('themis status --all' shows them)"
        )


def _state_cell(row: dict[str, Any]) -> str:
    """The app's state, and the tuner that drives it if any (its kind: the sampler and
    pruner are in ``--json``)."""
    tuner = row.get("tuner")
    return f"{row['state']} ({tuner.split()[0]})" if tuner else str(row["state"])


#: The narrowest the reason column may be; below it, reasons go under the table.
MIN_WHY = 24


def _print_table(rows: list[dict[str, Any]], width: int | None = None) -> None:
    """The apps' table at the terminal's width (a fixed 160 wrapped every row on 80
    columns). Figures never wrap; where the reason column would be narrower than
    ``MIN_WHY``, each app's reason is printed under the table, one line each."""
    from themis.cli.runs import table_width

    width = width or table_width()
    heads = ("app", "state", "rho", "GPUs", "leases", "alive", "early", "done", "failed", "steps")
    cells = [
        [
            r["app_id"],
            _state_cell(r),
            _rho(r["rho"]),
            str(r["gpus"]),
            str(r["leases"]),
            str(r["alive"]),
            str(r["stopped_early"] + r.get("pruned", 0)),
            str(r["finished"]),
            str(r["failed"]),
            f"{r['steps_done']}/{r['steps_total']}",
        ]
        for r in rows
    ]
    drawn = sum(max(len(h), *(len(c[k]) for c in cells)) + 2 for k, h in enumerate(heads))
    why_below = width - drawn < MIN_WHY
    table = Table(box=None, pad_edge=False)
    for name in heads:
        left = name in ("app", "state")
        if name == "app":  # names are up to 64 characters: folded, never cut
            table.add_column(name, justify="left", overflow="fold")
        else:
            table.add_column(name, justify="left" if left else "right", no_wrap=True)
    if not why_below:
        table.add_column("why", justify="left", overflow="fold")
    for r, row_cells in zip(rows, cells, strict=True):
        # Cells are inert Text: a reason may quote a trial's error, and a string cell
        # would be parsed as rich markup ("[link=...]" is a hyperlink escape).
        extra = [] if why_below else [r["why"] or ""]
        table.add_row(*map(cell, [*row_cells, *extra]))
    console = Console(highlight=False, width=width)
    console.print(table)
    if why_below:
        for r in rows:
            if r["why"]:
                console.print(cell(f"{r['app_id']}: {r['why']}"), overflow="fold")


def _liveness_line(server: str, a: dict[str, Any]) -> str:
    up = time.time() - a["started"]
    down = a.get("ray_down_since")
    down_for = "" if down is None else f" for {time.time() - down:.0f}s"
    what = {
        "alive": "alive",
        "stalled": "STALLED (its scheduling loop stopped ticking)",
        "ray-unreachable": f"RAY UNREACHABLE{down_for} ({a['ray_error']}; leases lost, "
        "trials resume when Ray is back)",
    }[a["state"]]
    return (
        f"arbiter {what} at {server}: last tick {a['age']:.1f}s ago, up {up / 60:.0f} min, "
        f"{a['gpus']} GPUs on {a['machines']} machines, {a['rounds']} rounds"
    )


@click.command(short_help="Cancel an app.")
@_SERVER
@_TOKEN
@click.argument("app")
@click.option(
    "--wait",
    type=click.FloatRange(min=0, max=120),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the arbiter; past them the cancel is withdrawn, never done.",
)
def cancel(server: str, token: str | None, app: str, wait: float) -> None:
    """Cancel APP (its token, or the admin token): its jobs checkpoint and stop, its GPUs
    go back to the arbiter."""
    click.echo(inert(_client(server, token).cancel(app, wait)))


@click.command(short_help="Show an app's event log.")
@_SERVER
@_TOKEN
@click.argument("app")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until the app ends.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print each event as one JSON object per line (JSON Lines: {"app", "line"}), '
    "with --follow as they come.",
)
def logs(server: str, token: str | None, app: str, follow: bool, as_json: bool) -> None:
    """APP's events (its token, or the admin token): admission, leases granted, renewed
    and ended, checkpoints, early stops, failures, and what its trials logged."""
    import json

    client = _client(server, token)
    last = 0
    while True:
        answer = client.logs(app, last)
        for line in answer["lines"]:
            if as_json:  # JSON escapes every control character: inert as it is
                click.echo(json.dumps({"app": app, "line": line}))
            else:
                click.echo(inert(line))  # what trials logged: never raw to a terminal
        more = answer["last"] != last
        last = answer["last"]
        if more:
            continue  # a page of at most 1000 events: fetch the next at once
        if not follow or answer["state"] not in ("submitted", "running"):
            break
        time.sleep(0.5)


@click.group(cls=HelpGroup, short_help="Rotate the operator's API tokens.")
def token() -> None:
    """The operator's API tokens (admin, submit)."""


@token.command(short_help="Make a new admin or submit token; the old one is refused.")
@_SERVER
@_TOKEN
@click.argument("which", type=click.Choice(["admin", "submit"]))
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the new token to this file (mode 0600).",
)
def rotate(server: str, token: str | None, which: str, token_file: str | None) -> None:
    """Replace the operator's WHICH token (admin or submit) while serve runs, with the
    admin token: the new one is printed and written to the state directory's token file,
    and the old one is refused from now on (hand the new submit token to the users;
    update what scrapes /metrics after an admin rotation)."""
    done = _client(server, token).rotate(which)
    if token_file is not None:
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(done["token"] + "\n")
    click.echo(f"rotated the {which} token: the old one is refused from now on")
    click.echo(inert(f"token: {done['token']}"))


def _rho(value: float | None) -> str:
    """rho for the table: '-' before admission, 'inf' for an app that holds nothing and so
    could never finish as it stands (the estimator's cap)."""
    if value is None:
        return "-"
    return "inf" if value >= RHO_MAX else f"{value:.3f}"


#: The commands the main ``themis`` group adds (``cli.add_command`` each).
COMMANDS = (serve, submit, status, cancel, logs, token)
