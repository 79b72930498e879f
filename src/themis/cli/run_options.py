"""The options ``simulate`` and ``compare`` share: workload, cluster and policy knobs.

Values are checked here and raised as :class:`ThemisError` naming the flag, so that a bad
value reads the same whether it came from click or from the library.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import click

from themis.cli import defaults
from themis.cli.policy_flags import policy_flags, policy_values
from themis.errors import ThemisError
from themis.experiments.workloads import (
    Variants,
    generated_workload,
    is_generated,
    parse_generate,
    parse_model_share,
)
from themis.model.cluster import Cluster
from themis.model.lies import Lie, apply_lies, declarations, parse_lies
from themis.model.workload import Workload
from themis.policies import PolicyOptions, policy_names, registry
from themis.simulator.engine import Conditions
from themis.units import gpu_hours_text
from themis.workload import (
    DEFAULT_APP_GAP,
    ArrivalMode,
    default_arrivals,
    load_workload,
    trace_format,
)
from themis.workload.fits import check_fits
from themis.workload.formats import format_names
from themis.workload.profiles_file import load_profiles_file

#: ``RunConfig.format`` of a ``generate:...`` workload (not a file format).
GENERATED_FORMAT = "generated"


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on besides the policy name: the workload, the cluster,
    what the simulator does to every policy, and the policy's knobs with the run's seed
    (``options``, the one value the flags made: read, never copied)."""

    trace: str
    cluster: str
    batch_window_s: float
    arrivals: str
    app_interval_s: float
    profiles: str | None
    format: str = "hyperdrive"
    app_gap_s: float = DEFAULT_APP_GAP
    variants: Variants = field(default_factory=Variants)
    throughputs: str | None = None
    estimate_error: float = defaults.ESTIMATE_ERROR
    restart_cost_s: float = defaults.RESTART_COST_S
    #: Lying apps (``--misreport``, ``model/lies.py``).
    misreport: tuple[Lie, ...] = ()
    #: The policy's knobs (``policies/knobs.py``) and the seed of the run.
    options: PolicyOptions = field(default_factory=PolicyOptions)

    @property
    def seed(self) -> int:
        """The run's seed: the model draw, generated workload, variants and the policy's
        random choices all follow it."""
        return self.options.seed

    def conditions(self) -> Conditions:
        """What the simulator does to every policy: estimate error and restart cost."""
        told = declarations(self.misreport)
        return Conditions(
            self.estimate_error,
            self.restart_cost_s,
            told.misreport,
            told.claims,
            orders=told.orders,
        )

    def with_seed(self, seed: int) -> RunConfig:
        """The same run with another seed: model draw, generated workload, variants and
        the policy's random choices all follow it."""
        return replace(self, options=replace(self.options, seed=seed))

    def to_dict(self) -> dict[str, Any]:
        """The run as ``summary.json``'s ``config`` records it; the knobs under the names
        their table gives (``PolicyOptions.record``), which summaries have always used."""
        out: dict[str, Any] = {
            "trace": self.trace,
            "format": self.format,
            "cluster": self.cluster,
            "batch_window_s": self.batch_window_s,
            "seed": self.seed,
            "arrivals": self.arrivals,
            "profiles": self.profiles,
        }
        if self.arrivals == ArrivalMode.INTERVAL.value:
            out["app_interval_s"] = self.app_interval_s
        out["app_gap_s"] = self.app_gap_s
        out.update(self.variants.to_dict())
        if self.throughputs is not None:
            out["throughputs"] = self.throughputs
        out["estimate_error"] = self.estimate_error
        out["restart_cost_s"] = self.restart_cost_s
        out["misreport"] = [f"{lie.app_id}={lie.text}" for lie in self.misreport]
        out.update(self.options.record())
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
            metavar="NAME|PATH|generate:K=V,...",
            help="A bundled trace by name, or a trace file of any format themis reads "
            "(themis, HyperDrive, Philly, Gavel, Tiresias, PAI, Helios, PCS; docs/traces.md), "
            "or a workload generated per seed: generate:jobs=1500,load=1.5 (keys jobs, "
            "load, min_trials, max_trials of 'themis trace generate').",
        ),
        *trace_options(),
        click.option(
            "--cluster",
            default=defaults.CLUSTER,
            show_default=True,
            metavar="RxMxG",
            help="Racks x machines per rack x GPUs per machine.",
        ),
        *policy_flags(),
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
            help="Seed of the model draw, the estimate errors and the policy's random choices.",
        ),
        click.option(
            "--estimate-error",
            type=float,
            default=defaults.ESTIMATE_ERROR,
            show_default=True,
            metavar="E",
            help="0 <= E < 1: each job's work, as policies see it, is its true work times a "
            "seeded factor in [1-E, 1+E] (the simulator keeps the truth).",
        ),
        click.option(
            "--restart-cost",
            type=float,
            default=defaults.RESTART_COST_S,
            show_default=True,
            metavar="SECONDS",
            help="Seconds of no progress at each start, resume or migration of a gang (GPUs "
            f"held; {defaults.RESTART_COST_REALISTIC_S:g} is realistic for deep nets).",
        ),
        click.option(
            "--misreport",
            multiple=True,
            metavar="APP=KIND:VALUE",
            help="A lying app, for truthfulness experiments: work:F (declares F times its "
            "work; APP=F alone means this), placement:flat|sensitive (claims its model's "
            "placement sensitivity), gang:F (resubmits its trials on F times their GPUs, "
            "same iterations), ask:F (asks for F times the GPUs, runs no faster), split:K "
            "(submits itself as K apps), stagger:S (split:2, the second part S seconds later), "
            "order:F (no lie: orders its own trials as work:F would, as progress_weight 1/F "
            "in the app file does; declares the truth), weight:W (no lie: declares "
            "progress_weight W >= 0, 0 running its first trials to the end). "
            "Repeatable "
            "(coalitions; docs/knowledge.md).",
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
        *variant_options(),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def run_options_except(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``run_options`` without the options named (by parameter name): for commands whose
    workload does not come from ``--trace`` (``themis replay``)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = run_options(command)
        params = command.__click_params__  # type: ignore[attr-defined]
        command.__click_params__ = [p for p in params if p.name not in names]  # type: ignore[attr-defined]
        return command

    return decorate


def variant_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """Workload variants (``themis.experiments.workloads.Variants``), applied after the
    trace is read, drawn with the run's seed."""
    return [
        click.option(
            "--gang-mix",
            is_flag=True,
            help="Resize each app's trials to one gang size drawn from Philly's mix (1 GPU "
            "70%, 2 10%, 4 15%, 8 5%; sizes above one machine left out), same GPU-time.",
        ),
        click.option(
            "--model-share",
            default=None,
            metavar="FAMILY=SHARE",
            help="A SHARE (0..1) of the apps train a model whose name starts with FAMILY "
            "(e.g. vgg=0.5), the others another model; same GPU-time.",
        ),
        click.option(
            "--vgg-share",
            type=float,
            default=None,
            metavar="S",
            help="Shorthand for --model-share vgg=S (placement-sensitive apps).",
        ),
        click.option(
            "--contention",
            type=float,
            default=1.0,
            show_default=True,
            metavar="X",
            help="Apps arrive X times as often (arrivals compressed), same work.",
        ),
    ]


def make_config(
    *,
    trace: str = defaults.TRACE,
    cluster: str = defaults.CLUSTER,
    batch_window: float = defaults.BATCH_WINDOW_S,
    seed: int = defaults.SEED,
    arrivals: str | None = None,
    app_interval: float = defaults.APP_INTERVAL_S,
    profiles: str | None = None,
    trace_format_name: str | None = None,
    app_gap: float = DEFAULT_APP_GAP,
    gang_mix: bool = False,
    model_share: str | None = None,
    vgg_share: float | None = None,
    contention: float = 1.0,
    throughputs: str | None = None,
    estimate_error: float = defaults.ESTIMATE_ERROR,
    restart_cost: float = defaults.RESTART_COST_S,
    misreport: tuple[str, ...] = (),
    **knobs: Any,
) -> RunConfig:
    """Check the shared options and bundle them; the trace's format is told (from
    ``--format`` or the file) and the arrival mode resolved to the format's default.
    ``knobs`` are the policies' (``policies/knobs.py``, by parameter name, a plug-in's
    too), checked once, by ``PolicyOptions``."""
    unknown = sorted(set(knobs) - {knob.name for knob in registry.knobs()})
    if unknown:
        raise TypeError(f"make_config() got unexpected keyword arguments: {', '.join(unknown)}")
    options = PolicyOptions.of({**policy_values(knobs), "seed": seed})
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
    variants = Variants(gang_mix, parse_model_share(model_share, vgg_share), contention)
    variants.check()
    lies = parse_lies(misreport)
    Conditions(estimate_error, restart_cost).check()
    run: dict[str, Any] = {
        "estimate_error": estimate_error,
        "restart_cost_s": restart_cost,
        "misreport": lies,
        "options": options,
    }
    if is_generated(trace):
        if trace_format_name is not None:
            raise ThemisError("a generated workload has no file format", field="--format")
        if arrivals == ArrivalMode.INTERVAL.value:
            raise ThemisError(
                "a generated workload arrives at its generated times", field="--arrivals"
            )
        parse_generate(trace, 1, seed)  # a bad spec fails now, before any run
        return RunConfig(
            trace,
            cluster,
            batch_window,
            ArrivalMode.TRACE.value,
            app_interval,
            profiles,
            GENERATED_FORMAT,
            app_gap,
            variants,
            **run,
        )
    fmt = trace_format(trace, trace_format_name)
    mode = arrivals if arrivals is not None else default_arrivals(fmt).value
    return RunConfig(
        trace,
        cluster,
        batch_window,
        mode,
        app_interval,
        profiles,
        fmt.value,
        app_gap,
        variants,
        throughputs,
        **run,
    )


#: ``-j/--workers``: how many simulations run at once (``compare``, ``experiment``).
workers_option = click.option(
    "--workers",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Simulations run at once, in separate processes  [default: one per CPU core]",
)


ray_option = click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="auto|ADDRESS",
    help="Run the simulations as Ray tasks: 'auto' starts a local Ray with one CPU per core, "
    "ADDRESS joins a cluster started with 'ray start --head' (needs the runtime extra; "
    "docs/sweeps.md).",
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
    """Every name registered; else the first unknown one's error, with the closest names
    (or, for a plugin that failed to load, why)."""
    from themis.policies.registry import unknown_policy

    known = policy_names()
    for name in names:
        if name not in known:
            raise unknown_policy(name, flag)


def load_inputs(config: RunConfig) -> tuple[Workload, Cluster]:
    """The cluster and the workload, checked against each other before any run starts."""
    cluster = Cluster.from_spec(config.cluster)
    profiles, gpu_types = load_profiles_file(config.profiles)
    if is_generated(config.trace):
        workload = generated_workload(config.trace, cluster, profiles, config.seed)
        if gpu_types:
            workload.notes["gpu_types"] = gpu_types
    else:
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
    workload = config.variants.apply(workload, cluster, config.seed)
    machine = max(len(gpus) for gpus in cluster.machine_gpus.values())
    workload = apply_lies(workload, config.misreport, machine).workload
    check_fits(workload, cluster)
    return workload, cluster


def describe(workload: Workload, cluster: Cluster, config: RunConfig) -> str:
    """One line: what is about to run on what."""
    load = workload.offered_load(cluster.size)
    load_text = f"offered load {load:.2f}" if math.isfinite(load) else "offered load n/a"
    contention = config.variants.contention
    if config.arrivals == ArrivalMode.INTERVAL.value:
        when = f"one every {config.app_interval_s / contention:g} s"
    else:
        when = "at trace times"
    if contention != 1.0:
        when += f" ({contention:g}x contention)"
    variants = config.variants  # said in the line: the same trace, other gangs or models
    changed = [
        *(["--gang-mix"] if variants.gang_mix else []),
        *(
            [f"--model-share {variants.model_share[0]}={variants.model_share[1]:g}"]
            if variants.model_share is not None
            else []
        ),
    ]
    source = workload.source + (f" with {' and '.join(changed)}" if changed else "")
    line = (
        f"{source}: {len(workload.apps):,} apps, {workload.job_count:,} jobs, "
        f"{gpu_hours_text(workload.gpu_seconds() / 3600)} GPU-hours arriving {when}, {load_text} "
        f"on {cluster.size:,} GPUs ({config.cluster})"
    )
    excluded = workload.notes.get("excluded")
    if isinstance(excluded, dict) and excluded:
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in excluded.items())
        line += f"; {sum(excluded.values()):,} trace rows not simulable ({reasons})"
    return line
