"""What ``themis trace inspect`` prints: counts, distributions and histograms of a workload.

A job's duration here is the time it takes on its own gang inside one machine (its
work times its model's ``time_per_iteration`` over its gang): the trace's run time for
formats that record one.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from themis.model.workload import Workload
from themis.units import duration_text, gpu_hours_text

#: Upper bounds (seconds) and labels of the duration histogram's bins.
DURATION_BINS = (
    (60.0, "< 1 min"),
    (600.0, "1-10 min"),
    (3600.0, "10 min-1 h"),
    (36000.0, "1-10 h"),
    (360000.0, "10-100 h"),
    (math.inf, ">= 100 h"),
)
BAR = 40


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by linear interpolation between closest ranks."""
    if not sorted_values:
        return math.nan
    pos = q * (len(sorted_values) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


@dataclass
class TraceSummary:
    source: str
    apps: int
    jobs: int
    gpu_hours: float
    arrival_span_s: float
    offered_load: float | None
    gpus: int | None
    gangs: dict[int, int]
    durations: dict[str, float]
    duration_bins: dict[str, int]
    jobs_per_app: dict[str, float]
    models: dict[str, int]
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "apps": self.apps,
            "jobs": self.jobs,
            "gpu_hours": self.gpu_hours,
            "arrival_span_s": self.arrival_span_s,
            "offered_load": self.offered_load,
            "gpus": self.gpus,
            "gangs": {str(k): v for k, v in self.gangs.items()},
            "durations_s": self.durations,
            "duration_bins": self.duration_bins,
            "jobs_per_app": self.jobs_per_app,
            "models": self.models,
            "notes": self.notes,
        }


def summarize_workload(workload: Workload, gpus: int | None = None) -> TraceSummary:
    durations = []
    gangs: Counter[int] = Counter()
    for app in workload.apps:
        tpi = workload.profiles[app.model].time_per_iteration
        for job in app.jobs:
            gangs[job.gang] += 1
            durations.append(job.work * tpi / job.gang)
    durations.sort()
    bins = dict.fromkeys((label for _, label in DURATION_BINS), 0)
    for seconds in durations:
        for bound, label in DURATION_BINS:
            if seconds < bound:
                bins[label] += 1
                break
    sizes = sorted(len(app.jobs) for app in workload.apps)
    arrivals = [app.arrival for app in workload.apps]
    load = workload.offered_load(gpus) if gpus else None
    return TraceSummary(
        source=workload.source,
        apps=len(workload.apps),
        jobs=len(durations),
        gpu_hours=workload.gpu_seconds() / 3600,
        arrival_span_s=(max(arrivals) - min(arrivals)) if arrivals else 0.0,
        offered_load=load if load is None or math.isfinite(load) else None,
        gpus=gpus,
        gangs=dict(sorted(gangs.items())),
        durations={
            "min": durations[0],
            "p50": percentile(durations, 0.5),
            "p90": percentile(durations, 0.9),
            "p99": percentile(durations, 0.99),
            "max": durations[-1],
            "mean": sum(durations) / len(durations),
        },
        duration_bins=bins,
        jobs_per_app={
            "min": sizes[0],
            "median": percentile([float(s) for s in sizes], 0.5),
            "max": sizes[-1],
            "mean": sum(sizes) / len(sizes),
        },
        models=dict(Counter(app.model for app in workload.apps).most_common()),
        notes=dict(workload.notes),
    )


def _duration(seconds: float) -> str:
    return duration_text(seconds)


def _histogram(title: str, counts: dict[str, int]) -> list[str]:
    total = sum(counts.values()) or 1
    peak = max(counts.values()) or 1
    width = max(len(label) for label in counts)
    lines = [title]
    for label, count in counts.items():
        bar = "#" * round(BAR * count / peak)
        lines.append(f"  {label:>{width}} | {bar:<{BAR}} {count:>9,} {100 * count / total:5.1f}%")
    return lines


def render(summary: TraceSummary) -> str:
    """The summary as text, histograms included."""
    notes = summary.notes
    lines = [f"{summary.source}"]
    what = [f"format {notes.get('format', '?')}"]
    if "grouping" in notes:
        rule = notes["grouping"]
        if "app_gap_s" in notes:
            rule = f"{rule} (gap {notes['app_gap_s']:g} s)"
        what.append(f"apps by {rule}")
    what.append(f"arrivals {notes.get('arrivals', '?')}")
    lines.append("  " + ", ".join(what))
    lines.append(
        f"  {summary.apps:,} apps, {summary.jobs:,} jobs, {gpu_hours_text(summary.gpu_hours)} "
        "GPU-hours, "
        f"arrivals over {_duration(summary.arrival_span_s)}"
    )
    if summary.gpus:
        load = "n/a" if summary.offered_load is None else f"{summary.offered_load:.2f}"
        lines.append(f"  offered load on {summary.gpus:,} GPUs: {load}")
    excluded = notes.get("excluded")
    if excluded:
        firsts = notes.get("excluded_first_line", {})
        parts = []
        for reason, count in excluded.items():
            first = firsts.get(reason)
            parts.append(f"{reason} {count:,}" + (f" (first: line {first})" if first else ""))
        lines.append(f"  rows excluded: {sum(excluded.values()):,}: " + ", ".join(parts))
    throughputs = notes.get("throughputs")
    if isinstance(throughputs, dict):
        lines.append(
            f"  work: total_steps / Gavel throughput on {throughputs.get('worker')} "
            f"({throughputs.get('file')})"
        )
    if notes.get("ignored_columns"):
        lines.append("  columns ignored: " + ", ".join(notes["ignored_columns"]))
    models = notes.get("models", {})
    drawn = models.get("drawn_for_apps_without_model", 0)
    model_text = ", ".join(f"{m} {n:,}" for m, n in summary.models.items())
    lines.append(f"  models (apps): {model_text}")
    if drawn:
        lines.append(f"  models drawn (seed {notes.get('seed')}) for {drawn:,} apps without one")
    for name, meaning in models.get("trace_names", {}).items():
        lines.append(f"  trace model '{name}' -> {meaning}")
    d = summary.durations
    lines.append(
        "  job duration on its gang: "
        + ", ".join(f"{k} {_duration(d[k])}" for k in ("min", "p50", "p90", "p99", "max"))
    )
    j = summary.jobs_per_app
    lines.append(
        f"  jobs per app: min {j['min']:,}, median {j['median']:g}, mean {j['mean']:.1f}, "
        f"max {j['max']:,}"
    )
    lines.append("")
    lines += _histogram(
        "GPUs per job", {f"{g} GPU" + ("s" if g > 1 else ""): n for g, n in summary.gangs.items()}
    )
    lines.append("")
    lines += _histogram("Job duration (on its gang, one machine)", summary.duration_bins)
    return "\n".join(lines)
