"""``themis experiment paper``: the paper's evaluation in one command;
``themis experiment truthfulness``: what a lying app gains under each policy."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from themis.cli import defaults
from themis.cli.groups import HelpGroup
from themis.cli.json_output import JSON_OPTION, emit, say
from themis.cli.progress import QUIET
from themis.cli.run_options import (
    describe,
    load_inputs,
    make_config,
    parse_policies,
    ray_option,
    run_options,
    workers_option,
)
from themis.cli.seeds import parse_seeds, seed_on_command_line, seeds_option
from themis.errors import ThemisError
from themis.model.lies import (
    CONTEXT_ERROR,
    CONTEXT_JITTER,
    DEFAULT_CONTEXTS,
    DEFAULT_LIARS,
    DEFAULT_LIES,
    PLACEBO,
)

if TYPE_CHECKING:
    from themis.experiments.runner import RunRequest


@click.group(cls=HelpGroup, short_help="Run a predefined experiment (the paper's evaluation).")
def experiment() -> None:
    """Predefined experiments: many simulations, one report."""


@experiment.command(short_help="Reproduce the paper's evaluation on the HyperDrive trace.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(defaults.OUT_DIR) / "paper",
    show_default=True,
    help="Where report.html, results.md and results.json go (and runs/: each run's "
    "summary, kept as it finishes, reused by the same command again).",
)
@click.option(
    "--policies",
    default=None,
    metavar="A,B,...",
    help="Policies of the main comparison (sweeps keep theirs among these)  "
    "[default: all registered]",
)
@workers_option
@ray_option
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
    ray_address: str | None,
    seed: int,
    seeds: str | None,
    quiet: bool,
) -> None:
    """The main comparison of every policy on the bundled HyperDrive workload (64 GPUs),
    then sweeps of the fairness knob, the lease length, contention, the share of
    placement-sensitive apps, estimate error, restart cost and GPU types. Writes
    OUT/report.html (tables and plots), OUT/results.md and OUT/results.json. With --seeds
    every run is repeated per seed (tables: median and range; plots: a line per seed, or
    a band). Every run's summary is kept in OUT/runs/ as it finishes: the same command
    again (after Ctrl-C, a failure, or with more seeds) runs only what is missing."""
    names = parse_policies(policies, "--policies")
    seed_list = parse_seeds(seeds, seed_on_command_line()) or [seed]
    if ray_address is not None:
        from themis.experiments.ray_engine import require_ray

        require_ray(workers, ray_address)
    # Loaded after the options are checked, so that a mistake answers at once (the
    # report's matplotlib and the runner are not needed for it).
    from themis.cli.runs import engine, run
    from themis.experiments.paper import CLUSTER, plan, saved_in
    from themis.experiments.runner import default_workers
    from themis.workload import load_workload

    workloads = {s: load_workload(defaults.TRACE, seed=s) for s in seed_list}
    workload = workloads[seed_list[0]]
    the_plan = saved_in(plan(workloads, names), out / "runs")
    seed_text = f"seed {seed}" if seeds is None else f"seeds {', '.join(map(str, seed_list))}"
    if not out.exists():
        out.mkdir(parents=True)
    elif not out.is_dir():
        raise ThemisError("exists and is not a directory", source=str(out), field="--out")
    with engine(ray_address) as chosen:
        if chosen is None:
            n_workers = default_workers(len(the_plan.requests)) if workers is None else workers
            where = f"{n_workers} at a time"
        else:
            n_workers = 0  # Ray starts when a run is left to do (it tells its CPUs then)
            where = f"as Ray tasks ({ray_address})"
        click.echo(
            f"{len(the_plan.requests)} simulations of {workload.source} on {CLUSTER} "
            f"({len(workload.apps)} apps, {workload.job_count:,} jobs; {seed_text}), {where}"
        )
        started = time.monotonic()
        records = run(the_plan.requests, n_workers or None, quiet, "runs", chosen, note=click.echo)
        if chosen is not None:
            n_workers = chosen.cpus_available()
    elapsed = time.monotonic() - started
    slowest = max(records, key=lambda r: r.cpu_s)
    engine_text = f"{n_workers} worker(s)" if chosen is None else f"Ray ({n_workers} CPUs)"
    if chosen is not None and not n_workers:
        engine_text = "Ray (every run reused)"
    meta = [
        f"workload: {workload.source}, {len(workload.apps)} apps, {workload.job_count:,} jobs, "
        f"cluster {CLUSTER}, {seed_text}",
        f"{len(records)} simulations in {elapsed / 60:.1f} min with {engine_text}, "
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


#: The policies measured by default: Themis, the oracle it is judged against, and max-min
#: (blind to every report, so a lie can only move it by what it really submits).
TRUTHFULNESS_POLICIES = ("themis", "ftf-oracle", "max-min")


@experiment.command(short_help="What lying apps gain, and honest ones lose, per policy.")
@click.option(
    "--policies",
    default=None,
    metavar="A,B,...",
    help="Policies to measure  [default: those of themis, ftf-oracle and max-min that are "
    "registered]",
)
@click.option(
    "--liars",
    default=",".join(DEFAULT_LIARS),
    show_default=True,
    metavar="SEL,...",
    help="Who lies, each in a run of its own: app ids, 'middle' (the app arriving in the "
    "middle), 'worst:N' (the N worst-off apps of the first policy's honest run), "
    "'vgg-gang' (the first multi-GPU app of a VGG model).",
)
@click.option(
    "--lies",
    default=",".join(DEFAULT_LIES),
    show_default=True,
    metavar="LIE,...",
    help="Lies told, each in a run of its own: work:F, placement:flat|sensitive, gang:F, "
    "ask:F, split:K, stagger:S, order:F, weight:W (the last two are truthful strategies; "
    "see --misreport of simulate), or pair:LIE (the liar and the app arriving next tell it "
    "together).",
)
@click.option(
    "--contexts",
    type=int,
    default=DEFAULT_CONTEXTS,
    show_default=True,
    metavar="K",
    help="Run every case (honest and lying) in K contexts, each with its own seed for the "
    "simulation's draws (the auction's rounding, estimate errors of --context-error) and "
    "every arrival delayed by up to --context-jitter; a gain is then 1 - mean lying / mean "
    "honest completion over them, with the contexts it gained in: what a liar can expect, "
    "not one run's luck (docs/knowledge.md). 1: each case once, as given.",
)
@click.option(
    "--context-error",
    type=float,
    default=CONTEXT_ERROR,
    show_default=True,
    metavar="E",
    help="With --contexts K > 1: the estimate error of every context when --estimate-error "
    "is 0 (else --estimate-error's).",
)
@click.option(
    "--context-jitter",
    type=float,
    default=CONTEXT_JITTER,
    show_default=True,
    metavar="S",
    help="With --contexts K > 1: each app's arrival is delayed by a draw in [0, S] seconds "
    "in each context (0: arrivals as given).",
)
@click.option(
    "--placebo",
    default=PLACEBO,
    show_default=True,
    metavar="LIE",
    help="A lie that changes nothing material, measured like the others and marked as the "
    "noise floor a gain is read against; 'none' to leave it out.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(defaults.OUT_DIR) / "truthfulness",
    show_default=True,
    help="Where truthfulness.md, truthfulness.csv and truthfulness.json go.",
)
@run_options
@seeds_option
@workers_option
@ray_option
@JSON_OPTION
@QUIET
def truthfulness(
    policies: str | None,
    liars: str,
    lies: str,
    contexts: int,
    context_error: float,
    context_jitter: float,
    placebo: str,
    seeds: str | None,
    out: Path,
    workers: int | None,
    ray_address: str | None,
    as_json: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Run each policy with every app honest, then once per (lie, liar) with that app
    lying (the simulator runs the truth), for each seed, each in --contexts contexts;
    print how often and how much each lie paid per policy beside the placebo's noise
    floor, and write every case (experiments/truthfulness.py)."""
    if ray_address is not None:
        from themis.experiments.ray_engine import require_ray

        require_ray(workers, ray_address)
    from themis.cli.runs import engine, request, run
    from themis.experiments import truthfulness as measure
    from themis.policies import policy_names
    from themis.reports.files import ensure_dir, write_json

    if options.get("misreport"):
        raise ThemisError("the experiment chooses the liars: use --liars", field="--misreport")
    if policies is None:
        known = policy_names()
        names = [p for p in TRUTHFULNESS_POLICIES if p in known]
    else:
        names = parse_policies(policies, "--policies")
    lie_list = [x.strip() for x in lies.split(",") if x.strip()]
    if not lie_list:
        raise ThemisError("name at least one lie", field="--lies")
    for lie in lie_list:
        measure.check_lie_text(lie)
    the_placebo = None if placebo.strip().lower() == "none" else placebo.strip()
    if the_placebo is not None:
        try:
            measure.check_lie_text(the_placebo)
        except ThemisError as error:
            raise ThemisError(error.message, field="--placebo") from None
        if the_placebo not in lie_list:
            lie_list.append(the_placebo)
    selectors = [x.strip() for x in liars.split(",") if x.strip()]
    if not selectors:
        raise ThemisError("name at least one liar", field="--liars")
    measure.check_contexts(contexts, context_error, context_jitter)
    config = make_config(**options)
    seed_list = parse_seeds(seeds, seed_on_command_line()) or [config.seed]
    ensure_dir(out)
    inputs = {s: load_inputs(config.with_seed(s)) for s in seed_list}
    # one context: the labels of the runs are as before contexts existed
    context_of = (lambda k: None) if contexts == 1 else (lambda k: k)

    def honest_request(p: str, s: int, k: int) -> RunRequest:
        plain = request(p, inputs[s][0], config.with_seed(s), out)
        label = measure.honest_label(p, s, context_of(k))
        plain = replace(plain, label=label, out_dir=None)
        return measure.context_request(plain, s, k, contexts, context_error, context_jitter)

    base = {
        (p, s, k): honest_request(p, s, k)
        for s in seed_list
        for p in names
        for k in range(contexts)
    }
    workload, cluster = inputs[seed_list[0]]
    for s in seed_list:
        measure.check_selectors(selectors, inputs[s][0])
    context_text = (
        ""
        if contexts == 1
        else f"; {contexts} contexts (estimate error "
        f"{100 * (config.estimate_error or context_error):g}%, arrivals delayed up to "
        f"{context_jitter:g} s)"
    )
    header = f"{describe(workload, cluster, config)}; seeds {', '.join(map(str, seed_list))}"
    header += context_text
    say(header, as_json)
    with engine(ray_address) as on:
        honest_runs = run(list(base.values()), workers, quiet, "honest run", on)
        honest = {r.label: r for r in honest_runs}
        todo = []
        plan: list[tuple[str, int, measure.LieCase]] = []
        for s in seed_list:
            workload, cluster = inputs[s]
            chosen = measure.choose_liars(
                selectors, workload, honest[measure.honest_label(names[0], s, context_of(0))]
            )
            machine = max(len(g) for g in cluster.machine_gpus.values())
            for case in measure.cases(lie_list, chosen, workload):
                for p in names:
                    for k in range(contexts):
                        label = measure.case_label(p, case, s, context_of(k))
                        todo.append(measure.lie_request(base[(p, s, k)], case, machine, label))
                    plan.append((p, s, case))
        lying = {r.label: r for r in run(todo, workers, quiet, "lying run", on)}
    rows = [
        measure.outcome_over(
            p,
            s,
            case,
            [honest[measure.honest_label(p, s, context_of(k))] for k in range(contexts)],
            [lying[measure.case_label(p, case, s, context_of(k))] for k in range(contexts)],
        )
        for p, s, case in plan
    ]
    summaries = measure.summarize_lies(rows, the_placebo)
    summary = measure.summary_markdown(summaries)
    shares = measure.report_share_markdown(measure.report_shares(rows))
    if shares:
        summary += (
            "\nWhat the false report buys beyond the trial order an honest app declares "
            "with progress_weight 1/F (work:F against order:F, the same liars; "
            "1 - work / order):\n\n" + shares
        )
    beyond = measure.report_share_markdown(measure.over_best_honest(rows), "lie pays")
    if beyond:
        summary += (
            "\nEach lie against the liar's best truthful run measured (the default order, "
            "order:F = progress_weight 1/F or weight:W = progress_weight W, which it could "
            "declare; "
            "1 - lying / best truthful):\n\n" + beyond
        )
    path = out / "truthfulness.md"
    path.write_text(
        f"# Truthfulness\n\n{header}\n\n## Per policy and lie\n\n{summary}\n"
        f"## Every case\n\n{measure.markdown(rows)}"
    )
    (out / "truthfulness.csv").write_text(measure.rows_csv(rows))
    settings = {
        "workload": header,
        "policies": names,
        "seeds": seed_list,
        "lies": lie_list,
        "liars": selectors,
        "placebo": the_placebo,
        "contexts": contexts,
        "context_error": (config.estimate_error or context_error) if contexts > 1 else None,
        "context_jitter_s": context_jitter if contexts > 1 else None,
        "pays_above": measure.PAYS,
    }
    document = measure.payload(settings, summaries, rows)
    write_json(out / "truthfulness.json", document)
    say(summary.rstrip("\n"), as_json)
    say(f"wrote {path}, {out / 'truthfulness.csv'} and {out / 'truthfulness.json'}", as_json)
    if as_json:
        emit(document)
