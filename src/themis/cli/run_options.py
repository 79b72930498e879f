"""The options ``simulate`` and ``compare`` share: workload, cluster and policy knobs.

Values are checked here and raised as :class:`ThemisError` naming the flag, so that a bad
value reads the same whether it came from click or from the library.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from themis.cli import defaults
from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.workload import Workload
from themis.policies import PolicyOptions, policy_names
from themis.simulator.engine import check_fits
from themis.units import gpu_hours_text
from themis.workload import (
    DEFAULT_APP_GAP,
    ArrivalMode,
    default_arrivals,
    load_workload,
    trace_format,
)
from themis.workload.formats import format_names
from themis.workload.profiles_file import load_profiles_file


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on besides the policy name."""

    trace: str
    cluster: str
    fairness_knob: float
    lease_s: float
    batch_window_s: float
    seed: int
    arrivals: str
    app_interval_s: float
    profiles: str | None
    format: str = "hyperdrive"
    app_gap_s: float = DEFAULT_APP_GAP
    throughputs: str | None = None

    def policy_options(self) -> PolicyOptions:
        return PolicyOptions(lease=self.lease_s, fairness_knob=self.fairness_knob, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "trace": self.trace,
            "format": self.format,
            "cluster": self.cluster,
            "fairness_knob": self.fairness_knob,
            "lease_s": self.lease_s,
            "batch_window_s": self.batch_window_s,
            "seed": self.seed,
            "arrivals": self.arrivals,
            "profiles": self.profiles,
        }
        if self.arrivals == ArrivalMode.INTERVAL.value:
            out["app_interval_s"] = self.app_interval_s
        out["app_gap_s"] = self.app_gap_s
        if self.throughputs is not None:
            out["throughputs"] = self.throughputs
        return out


def trace_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """The options that say how to read a trace besides its path (shared with
    ``themis trace``): its format and the app-grouping gap."""
    return [
        click.option(
            "--format",
            "trace_format_name",
            type=click.Choice(format_names()),
            default=None,
            help="Trace format  [default: detected from the file]",
        ),
        click.option(
            "--app-gap",
            type=float,
            default=DEFAULT_APP_GAP,
            show_default=True,
            metavar="SECONDS",
            help="Traces with users only (Philly, Helios, PAI): a pause longer than this "
            "between a user's submissions starts a new app.",
        ),
        click.option(
            "--throughputs",
            default=None,
            metavar="FILE",
            help="Gavel traces only: Gavel's throughput JSON; each job then runs "
            "total_steps / its v100 throughput seconds, as Gavel intended.",
        ),
    ]


