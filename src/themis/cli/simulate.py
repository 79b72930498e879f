"""``themis simulate`` (one policy) and ``themis compare`` (several, one table)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from themis.cli import defaults
from themis.cli.run_options import (
    RunConfig,
    check_policies,
    describe,
    load_inputs,
    make_config,
    run_options,
)
from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.workload import Workload
from themis.policies import make_policy, policy_names
from themis.reports import AppRow, RunSummary, app_rows, summarize, summary_table, write_run
from themis.reports.files import COMPARISON_FILE, ensure_dir, summary_dict, write_json
from themis.simulator import SimulationResult
from themis.simulator import simulate as run_simulation

_QUIET = click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar (it is also off when stderr is not a TTY)."
)


@contextmanager
def _progress(show: bool) -> Iterator[Progress]:
    """A progress bar on stderr, drawn only when asked for and stderr is a terminal."""
    console = Console(file=sys.stderr)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("apps finished"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (show and console.is_terminal),
    )
    with progress:
        yield progress


def _run_one(
    policy: str, workload: Workload, cluster: Cluster, config: RunConfig, progress: Progress
) -> tuple[RunSummary, SimulationResult, list[AppRow]]:
    task = progress.add_task(policy, total=len(workload.apps))

    def finished(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    result = run_simulation(
        workload,
        cluster,
        make_policy(policy, config.policy_options()),
        batch_window=config.batch_window_s,
        on_app_finished=finished,
    )
    rows = app_rows(result)
    return summarize(result, rows), result, rows


def _print_table(summaries: list[RunSummary]) -> None:
    Console(highlight=False).print(summary_table(summaries))


@click.command(short_help="Replay a trace under one policy.")
@click.option(
    "--policy",
    default=defaults.POLICY,
    show_default=True,
    help="A registered policy (list them with 'themis policies').",
)
@run_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Output directory  [default: {defaults.OUT_DIR}/<policy>]",
)
@_QUIET
def simulate(policy: str, out: Path | None, quiet: bool, **options: Any) -> None:
    """Replay a trace under one policy; print a summary and write summary.json, apps.csv
    and allocations.csv (metrics: docs/metrics.md)."""
    config = make_config(**options)
    check_policies([policy], "--policy")
    workload, cluster = load_inputs(config)
    out_dir = out if out is not None else Path(defaults.OUT_DIR) / policy
    ensure_dir(out_dir)
    click.echo(describe(workload, cluster, config))
    with _progress(not quiet) as progress:
        summary, result, rows = _run_one(policy, workload, cluster, config, progress)
    write_run(out_dir, result, summary, rows, {"policy": policy, **config.to_dict()})
    _print_table([summary])
    click.echo(f"wrote {out_dir}/")


def _parse_policies(text: str | None) -> list[str]:
    if text is None:
        names = policy_names()
        first = [defaults.POLICY] if defaults.POLICY in names else []
        return first + [n for n in names if n != defaults.POLICY]
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise ThemisError(f"empty policy name in '{text}'", field="--policies")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ThemisError(f"policy '{name}' listed twice", field="--policies")
        seen.add(name)
    check_policies(names, "--policies")
    return names


@click.command(short_help="Replay a trace under several policies, one table.")
@click.option(
    "--policies",
    default=None,
    metavar="A,B,...",
    help=f"Comma-separated policies  [default: all registered, {defaults.POLICY} first]",
)
@run_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Output directory  [default: {defaults.OUT_DIR}/compare]",
)
@_QUIET
def compare(policies: str | None, out: Path | None, quiet: bool, **options: Any) -> None:
    """Replay one trace under several policies; print one table and write each run to
    OUT/<policy>/ plus OUT/comparison.json."""
    config = make_config(**options)
    names = _parse_policies(policies)
    workload, cluster = load_inputs(config)
    out_dir = out if out is not None else Path(defaults.OUT_DIR) / "compare"
    ensure_dir(out_dir)
    click.echo(describe(workload, cluster, config))
    summaries = []
    with _progress(not quiet) as progress:
        for name in names:
            summary, result, rows = _run_one(name, workload, cluster, config, progress)
            write_run(out_dir / name, result, summary, rows, {"policy": name, **config.to_dict()})
            summaries.append(summary)
    write_json(
        out_dir / COMPARISON_FILE,
        {"config": config.to_dict(), "runs": [summary_dict(s) for s in summaries]},
    )
    _print_table(summaries)
    click.echo(f"wrote {out_dir}/")
