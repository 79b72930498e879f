"""The paper experiment's outputs: ``report.html``, ``results.md`` and ``results.json``.

The same tables go to the HTML report (with the plots) and to Markdown, so that
``docs/results.md`` can quote exactly what a run printed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.experiments.paper import Plan, Sweep
from themis.reports.comparison import comparison_section
from themis.reports.files import summary_dict, write_json
from themis.reports.html import Figure, Section, Table, summary_rows_table, write_report
from themis.reports.markdown import markdown_table
from themis.reports.metrics import RunSummary
from themis.reports.plots import Series, sweep_plot
from themis.reports.record import RunRecord

RESULTS_MD = "results.md"
RESULTS_JSON = "results.json"


@dataclass(frozen=True)
class Metric:
    title: str
    value: Callable[[RunSummary], float]
    show: Callable[[float], str]
    log_y: bool = False


METRICS = (
    Metric("max rho", lambda s: s.max_rho, lambda v: f"{v:.2f}", log_y=True),
    Metric("Jain's index over rho", lambda s: s.jain_rho, lambda v: f"{v:.3f}"),
    Metric("mean app completion (hours)", lambda s: s.mean_completion_s / 3600, "{:.1f}".format),
    Metric("GPU-hours used", lambda s: s.gpu_hours, "{:,.0f}".format),
    Metric("placement score (%)", lambda s: 100 * s.placement_score, "{:.1f}".format),
)


def _x(sweep: Sweep, value: float) -> float:
    return value / 60 if sweep.key == "lease_s" else value


def _value_text(sweep: Sweep, value: float) -> str:
    if sweep.key == "lease_s":
        return f"{value / 60:g} min"
    if sweep.key == "vgg_share":
        return f"{100 * value:g}%"
    if sweep.key == "contention":
        return f"{value:g}x"
    return f"{value:g}"


def sweep_table(sweep: Sweep, plan: Plan, records: dict[str, RunRecord], metric: Metric) -> Table:
    header = [sweep.xlabel, *sweep.policies]
    rows = []
    for value in sweep.values:
        cells = [_value_text(sweep, value)]
        for policy in sweep.policies:
            record = records[plan.points[(sweep.key, value, policy)]]
            number = metric.value(record.summary)
            cells.append(metric.show(number) if math.isfinite(number) else "n/a")
        rows.append(cells)
    return Table(header, rows, f"{sweep.title}: {metric.title}")


def sweep_figure(sweep: Sweep, plan: Plan, records: dict[str, RunRecord], metric: Metric) -> Figure:
    series = [
        Series(
            policy,
            [_x(sweep, v) for v in sweep.values],
            [
                metric.value(records[plan.points[(sweep.key, v, policy)]].summary)
                for v in sweep.values
            ],
        )
        for policy in sweep.policies
    ]
    png = sweep_plot(
        series, f"{sweep.title}: {metric.title}", sweep.xlabel, metric.title, metric.log_y
    )
    return Figure(png, f"{metric.title} as the {sweep.xlabel} varies, per policy.")


def sweep_section(sweep: Sweep, plan: Plan, records: dict[str, RunRecord]) -> Section:
    metrics = [m for m in METRICS if sweep.key == "vgg_share" or "placement" not in m.title]
    tables = [sweep_table(sweep, plan, records, m) for m in metrics]
    figures = [sweep_figure(sweep, plan, records, m) for m in (METRICS[0], METRICS[3])]
    if sweep.key == "vgg_share":
        figures.append(sweep_figure(sweep, plan, records, METRICS[4]))
    return Section(f"Sweep: {sweep.title}", sweep.note, tables, figures)


def write_outputs(
    out_dir: Path, plan: Plan, records: Sequence[RunRecord], meta: Sequence[str]
) -> Path:
    """Write every output; returns the report's path."""
    by_label = {r.label: r for r in records}
    main = [by_label[r.label] for r in plan.main]
    main_section = comparison_section(
        main,
        "Main comparison",
        "Every registered policy on the bundled HyperDrive workload, default configuration.",
    )
    sections = [main_section] + [sweep_section(s, plan, by_label) for s in plan.sweeps]
    path = write_report(out_dir, "Themis: the paper's evaluation, reproduced", meta, sections)
    _write_markdown(out_dir / RESULTS_MD, meta, main, sections[1:])
    payload: dict[str, Any] = {
        "meta": list(meta),
        "runs": [
            {
                "label": r.label,
                "params": dict(r.params),
                "cpu_s": r.cpu_s,
                **summary_dict(r.summary),
            }
            for r in records
        ],
    }
    write_json(out_dir / RESULTS_JSON, payload)
    return path


def _write_markdown(
    path: Path, meta: Sequence[str], main: Sequence[RunRecord], sweeps: Sequence[Section]
) -> None:
    parts = ["# Results", "", *[f"- {line}" for line in meta], "", "## Main comparison", ""]
    parts.append(markdown_table(summary_rows_table([r.summary for r in main])))
    for section in sweeps:
        parts += ["", f"## {section.title}", "", section.text, ""]
        for table in section.tables:
            parts += [markdown_table(table), ""]
    path.write_text("\n".join(parts).rstrip() + "\n", encoding="utf-8")
