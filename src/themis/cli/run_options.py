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
from themis.model.profiles import load_profiles
from themis.model.workload import Workload
from themis.policies import PolicyOptions, policy_names
from themis.simulator.engine import check_fits
from themis.workload import ArrivalMode, load_workload


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

    def policy_options(self) -> PolicyOptions:
        return PolicyOptions(lease=self.lease_s, fairness_knob=self.fairness_knob, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "trace": self.trace,
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
        return out


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options to a click command (they arrive as keyword arguments)."""
    options = [
        click.option(
            "--trace",
            default=defaults.TRACE,
            show_default=True,
            metavar="NAME|PATH",
            help="A bundled trace by name, or a HyperDrive-format CSV file.",
        ),
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
        click.option(
            "--arrivals",
            type=click.Choice([m.value for m in ArrivalMode]),
            default=defaults.ARRIVALS,
            show_default=True,
            help="Apps arrive every --app-interval seconds, or at their trace start times.",
        ),
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
    arrivals: str,
    app_interval: float,
    profiles: str | None,
) -> RunConfig:
    """Check the shared options and bundle them."""
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
    return RunConfig(
        trace, cluster, fairness_knob, lease, batch_window, seed, arrivals, app_interval, profiles
    )


def check_policies(names: list[str], flag: str) -> None:
    known = policy_names()
    for name in names:
        if name not in known:
            raise ThemisError(f"unknown policy '{name}' (known: {', '.join(known)})", field=flag)


def load_inputs(config: RunConfig) -> tuple[Workload, Cluster]:
    """The cluster and the workload, checked against each other before any run starts."""
    cluster = Cluster.from_spec(config.cluster)
    profiles = load_profiles(config.profiles) if config.profiles is not None else None
    workload = load_workload(
        config.trace,
        profiles=profiles,
        seed=config.seed,
        arrivals=config.arrivals,
        app_interval=config.app_interval_s,
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
    return (
        f"{workload.source}: {len(workload.apps):,} apps, {workload.job_count:,} jobs, "
        f"{workload.gpu_seconds() / 3600:,.0f} GPU-hours arriving {when}, {load_text} "
        f"on {cluster.size:,} GPUs ({config.cluster})"
    )
