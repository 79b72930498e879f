"""``themis compare``: several policies on one workload, over one seed or several.

With ``--seeds`` every policy runs once per seed, each seed on its own draw of the
workload (``RunConfig.with_seed``); the table shows the median and the range (min-max)
per metric, the runs' files go to ``OUT/seed<s>/<policy>/``. Matplotlib is imported only
when a report is asked for, so that the command line starts fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from themis.cli import defaults
from themis.cli.config_file import config_option
from themis.cli.json_output import JSON_OPTION, emit, say
from themis.cli.progress import QUIET
from themis.cli.run_options import (
    RunConfig,
    describe,
    load_inputs,
    make_config,
    parse_policies,
    ray_option,
    run_options,
    workers_option,
)
from themis.cli.seeds import parse_seeds, seed_given, seeds_from_config_yield, seeds_option
from themis.cli.simulate import simulate_options

if TYPE_CHECKING:  # the runner and the reports (numpy, rich) load once a run starts
    from themis.experiments.runner import RunRequest
    from themis.reports.record import RunRecord


@click.command(short_help="Replay a trace under several policies, one table.")
@config_option
@click.option(
    "--policies",
    default=None,
    metavar="A,B,...",
    help=f"Comma-separated policies  [default: all registered, {defaults.POLICY} first]",
)
@run_options
@seeds_option
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
@ray_option
@QUIET
@JSON_OPTION
def compare(
    policies: str | None,
    seeds: str | None,
    out: Path | None,
    report: Path | None,
    workers: int | None,
    ray_address: str | None,
    quiet: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Replay one workload under several policies; print one table and write each run to
    OUT/<policy>/ (with --seeds: OUT/seed<s>/<policy>/) plus OUT/comparison.json. Each run
    is saved as it finishes; the same command again reuses the runs whose inputs did not
    change."""
    config = make_config(**options)
    names = parse_policies(policies, "--policies")
    seed_list = parse_seeds(seeds_from_config_yield(seeds), seed_given())
    out_dir = out if out is not None else Path(defaults.OUT_DIR) / "compare"
    configs = [config] if seed_list is None else [config.with_seed(s) for s in seed_list]
    if ray_address is not None:  # before anything is read or cleared
        from themis.experiments.ray_engine import require_ray

        require_ray(workers, ray_address)
    from themis.cli.out_dir import claim
    from themis.cli.runs import engine, request, run  # after the option checks: quick errors
    from themis.reports.files import ensure_dir

    requests: list[RunRequest] = []
    lines = []
    for seeded in configs:
        workload, cluster = load_inputs(seeded)
        line = describe(workload, cluster, seeded)
        each = {n: simulate_options(options, policy=n, seed=seeded.seed) for n in names}
        if seed_list is None:
            requests += [request(n, workload, seeded, out_dir / n, None, each[n]) for n in names]
        else:
            line = f"seed {seeded.seed}: {line}"
            where = out_dir / f"seed{seeded.seed}"
            requests += [
                request(n, workload, seeded, where / n, f"{n} seed {seeded.seed}", each[n])
                for n in names
            ]
        lines.append(line)
        say(line, as_json)
    settings = config.to_dict()
    if seed_list is not None:
        settings = {**{k: v for k, v in settings.items() if k != "seed"}, "seeds": seed_list}
    runs = [q.out_dir.relative_to(out_dir).as_posix() for q in requests if q.out_dir]
    claim(out_dir, "compare", settings, runs)
    if report is not None:
        ensure_dir(report)
    what = "policies" if seed_list is None else "runs"
    with engine(ray_address) as chosen:
        records = run(requests, workers, quiet, what, chosen, note=lambda t: say(t, as_json))
    if seed_list is None:
        payload = _one_seed(config, records, out_dir, not as_json)
    else:
        payload = _seeds(config, seed_list, requests, records, out_dir, not as_json)
    say(f"wrote {out_dir}/", as_json)
    path = None
    if report is not None:
        path = _report(report, config, seed_list, requests, records, lines)
        say(f"wrote {path}", as_json)
    if as_json:
        emit({"workload": lines, **payload, "out": str(out_dir), "report": path})


def _one_seed(
    config: RunConfig, records: list[RunRecord], out_dir: Path, table: bool
) -> dict[str, Any]:
    """Write OUT/comparison.json (and print the table if ``table``); returns its payload."""
    from themis.cli.runs import print_table, table_width
    from themis.reports.files import COMPARISON_FILE, summary_dict, write_json
    from themis.reports.tables import comparison_tables

    summaries = [r.summary for r in records]
    payload = {"config": config.to_dict(), "runs": [summary_dict(s) for s in summaries]}
    write_json(out_dir / COMPARISON_FILE, payload)
    if table:
        for one in comparison_tables(summaries, width=table_width()):
            print_table(one)
    return payload


def _seeds(
    config: RunConfig,
    seed_list: list[int],
    requests: list[RunRequest],
    records: list[RunRecord],
    out_dir: Path,
    table: bool,
) -> dict[str, Any]:
    """Write OUT/comparison.json with the aggregate over seeds (and print the table if
    ``table``); returns its payload."""
    from themis.cli.runs import print_table
    from themis.reports.files import COMPARISON_FILE, summary_dict, write_json
    from themis.reports.seeds import JOB_SEED_METRICS, aggregate_dict, by_policy, seeds_table

    grouped = by_policy([(q.policy, r.summary) for q, r in zip(requests, records, strict=True)])
    settings = {k: v for k, v in config.to_dict().items() if k != "seed"}
    payload = {
        "config": {**settings, "seeds": seed_list},
        "runs": [
            {"seed": q.params["seed"], **summary_dict(r.summary)}
            for q, r in zip(requests, records, strict=True)
        ],
        "aggregate": aggregate_dict(grouped),
    }
    write_json(out_dir / COMPARISON_FILE, payload)
    if table:
        seeds = ", ".join(map(str, seed_list))
        print_table(seeds_table(grouped, f"median (min-max) over seeds {seeds}"))
        print_table(
            seeds_table(grouped, f"jobs, median (min-max) over seeds {seeds}", JOB_SEED_METRICS)
        )
    return payload


def _report(
    report: Path,
    config: RunConfig,
    seed_list: list[int] | None,
    requests: list[RunRequest],
    records: list[RunRecord],
    lines: list[str],
) -> Path:
    # Imported here: matplotlib takes a second to import, and only reports need it.
    from themis.reports.comparison import (
        apps_section,
        comparison_figures,
        jobs_section,
        seeds_section,
        single,
    )
    from themis.reports.html import Section, config_table, summary_rows_table, write_report

    settings = config.to_dict()
    if seed_list is None:
        groups = single(records)
        table = summary_rows_table([r.summary for r in records])
        main = Section("Comparison", "", [table], comparison_figures(groups))
    else:
        settings = {**{k: v for k, v in settings.items() if k != "seed"}, "seeds": seed_list}
        groups = {}
        for q, r in zip(requests, records, strict=True):
            groups.setdefault(q.policy, []).append((int(q.params["seed"]), r))
        main = seeds_section(groups, "Comparison")
    from themis.cli.main import command_line

    setup = Section("Configuration", "", [config_table(settings, "")])
    # Results first: the configuration is for who checks how they were made.
    sections = [main, jobs_section(groups), apps_section(groups), setup]
    return write_report(report, "Themis: policy comparison", lines, sections, command_line())