def arrivals_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--arrivals",
        type=click.Choice([m.value for m in ArrivalMode]),
        default=None,
        help="Apps arrive every --app-interval seconds, or at their trace times  "
        "[default: interval for the HyperDrive trace, as the paper replayed it; trace "
        "for every other format]",
    )


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options to a click command (they arrive as keyword arguments)."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option(
            "--trace",
            default=defaults.TRACE,
            show_default=True,
            metavar="NAME|PATH",
            help="A bundled trace by name, or a trace file of any format themis reads "
            "(themis, HyperDrive, Philly, Gavel, Tiresias, PAI, Helios; docs/traces.md).",
        ),
        *trace_options(),
        click.option(
            "--cluster",
            default=defaults.CLUSTER,
            show_default=True,
            metavar="RxMxG",
            help="Racks x machines per rack x GPUs per machine.",
        ),
        click.option(
            "--fairness-knob",
            type=float,
            default=defaults.FAIRNESS_KNOB,
            show_default=True,
            metavar="F",
            help="0 <= F < 1: the worst ceil((1-F)*n) apps bid in each auction.",
        ),
        click.option(
            "--lease",
            type=float,
            default=defaults.LEASE_S,
            show_default=True,
            metavar="SECONDS",
            help="Lease length (> 0); the re-allocation quantum of non-leasing policies.",
        ),
        click.option(
            "--batch-window",
            type=float,
            default=defaults.BATCH_WINDOW_S,
            show_default=True,
            metavar="SECONDS",
            help="Lease ends this close (>= 0) are batched into one round.",
        ),
        click.option(
            "--seed",
            type=int,
            default=defaults.SEED,
            show_default=True,
            help="Seed of the model draw and the policy's random choices.",
        ),
        arrivals_option(),
        click.option(
            "--app-interval",
            type=float,
            default=defaults.APP_INTERVAL_S,
            show_default=True,
            metavar="SECONDS",
            help="Seconds between app arrivals with --arrivals interval.",
        ),
        click.option(
            "--profiles",
            default=None,
            metavar="PATH",
            help="Model profiles JSON (default: the bundled model_profiles.json).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def make_config(
    *,
    trace: str,
    cluster: str,
    fairness_knob: float,
    lease: float,
    batch_window: float,
    seed: int,
    arrivals: str | None,
    app_interval: float,
    profiles: str | None,
    trace_format_name: str | None = None,
    app_gap: float = DEFAULT_APP_GAP,
    throughputs: str | None = None,
) -> RunConfig:
    """Check the shared options and bundle them; the trace's format is told (from
    ``--format`` or the file) and the arrival mode resolved to the format's default."""
    if not 0 <= fairness_knob < 1:
        raise ThemisError(f"must be in [0, 1), got {fairness_knob}", field="--fairness-knob")
    if not (math.isfinite(lease) and lease > 0):
        raise ThemisError(f"must be a number of seconds > 0, got {lease}", field="--lease")
    if not (math.isfinite(batch_window) and batch_window >= 0):
        raise ThemisError(
            f"must be a number of seconds >= 0, got {batch_window}", field="--batch-window"
        )
    if not (math.isfinite(app_interval) and app_interval >= 0):
        raise ThemisError(
            f"must be a number of seconds >= 0, got {app_interval}", field="--app-interval"
        )
    if not (math.isfinite(app_gap) and app_gap >= 0):
        raise ThemisError(f"must be a number of seconds >= 0, got {app_gap}", field="--app-gap")
    fmt = trace_format(trace, trace_format_name)
    mode = arrivals if arrivals is not None else default_arrivals(fmt).value
    return RunConfig(
        trace,
        cluster,
        fairness_knob,
        lease,
        batch_window,
        seed,
        mode,
        app_interval,
        profiles,
        fmt.value,
        app_gap,
        throughputs,
    )


#: ``-j/--workers``: how many simulations run at once (``compare``, ``experiment``).
workers_option = click.option(
    "--workers",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Simulations run at once, in separate processes  [default: one per CPU core]",
)


def parse_policies(text: str | None, flag: str) -> list[str]:
    """A comma-separated list of registered policies, each once; ``None``: all of them,
    in the registry's order (Themis first)."""
    if text is None:
        return policy_names()
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise ThemisError(f"empty policy name in '{text}'", field=flag)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ThemisError(f"policy '{name}' listed twice", field=flag)
        seen.add(name)
    check_policies(names, flag)
    return names


def check_policies(names: list[str], flag: str) -> None:
    known = policy_names()
    for name in names:
        if name not in known:
            raise ThemisError(f"unknown policy '{name}' (known: {', '.join(known)})", field=flag)


def load_inputs(config: RunConfig) -> tuple[Workload, Cluster]:
    """The cluster and the workload, checked against each other before any run starts."""
    cluster = Cluster.from_spec(config.cluster)
    profiles, gpu_types = load_profiles_file(config.profiles)
    workload = load_workload(
        config.trace,
        format=config.format,
        profiles=profiles,
        gpu_types=gpu_types,
        seed=config.seed,
        arrivals=config.arrivals,
        app_interval=config.app_interval_s,
        app_gap=config.app_gap_s,
        throughputs=config.throughputs,
    )
    check_fits(workload, cluster)
    return workload, cluster


def describe(workload: Workload, cluster: Cluster, config: RunConfig) -> str:
    """One line: what is about to run on what."""
    load = workload.offered_load(cluster.size)
    load_text = f"offered load {load:.2f}" if math.isfinite(load) else "offered load n/a"
    if config.arrivals == ArrivalMode.INTERVAL.value:
        when = f"one every {config.app_interval_s:g} s"
    else:
        when = "at trace times"
    line = (
        f"{workload.source}: {len(workload.apps):,} apps, {workload.job_count:,} jobs, "
        f"{gpu_hours_text(workload.gpu_seconds() / 3600)} GPU-hours arriving {when}, {load_text} "
        f"on {cluster.size:,} GPUs ({config.cluster})"
    )
    excluded = workload.notes.get("excluded")
    if isinstance(excluded, dict) and excluded:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in excluded.items())
        line += f"; {sum(excluded.values()):,} trace rows not simulable ({reasons})"
    return line
