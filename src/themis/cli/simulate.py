"""``themis simulate`` (one policy) and ``themis compare`` (several, one table)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from themis.cli import defaults
from themis.cli.progress import QUIET, RunsProgress, progress_bar
from themis.cli.run_options import (
    RunConfig,
    check_policies,
    describe,
    load_inputs,
    make_config,
    parse_policies,
    run_options,
    workers_option,
)

if TYPE_CHECKING:  # the runner and the reports (numpy, matplotlib) load when a run starts
    from themis.experiments.runner import RunRequest
    from themis.model.workload import Workload
    from themis.reports import RunSummary
    from themis.reports.record import RunRecord


def _request(policy: str, workload: Workload, config: RunConfig, out_dir: Path) -> RunRequest:
    from themis.experiments.runner import RunRequest

    return RunRequest(
        policy,
        policy,
        workload,
        config.cluster,
        config.policy_options(),
        config.batch_window_s,
        out_dir=out_dir,
        config={"policy": policy, **config.to_dict()},
    )


def _run(
    requests: list[RunRequest], workers: int | None, quiet: bool, what: str
) -> list[RunRecord]:
    from themis.experiments.runner import run_many

    with progress_bar(not quiet) as progress:
        return run_many(requests, workers, RunsProgress(progress, len(requests), what))


#: Width of tables written to a file or a pipe (rich would assume 80 columns and squeeze).
_PIPE_WIDTH = 120


def _print_table(summaries: list[RunSummary]) -> None:
    from rich.console import Console

    from themis.reports.tables import comparison_table

    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = _PIPE_WIDTH
    console.print(comparison_table(summaries))


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
@QUIET
def simulate(policy: str, out: Path | None, quiet: bool, **options: Any) -> None:
    """Replay a trace under one policy; print a summary and write summary.json, apps.csv
    and allocations.csv (metrics: docs/metrics.md)."""
    config = make_config(**options)
    check_policies([policy], "--policy")
    workload, cluster = load_inputs(config)
    from themis.reports.files import ensure_dir  # after the checks: errors stay quick

    out_dir = out if out is not None else Path(defaults.OUT_DIR) / policy
    ensure_dir(out_dir)
    click.echo(describe(workload, cluster, config))
    [record] = _run([_request(policy, workload, config, out_dir)], 1, quiet, "run")
    _print_table([record.summary])
    click.echo(f"wrote {out_dir}/")


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
@click.option(
    "--report",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write DIR/report.html: the table and plots, one self-contained file.",
)
@workers_option
@QUIET
def compare(
    policies: str | None,
    out: Path | None,
    report: Path | None,
    workers: int | None,
    quiet: bool,
    **options: Any,
) -> None:
    """Replay one trace under several policies; print one table and write each run to
    OUT/<policy>/ plus OUT/comparison.json."""
    config = make_config(**options)
    names = parse_policies(policies, "--policies")
    workload, cluster = load_inputs(config)
    from themis.reports.files import COMPARISON_FILE, ensure_dir, summary_dict, write_json

    out_dir = out if out is not None else Path(defaults.OUT_DIR) / "compare"
    ensure_dir(out_dir)
    if report is not None:
        ensure_dir(report)
    click.echo(describe(workload, cluster, config))
    requests = [_request(name, workload, config, out_dir / name) for name in names]
    records = _run(requests, workers, quiet, "policies")
    summaries = [r.summary for r in records]
    write_json(
        out_dir / COMPARISON_FILE,
        {"config": config.to_dict(), "runs": [summary_dict(s) for s in summaries]},
    )
    _print_table(summaries)
    click.echo(f"wrote {out_dir}/")
    if report is not None:
        from themis.reports.comparison import comparison_section  # matplotlib
        from themis.reports.html import write_report

        meta = [describe(workload, cluster, config), f"configuration: {config.to_dict()}"]
        section = comparison_section(records, "Comparison")
        path = write_report(report, "Themis: policy comparison", meta, [section])
        click.echo(f"wrote {path}")
