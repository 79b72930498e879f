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

from collections.abc import Mapping, Sequence

from themis.reports.apps_table import SeededRecord, all_apps_table, worst_apps_table
from themis.reports.html import Figure, Section, Table, summary_rows_table
from themis.reports.plots import MAX_BANDS, cdf_figure, scatter_figure, to_svg, usage_figure
from themis.reports.record import RunRecord
from themis.reports.seeds import by_policy, seed_rows

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


def spread_table(groups: Groups, caption: str = "", sep: str = " ") -> Table:
    """Median and range (min-max) over seeds per metric, one row per policy; with
    ``sep="\n"`` the range goes under the median (a page), else in brackets beside it."""
    grouped = by_policy([(p, r.summary) for p, runs in groups.items() for _, r in runs])
    header, rows = seed_rows(grouped, sep)
    return Table(header, rows, caption)


def seeds_section(groups: Groups, title: str, text: str = "") -> Section:
    """Several seeds: the median (range) table and the four figures with every seed."""
    seeds = sorted({s for runs in groups.values() for s, _ in runs if s is not None})
    caption = f"median (min-max) over seeds {', '.join(map(str, seeds))}"
    table = spread_table(groups, caption, sep="\n")
    return Section(title, text, [table], comparison_figures(groups))


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
