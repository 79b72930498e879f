"""``themis experiment paper``: the paper's evaluation in one command;
``themis experiment truthfulness``: what a lying app gains under each policy."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from themis.cli import defaults
from themis.cli.groups import HelpGroup
from themis.cli.progress import QUIET, RunsProgress, progress_bar
from themis.cli.run_options import (
    describe,
    load_inputs,
    make_config,
    parse_policies,
    run_options,
    workers_option,
)
from themis.cli.seeds import parse_seeds, seed_on_command_line, seeds_option
from themis.errors import ThemisError


@click.group(cls=HelpGroup, short_help="Run a predefined experiment (the paper's evaluation).")
def experiment() -> None:
    """Predefined experiments: many simulations, one report."""


@experiment.command(short_help="Reproduce the paper's evaluation on the HyperDrive trace.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(defaults.OUT_DIR) / "paper",
    show_default=True,
    help="Where report.html, results.md and results.json go.",
)
@click.option(
    "--policies",
    default=None,
    metavar="A,B,...",
    help="Policies of the main comparison (sweeps keep theirs among these)  "
    "[default: all registered]",
)
@workers_option
@click.option(
    "--seed",
    type=int,
    default=defaults.SEED,
    show_default=True,
    help="Seed of the model draw, the variants' draws and every policy's random choices.",
)
@seeds_option
@QUIET
def paper(
    out: Path,
    policies: str | None,
    workers: int | None,
    seed: int,
    seeds: str | None,
    quiet: bool,
) -> None:
    """The main comparison of every policy on the bundled HyperDrive workload (64 GPUs),
    then sweeps of the fairness knob, the lease length, contention, the share of
    placement-sensitive apps, estimate error, restart cost and GPU types. Writes
    OUT/report.html (tables and plots), OUT/results.md and OUT/results.json. With --seeds
    every run is repeated per seed (tables: median and range; plots: a line per seed, or
    a band)."""
    names = parse_policies(policies, "--policies")
    seed_list = parse_seeds(seeds, seed_on_command_line()) or [seed]
    # Loaded after the options are checked, so that a mistake answers at once (the
    # report's matplotlib and the runner are not needed for it).
    from themis.experiments.paper import CLUSTER, plan
    from themis.experiments.runner import default_workers, run_many
    from themis.workload import load_workload

    workloads = {s: load_workload(defaults.TRACE, seed=s) for s in seed_list}
    workload = workloads[seed_list[0]]
    the_plan = plan(workloads, names)
    seed_text = f"seed {seed}" if seeds is None else f"seeds {', '.join(map(str, seed_list))}"
    if not out.exists():
        out.mkdir(parents=True)
    elif not out.is_dir():
        raise ThemisError("exists and is not a directory", source=str(out), field="--out")
    n_workers = default_workers(len(the_plan.requests)) if workers is None else workers
    click.echo(
        f"{len(the_plan.requests)} simulations of {workload.source} on {CLUSTER} "
        f"({len(workload.apps)} apps, {workload.job_count:,} jobs; {seed_text}), "
        f"{n_workers} at a time"
    )
    started = time.monotonic()
    with progress_bar(not quiet) as progress:
        records = run_many(
            the_plan.requests, n_workers, RunsProgress(progress, len(the_plan.requests))
        )
    elapsed = time.monotonic() - started
    slowest = max(records, key=lambda r: r.cpu_s)
    meta = [
        f"workload: {workload.source}, {len(workload.apps)} apps, {workload.job_count:,} jobs, "
        f"cluster {CLUSTER}, {seed_text}",
        f"{len(records)} simulations in {elapsed / 60:.1f} min with {n_workers} worker(s), "
        f"{sum(r.cpu_s for r in records) / 60:.1f} CPU-min in all; slowest: "
        f"{slowest.label}, {slowest.cpu_s:.0f} CPU-s",
        "regenerate: themis experiment paper"
        + (f" --policies {policies}" if policies else "")
        + (f" --seed {seed}" if seeds is None and seed != defaults.SEED else "")
        + (f" --seeds {seeds}" if seeds is not None else ""),
    ]
    # Imported here: the report draws with matplotlib, which takes a second to import.
    from themis.experiments.paper_report import RESULTS_JSON, RESULTS_MD, write_outputs

    path = write_outputs(out, the_plan, records, meta)
    click.echo(f"{len(records)} simulations in {elapsed:.0f} s")
    click.echo(f"wrote {path}, {out / RESULTS_MD}, {out / RESULTS_JSON}")


#: The size-aware policies a lie about work can move (the finish-time-fair ones under any
#: of their names, SRTF, Optimus), measured when registered.
TRUTHFULNESS_POLICIES = ("themis", "ftf-oracle", "gavel", "srtf", "optimus")


@experiment.command(short_help="What a lying app gains, and the honest ones lose, per policy.")
@click.option(
    "--policies",
    default=None,
    metavar="A,B,...",
    help="Policies to measure  [default: those of themis, ftf-oracle, gavel, srtf "
    "and optimus that are registered]",
)
@click.option(
    "--liar",
    default=None,
    metavar="APP",
    help="The app that misreports  [default: the app arriving in the middle]",
)
@click.option(
    "--factors",
    default="2,0.5",
    show_default=True,
    metavar="X,Y,...",
    help="What the liar declares, as multiples of its true work (one run per factor).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(defaults.OUT_DIR) / "truthfulness",
    show_default=True,
    help="Where truthfulness.md goes.",
)
@run_options
@workers_option
@QUIET
def truthfulness(
    policies: str | None,
    liar: str | None,
    factors: str,
    out: Path,
    workers: int | None,
    quiet: bool,
    **options: Any,
) -> None:
    """Run each policy with every app honest, then with one app declaring FACTOR times
    its work (the simulator runs the truth); print and write the liar's gain and the
    honest apps' loss (experiments/truthfulness.py)."""
    from themis.cli.runs import request, run
    from themis.experiments import truthfulness as lies
    from themis.policies import policy_names
    from themis.reports.files import ensure_dir

    if options.get("misreport"):
        raise ThemisError("the experiment chooses the liar: use --liar", field="--misreport")
    if policies is None:
        known = policy_names()
        names = [p for p in TRUTHFULNESS_POLICIES if p in known]
    else:
        names = parse_policies(policies, "--policies")
    try:
        factor_list = [float(x) for x in factors.split(",")]
    except ValueError:
        raise ThemisError(f"'{factors}' is not a list of numbers", field="--factors") from None
    if any(not (f > 0 and f != float("inf")) or f == 1.0 for f in factor_list):
        raise ThemisError(f"factors must be numbers > 0 other than 1: {factors}", field="--factors")
    config = make_config(**options)
    workload, cluster = load_inputs(config)
    arrivals = sorted(workload.apps, key=lambda a: a.arrival)
    chosen = liar if liar is not None else arrivals[len(arrivals) // 2].app_id
    if chosen not in {a.app_id for a in workload.apps}:
        raise ThemisError(f"no app '{chosen}' in the workload", field="--liar")
    ensure_dir(out)
    base = [replace(request(p, workload, config, out), out_dir=None) for p in names]
    todo = lies.requests(base, chosen, factor_list)
    click.echo(f"{describe(workload, cluster, config)}; liar: {chosen}")
    records = run(todo, workers, quiet, "run")
    rows = lies.outcomes({r.label: r for r in records}, names, chosen, factor_list)
    table = lies.markdown(rows)
    path = out / "truthfulness.md"
    path.write_text(
        f"# Truthfulness\n\n{describe(workload, cluster, config)}; liar: {chosen}\n\n{table}"
    )
    click.echo(table, nl=False)
    click.echo(f"wrote {path}")
