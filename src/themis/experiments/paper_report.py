"""The paper experiment's outputs: ``report.html``, ``results.md`` and ``results.json``.

The same tables go to the HTML report (with the plots) and to Markdown, so that
``docs/results.md`` can quote exactly what a run printed. With several seeds a cell is
the median over seeds and its range, ``0.82 (0.80-0.95)``, and each sweep line has a band.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.experiments.paper import Plan, Sweep
from themis.reports.apps_table import SeededRecord
from themis.reports.comparison import (
    apps_section,
    comparison_section,
    seeds_section,
    spread_table,
)
from themis.reports.files import summary_dict, write_json
from themis.reports.html import (
    Figure,
    Section,
    Table,
    config_table,
    summary_rows_table,
    write_report,
)
from themis.reports.markdown import markdown_table
from themis.reports.metrics import RunSummary
from themis.reports.plots import Series, sweep_figure, to_svg
from themis.reports.record import RunRecord
from themis.reports.seeds import Spread, spread_text

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
    if sweep.key in ("vgg_share", "k80_share"):
        return f"{100 * value:g}%"
    if sweep.key == "contention":
        return f"{value:g}x"
    if sweep.key == "estimate_error":
        return f"{100 * value:g}%"
    if sweep.key == "restart_cost_s":
        return f"{value:g} s"
    return f"{value:g}"


def _spread(
    sweep: Sweep,
    plan: Plan,
    records: dict[str, RunRecord],
    metric: Metric,
    value: float,
    policy: str,
) -> Spread:
    """The metric at one sweep point over the plan's seeds."""
    return Spread.of(
        [metric.value(records[plan.points[(sweep.key, value, policy, s)]].summary)
         for s in plan.seeds]
    )  # fmt: skip


def sweep_table(sweep: Sweep, plan: Plan, records: dict[str, RunRecord], metric: Metric) -> Table:
    header = [sweep.xlabel, *sweep.policies]
    rows = []
    for value in sweep.values:
        cells = [_value_text(sweep, value)]
        for policy in sweep.policies:
            spread = _spread(sweep, plan, records, metric, value, policy)
            cells.append(
                spread_text(spread, metric.show) if math.isfinite(spread.median) else "n/a"
            )
        rows.append(cells)
    over = f" (median and range over seeds {_seed_list(plan)})" if len(plan.seeds) > 1 else ""
    return Table(header, rows, f"{sweep.title}: {metric.title}{over}")


def sweep_figure_of(
    sweep: Sweep, plan: Plan, records: dict[str, RunRecord], metric: Metric
) -> Figure:
    several = len(plan.seeds) > 1
    series = []
    for policy in sweep.policies:
        spreads = [_spread(sweep, plan, records, metric, v, policy) for v in sweep.values]
        series.append(
            Series(
                policy,
                [_x(sweep, v) for v in sweep.values],
                [sp.median for sp in spreads],
                [sp.low for sp in spreads] if several else None,
                [sp.high for sp in spreads] if several else None,
            )
        )
    svg = to_svg(
        sweep_figure(
            series, f"{sweep.title}: {metric.title}", sweep.xlabel, metric.title, metric.log_y
        )
    )
    band = " (median over seeds, band: min-max)" if several else ""
    return Figure(svg, f"{metric.title} as the {sweep.xlabel} varies, per policy{band}.")


def configuration(plan: Plan) -> dict[str, Any]:
    """The main run's settings, as the report's configuration table shows them."""
    first = plan.main[0]
    return {
        "trace": first.workload.source,
        "cluster": first.cluster,
        "fairness_knob": first.options.fairness_knob,
        "lease_s": first.options.lease,
        "batch_window_s": first.batch_window,
        "policies": ", ".join(dict.fromkeys(r.policy for r in plan.main)),
        "seeds": ", ".join(map(str, plan.seeds)),
    }


def _seed_list(plan: Plan) -> str:
    return ", ".join(map(str, plan.seeds))


def sweep_section(sweep: Sweep, plan: Plan, records: dict[str, RunRecord]) -> Section:
    metrics = [m for m in METRICS if sweep.key == "vgg_share" or "placement" not in m.title]
    tables = [sweep_table(sweep, plan, records, m) for m in metrics]
    figures = [sweep_figure_of(sweep, plan, records, m) for m in (METRICS[0], METRICS[3])]
    if sweep.key == "vgg_share":
        figures.append(sweep_figure_of(sweep, plan, records, METRICS[4]))
    return Section(f"Sweep: {sweep.title}", sweep.note, tables, figures)


def write_outputs(
    out_dir: Path, plan: Plan, records: Sequence[RunRecord], meta: Sequence[str]
) -> Path:
    """Write every output; returns the report's path."""
    by_label = {r.label: r for r in records}
    main = [by_label[r.label] for r in plan.main]
    text = "Every registered policy on the bundled HyperDrive workload, default configuration."
    groups: dict[str, list[SeededRecord]] = {}
    for request in plan.main:
        seed = int(request.params["seed"]) if len(plan.seeds) > 1 else None
        groups.setdefault(request.policy, []).append((seed, by_label[request.label]))
    if len(plan.seeds) > 1:
        main_section = seeds_section(groups, "Main comparison", text)
        main_table = spread_table(groups, f"median (min-max) over seeds {_seed_list(plan)}")
    else:
        main_section = comparison_section(main, "Main comparison", text)
        main_table = summary_rows_table([r.summary for r in main])
    sweep_sections = [sweep_section(s, plan, by_label) for s in plan.sweeps]
    setup = Section("Configuration", "", [config_table(configuration(plan), "")])
    # Results first: the configuration is for who checks how they were made.
    sections = [main_section, apps_section(groups), *sweep_sections, setup]
    path = write_report(out_dir, "Themis: the paper's evaluation, reproduced", meta, sections)
    _write_markdown(out_dir / RESULTS_MD, meta, main_table, sweep_sections)
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
    path: Path, meta: Sequence[str], main: Table, sweeps: Sequence[Section]
) -> None:
    parts = ["# Results", "", *[f"- {line}" for line in meta], "", "## Main comparison", ""]
    parts.append(markdown_table(main))
    for section in sweeps:
        parts += ["", f"## {section.title}", "", section.text, ""]
        for table in section.tables:
            parts += [markdown_table(table), ""]
    path.write_text("\n".join(parts).rstrip() + "\n", encoding="utf-8")
