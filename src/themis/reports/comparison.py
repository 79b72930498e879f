"""The report section for runs of one workload under several policies.

Its four figures are the paper's way of looking at a comparison: the CDF of rho (the
headline: how far the worst-off apps are from fair), the CDF of completion time (what the
fairness costs or buys in latency), GPUs in use over time (efficiency), and each app's rho
against its size (which apps a policy favours).
"""

from __future__ import annotations

from collections.abc import Sequence

from themis.reports.html import Figure, Section, summary_rows_table
from themis.reports.plots import cdf_plot, scatter_plot, usage_plot
from themis.reports.record import RunRecord


def comparison_figures(records: Sequence[RunRecord]) -> list[Figure]:
    if not records:
        raise ValueError("no runs to compare")
    rhos = {r.label: r.rhos() for r in records}
    completions = {r.label: r.completions_h() for r in records}
    usage = {r.label: (r.usage_times, r.usage_gpus) for r in records}
    sizes = {
        r.label: ([r.app_gpu_hours[row.app_id] for row in r.rows], [row.rho for row in r.rows])
        for r in records
    }
    return [
        Figure(
            cdf_plot(rhos, "CDF of finish-time fairness rho", "rho (log)", True, marker_x=1.0),
            "CDF of rho per policy; left and steep is fair, rho = 1 (dotted) is as fast as "
            "a private 1/N cluster.",
        ),
        Figure(
            cdf_plot(completions, "CDF of app completion time", "completion time (hours)"),
            "CDF of app completion time (finish - arrival) per policy.",
        ),
        Figure(
            usage_plot(usage, records[0].capacity, "GPUs in use over time"),
            "GPUs held over time per policy (steps thinned to the lowest level per bin).",
        ),
        Figure(
            scatter_plot(
                sizes,
                "rho of each app against its size",
                "app size (GPU-hours of work, log)",
                "rho",
                marker_y=1.0,
            ),
            "Each app's rho against its work in GPU-hours, per policy.",
        ),
    ]


def comparison_section(records: Sequence[RunRecord], title: str, text: str = "") -> Section:
    return Section(
        title,
        text,
        tables=[
            summary_rows_table([r.summary for r in records], labels=[r.label for r in records])
        ],
        figures=comparison_figures(records),
    )
