"""The report sections for runs of one workload under several policies, over one seed or
several.

Its four figures are the paper's way of looking at a comparison: the CDF of rho (the
headline: how far the worst-off apps are from fair), the CDF of completion time (what the
fairness costs or buys in latency), GPUs in use over time (efficiency; one panel per
policy), and each app's rho against its size (which apps a policy favours). With several
seeds the CDFs show the median over the seeds and their range, the scatter every seed's
apps. The per-app section lists each policy's worst apps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from themis.reports.apps_table import SeededRecord, all_apps_table, worst_apps_table
from themis.reports.html import Figure, Section, Table, summary_rows_table
from themis.reports.metrics import JOB_FIGURES
from themis.reports.plots import MAX_BANDS, cdf_figure, scatter_figure, to_svg, usage_figure
from themis.reports.record import RunRecord
from themis.reports.seeds import (
    JOB_SEED_METRICS,
    SEED_METRICS,
    SeedMetric,
    Spread,
    by_policy,
    seed_rows,
    spread_text,
)
from themis.reports.tables import show_ratio

#: Runs of one policy (one per seed), by policy, in the report's order.
Groups = Mapping[str, Sequence[SeededRecord]]


def comparison_figures(groups: Groups) -> list[Figure]:
    if not groups or not all(groups.values()):
        raise ValueError("no runs to compare")
    several = any(len(runs) > 1 for runs in groups.values())
    rhos = {p: [r.rhos() for _, r in runs] for p, runs in groups.items()}
    completions = {p: [r.completions_h() for _, r in runs] for p, runs in groups.items()}
    # Usage over time is shown for the first seed only: seeds' workloads differ in their
    # arrival times, and several curves in one panel hide each other.
    usage = {p: [(runs[0][1].usage_times, runs[0][1].usage_gpus)] for p, runs in groups.items()}
    sizes = {
        p: (
            [r.app_gpu_hours[row.app_id] for _, r in runs for row in r.rows],
            [row.rho for _, r in runs for row in r.rows],
        )
        for p, runs in groups.items()
    }
    first_seed, first = next(iter(groups.values()))[0]
    capacity = first.capacity
    # Bands for a few policies only (plots.cdf_figure): more overlap into one mass.
    band = ", shaded: their range" if len(groups) <= MAX_BANDS else "; the table gives ranges"
    per_seed = f" (with several seeds: the median over them{band})" if several else ""
    return [
        Figure(
            to_svg(
                cdf_figure(rhos, "CDF of finish-time fairness rho", "rho (log)", True, marker_x=1)
            ),
            f"CDF of rho per policy{per_seed}; left and steep is fair, rho = 1 (dotted) is "
            "as fast as a private 1/N cluster.",
        ),
        Figure(
            to_svg(cdf_figure(completions, "CDF of app completion time", "completion time (h)")),
            f"CDF of app completion time (finish - arrival) per policy{per_seed}.",
        ),
        Figure(
            to_svg(usage_figure(usage, capacity, "GPUs in use over time")),
            "GPUs held over time, one panel per policy on the same axes (steps thinned to the "
            "lowest level per bin; dashed: the cluster's size)"
            + (f", seed {first_seed}." if several else "."),
        ),
        Figure(
            to_svg(
                scatter_figure(
                    sizes,
                    "rho of each app against its size",
                    "app size (GPU-hours of work, log)",
                    "rho",
                    marker_y=1.0,
                )
            ),
            "Each app's rho against its work in GPU-hours, per policy"
            + (", every seed's apps." if several else "."),
        ),
    ]


def single(records: Sequence[RunRecord]) -> dict[str, list[SeededRecord]]:
    """One run per label (one seed): the groups of a one-seed comparison."""
    return {r.label: [(None, r)] for r in records}


def comparison_section(records: Sequence[RunRecord], title: str, text: str = "") -> Section:
    """One seed: the table of every metric, a column per run, and the four figures."""
    return Section(
        title,
        text,
        tables=[
            summary_rows_table([r.summary for r in records], labels=[r.label for r in records])
        ],
        figures=comparison_figures(single(records)),
    )


def spread_table(
    groups: Groups,
    caption: str = "",
    sep: str = " ",
    metrics: Sequence[SeedMetric] = SEED_METRICS,
) -> Table:
    """Median and range (min-max) over seeds per metric, one row per policy; with
    ``sep="\n"`` the range goes under the median (a page), else in brackets beside it."""
    grouped = by_policy([(p, r.summary) for p, runs in groups.items() for _, r in runs])
    header, rows = seed_rows(grouped, sep, metrics)
    return Table(header, rows, caption)


def seeds_section(groups: Groups, title: str, text: str = "") -> Section:
    """Several seeds: the median (range) tables (apps, then jobs) and the four figures
    with every seed."""
    seeds = sorted({s for runs in groups.values() for s, _ in runs if s is not None})
    caption = f"median (min-max) over seeds {', '.join(map(str, seeds))}"
    table = spread_table(groups, caption, sep="\n")
    jobs = spread_table(groups, f"jobs, {caption}", "\n", JOB_SEED_METRICS)
    return Section(title, text, [table, jobs], comparison_figures(groups))


def _gang_cell(key: str) -> Callable[[float], str]:
    """How a per-gang figure (``JOB_FIGURES``) reads: times in hours, counts whole."""
    if key.endswith("_s"):
        return lambda v: f"{v / 3600:,.2f}"
    if key.startswith("slowdown"):
        return show_ratio
    if key == "starts_mean":
        return lambda v: f"{v:.2f}"
    return lambda v: f"{v:,.0f}"


#: (header, figure key, format) of the per-gang table, in ``JOB_FIGURES`` order.
_GANG_COLUMNS = tuple(
    (key.replace("_s", " (h)").replace("_", " "), key, _gang_cell(key)) for key in JOB_FIGURES
)


def jobs_section(groups: Groups) -> Section:
    """Job-level figures: each job's wait for its first GPU, its slowdown and its starts,
    per policy and gang size (median and range over seeds), and the CDF of job waits."""
    several = any(len(runs) > 1 for runs in groups.values())
    rows = []
    for policy, runs in groups.items():
        gangs = sorted({g for _, r in runs for g in r.summary.jobs_by_gang})
        for gang in gangs:
            figures = [
                r.summary.jobs_by_gang[gang] for _, r in runs if gang in r.summary.jobs_by_gang
            ]
            cells = [
                spread_text(Spread.of([float(f[key]) for f in figures]), show)
                for _, key, show in _GANG_COLUMNS
            ]
            rows.append([policy, str(gang), *cells])
    header = ["policy", "gang", *(h for h, _, _ in _GANG_COLUMNS)]
    caption = "per gang size" + (", median (min-max) over seeds" if several else "")
    waits = {p: [list(r.job_waits_h) for _, r in runs] for p, runs in groups.items()}
    per_seed = " (one line per seed)" if several else ""
    figure = Figure(
        to_svg(
            cdf_figure(
                waits,
                "CDF of each job's wait for its first GPU",
                "wait from arrival to the first GPU (h)",
                ylabel="fraction of jobs",
            )
        ),
        f"CDF of the jobs' waits for their first GPU per policy{per_seed}.",
    )
    return Section(
        "Jobs",
        "Per job, beside the apps' rho: the wait from its arrival to its first GPU, its "
        "slowdown (completion over its run time alone on the cluster at its best "
        "placement) and how many times its gang was started (docs/metrics.md). Per-app rho "
        "can hide a long wait of one trial inside a fairly treated app.",
        [Table(header, rows, caption)],
        [figure],
    )


def apps_section(groups: Groups) -> Section:
    """Each policy's worst apps (and every app, folded), worst first."""
    tables: list[Table] = []
    for policy, runs in groups.items():
        tables += [worst_apps_table(policy, runs), all_apps_table(policy, runs)]
    return Section(
        "Apps, worst first",
        "The apps with the highest rho per policy: the model they train, their trials' gang "
        "sizes (8x20: twenty 8-GPU trials), the wait from arrival to their first GPU, and "
        "their completion time. Click a header to sort.",
        tables,
    )
