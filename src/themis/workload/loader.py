"""Turn a trace into a :class:`Workload`: find the file, tell its format, read it, form
apps, give them models, place their arrivals.

Arrivals (``--arrivals``; the default depends on the format):

- ``trace``: each app arrives when its first job was submitted (started, for HyperDrive)
  in the trace, counted from the trace's first; a themis file's arrivals are used as
  written. The default for every format but HyperDrive.
- ``interval``: apps arrive one every ``app_interval`` seconds in trace order, each job
  keeping its run time, as the paper's authors replayed HyperDrive; the default for
  HyperDrive. The HyperDrive trace spreads 19,590 GPU-hours over 63 days, about 20% of a
  64-GPU cluster: replayed at trace times there is no contention and every policy looks
  alike. The default interval makes the default 64-GPU cluster contended
  (``DEFAULT_APP_INTERVAL``).
"""

from __future__ import annotations

import math
from enum import StrEnum
from importlib import resources
from pathlib import Path

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile, load_profiles
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.workload.formats import TraceFormat, detect_format, parse_format
from themis.workload.gavel_throughputs import load_throughputs
from themis.workload.grouping import DEFAULT_APP_GAP, Grouping, group_jobs
from themis.workload.models import ModelResolver
from themis.workload.native import NativeRead, read_native
from themis.workload.plugin import TraceFormatPlugin
from themis.workload.records import TraceJob, TraceRead

#: Seconds between app arrivals in ``interval`` mode: with the HyperDrive trace on 64 GPUs
#: this offers about 1.4 GPU-seconds of work per GPU-second while apps arrive.
DEFAULT_APP_INTERVAL = 9000.0

BUNDLED_TRACES = {"hyperdrive": "philly_hyperdrive_workload.csv"}


class ArrivalMode(StrEnum):
    """When apps arrive: at their trace times, or in trace order every ``app_interval``
    seconds (the paper's replay of HyperDrive; ``default_arrivals``)."""

    TRACE = "trace"
    INTERVAL = "interval"


def default_arrivals(fmt: TraceFormatPlugin) -> ArrivalMode:
    """How a format's apps arrive unless told otherwise (its ``arrivals``)."""
    return ArrivalMode(fmt.arrivals)


def resolve_trace(name_or_path: str) -> tuple[Path, str]:
    """A bundled trace by name, or a file path. Returns (path, name to show in errors)."""
    if name_or_path in BUNDLED_TRACES:
        ref = resources.files("themis.data").joinpath(BUNDLED_TRACES[name_or_path])
        return Path(str(ref)), f"{BUNDLED_TRACES[name_or_path]} (bundled)"
    path = Path(name_or_path)
    if not path.exists():
        known = ", ".join(BUNDLED_TRACES)
        raise ThemisError(
            f"no such trace file or bundled trace (bundled: {known})", source=name_or_path
        )
    return path, name_or_path


def trace_format(trace: str, fmt: str | TraceFormatPlugin | None = None) -> TraceFormatPlugin:
    """The format of ``trace``: ``fmt`` when given, else detected from the file."""
    if fmt is not None:
        return parse_format(str(fmt))
    if trace in BUNDLED_TRACES:
        return parse_format(TraceFormat.HYPERDRIVE)
    path, source = resolve_trace(trace)
    return detect_format(path, source)


def _arrival_mode(arrivals: ArrivalMode | str | None, fmt: TraceFormatPlugin) -> ArrivalMode:
    if arrivals is None:
        return default_arrivals(fmt)
    try:
        return ArrivalMode(arrivals)
    except ValueError:
        known = ", ".join(m.value for m in ArrivalMode)
        raise ThemisError(
            f"unknown arrival mode '{arrivals}' (known: {known})", field="--arrivals"
        ) from None


def load_workload(
    trace: str = "hyperdrive",
    *,
    format: str | TraceFormatPlugin | None = None,
    profiles: dict[str, ModelProfile] | None = None,
    gpu_types: dict[str, dict[str, float]] | None = None,
    seed: int = 0,
    arrivals: ArrivalMode | str | None = None,
    app_interval: float = DEFAULT_APP_INTERVAL,
    app_gap: float = DEFAULT_APP_GAP,
    throughputs: str | Path | None = None,
) -> Workload:
    """Read ``trace`` (a bundled name or a path, of any format) into a workload.

    ``profiles``: the models apps may use (default: the bundled ones); ``gpu_types``: the
    per-GPU-type speeds of a profiles file, carried in the notes; ``seed``: of the model
    draws; ``arrivals``: ``trace`` or ``interval`` (None: the format's default);
    ``app_gap``: seconds of silence that end a user's app (session-grouped formats);
    ``throughputs``: Gavel's throughput file, to turn a Gavel trace's steps into time
    (``gavel_throughputs``).
    """
    profiles = profiles if profiles is not None else load_profiles()
    fmt = trace_format(trace, format)
    mode = _arrival_mode(arrivals, fmt)
    if mode is ArrivalMode.INTERVAL and not (math.isfinite(app_interval) and app_interval >= 0):
        raise ThemisError(
            f"must be a finite number of seconds >= 0, got {app_interval}", field="--app-interval"
        )
    if not (math.isfinite(app_gap) and app_gap >= 0):
        raise ThemisError(
            f"must be a finite number of seconds >= 0, got {app_gap}", field="--app-gap"
        )
    if throughputs is not None and not fmt.throughputs:
        raise ThemisError(
            f"applies to Gavel traces only, not to {fmt.value}", field="--throughputs"
        )
    path, source = resolve_trace(trace)
    if path.is_dir() and not fmt.folder:
        raise ThemisError("is a directory, expected a trace file", source=source)
    notes: dict[str, object] = {"format": fmt.value, "arrivals": mode.value, "seed": seed}
    if mode is ArrivalMode.INTERVAL:
        notes["app_interval_s"] = app_interval
    if fmt.read is None:  # themis's own format
        native = read_native(path, source)
        apps, used = _native_apps(native, profiles, seed, mode, app_interval, source, notes)
        merged_types = {**(gpu_types or {}), **native.gpu_types}
    else:
        read = fmt.read(path, source)
        if throughputs is not None:
            table = load_throughputs(throughputs)
            read = table.apply(read, source)
            notes["throughputs"] = table.notes()
        apps, used = _foreign_apps(read, fmt, profiles, seed, mode, app_interval, app_gap, source)
        notes.update(_read_notes(read, app_gap))
        merged_types = dict(gpu_types or {})
    notes["models"] = used.notes()
    if merged_types:
        notes["gpu_types"] = merged_types
    return Workload(tuple(apps), used.profiles, source, notes)


def _read_notes(read: TraceRead, app_gap: float) -> dict[str, object]:
    notes: dict[str, object] = {"grouping": read.grouping.value}
    if read.grouping is Grouping.SESSION:
        notes["app_gap_s"] = app_gap
    if read.exclusions.total:
        notes["excluded"] = dict(read.exclusions.counts)
        notes["excluded_first_line"] = dict(read.exclusions.first_line)
    if read.ignored_columns:
        notes["ignored_columns"] = list(read.ignored_columns)
    return notes


def _foreign_apps(
    read: TraceRead,
    fmt: TraceFormatPlugin,
    profiles: dict[str, ModelProfile],
    seed: int,
    mode: ArrivalMode,
    app_interval: float,
    app_gap: float,
    source: str,
) -> tuple[list[AppSpec], ModelResolver]:
    jobs = list(read.jobs)  # reads the file; exclusions are complete after this
    if not jobs:
        if read.exclusions.total:
            lines = [n for n in read.exclusions.first_line.values() if n is not None]
            raise ThemisError(
                f"no simulable jobs: every row is excluded ({read.exclusions.describe()})",
                source=source,
                line=min(lines) if lines else None,
            )
        raise ThemisError("the trace has no jobs", source=source, line=1)
    resolver = ModelResolver(profiles, seed)
    field = fmt.model_field or "model"
    if read.strict_models:
        for job in jobs:
            if job.model is not None and not resolver.known(job.model):
                raise ThemisError(
                    f"unknown model '{job.model}' (known: {', '.join(resolver.names)})",
                    source=source,
                    line=job.line,
                    field=field,
                )
    groups = group_jobs(jobs, read.grouping, app_gap)
    origin = min(job.submit for job in jobs)
    apps = []
    for k, (app_id, members) in enumerate(groups):
        model = _app_model(app_id, members, resolver, read.strict_models, source, field)
        tpi = profiles[model].time_per_iteration
        if mode is ArrivalMode.TRACE:
            arrival = min(j.submit for j in members) - origin
        else:
            arrival = k * app_interval
        specs = tuple(JobSpec(j.job_id, j.gang, j.work(tpi), j.line) for j in members)
        # A user's sessions are one owner's apps: they share that user's slice of the
        # cluster (fairness/shares.py), as a real scheduler that knows who submitted does.
        owner = members[0].user if read.grouping is Grouping.SESSION else None
        apps.append(AppSpec(app_id, float(arrival), model, specs, owner=owner or None))
    return apps, resolver


def _app_model(
    app_id: str,
    members: list[TraceJob],
    resolver: ModelResolver,
    strict: bool,
    source: str,
    field: str,
) -> str:
    named = [j for j in members if j.model is not None]
    if not named:
        return resolver.draw()
    first = named[0]
    for job in named[1:]:
        if job.model != first.model:
            raise ThemisError(
                f"app {app_id} mixes models {first.model} and {job.model}",
                source=source,
                line=job.line,
                field=field,
            )
    name = first.model
    assert name is not None  # named jobs only
    return name if strict else resolver.foreign(name)


def _native_apps(
    native: NativeRead,
    base: dict[str, ModelProfile],
    seed: int,
    mode: ArrivalMode,
    app_interval: float,
    source: str,
    notes: dict[str, object],
) -> tuple[list[AppSpec], ModelResolver]:
    profiles = {**base, **native.profiles}
    resolver = ModelResolver(profiles, seed)
    if native.source_note is not None:
        notes["from"] = native.source_note
    apps = []
    order = sorted(native.apps, key=lambda a: (a.arrival, a.index))
    for k, app in enumerate(order):
        if app.model is None:
            model = resolver.draw()
        elif app.model in profiles:
            model = app.model
        else:
            raise ThemisError(
                f"unknown model '{app.model}' (known: {', '.join(resolver.names)})",
                source=source,
                line=app.model_line,
                field=f"apps[{app.index}].model",
            )
        tpi = profiles[model].time_per_iteration
        specs = tuple(JobSpec(j.job_id, j.gpus, j.work(tpi), j.line) for j in app.jobs)
        arrival = app.arrival if mode is ArrivalMode.TRACE else k * app_interval
        apps.append(
            AppSpec(
                app.app_id,
                float(arrival),
                model,
                specs,
                owner=app.owner,
                progress_weight=app.progress_weight,
            )
        )
    return apps, resolver
