"""The paper's evaluation (Themis, NSDI 2020, section 8) on the bundled HyperDrive trace.

One main comparison of every registered policy, then four sensitivity sweeps, each
changing one factor from the main configuration (a 2x4x8 cluster, f = 0.8, 10-minute
leases, one app every 9,000 s):

- fairness knob f (Themis only: the knob is Themis's own);
- lease length, five values from 5 minutes to an hour (Themis, and the baselines that use
  the lease as their re-allocation quantum and are closest to it);
- contention: arrivals compressed 1x, 2x and 4x;
- placement sensitivity: the share of apps training a VGG-family model, 0% to 100%, on
  trials resized to Philly's gang mix (with the trace's one-GPU trials placement could not
  matter);
- estimate error (docs/knowledge.md): what size-aware policies see of each job's work is
  off by up to 0%, 10%, 20%, 50%;
- restart cost: 0, 30 and 120 s per start, resume or migration of a gang;
- GPU types (docs/gpu_types.md): the same 64 GPUs all V100, then half of them (one rack)
  K80s.

With several seeds (``--seeds``) every run is repeated per seed: the model draw of the
trace, the variants' draws (gang sizes, which apps train VGG) and the policies' random
choices all follow the seed, and tables show the median and the range over seeds.

A sweep point equal to the main configuration is not run twice. Which policies each sweep
includes is part of the experiment's definition below, chosen so the whole evaluation
fits in ten minutes on two cores; ``docs/results.md`` reports what it measured.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from themis.experiments.runner import RunRequest
from themis.experiments.variants import compress_arrivals, with_gang_mix, with_model_share
from themis.mechanism.view import DEFAULT_BATCH_WINDOW
from themis.model.workload import Workload
from themis.policies import PolicyOptions
from themis.reports.files import SUMMARY_FILE
from themis.simulator.engine import Conditions

CLUSTER = "2x4x8"
#: Machines x GPUs per machine in CLUSTER: the largest gang that fits one machine is 8.
MAX_GANG = 8
BASE = PolicyOptions()

FAIRNESS_KNOBS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9)
LEASES_S = (300.0, 600.0, 1200.0, 1800.0, 3600.0)
CONTENTION = (1.0, 2.0, 4.0)
VGG_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
ESTIMATE_ERRORS = (0.0, 0.1, 0.2, 0.5)
RESTART_COSTS_S = (0.0, 30.0, 120.0)
#: Share of the cluster's GPUs that are K80s (the rest V100s), and the cluster of each.
K80_SHARES = (0.0, 0.5)
TYPED_CLUSTERS = {0.0: "2x4x8:v100", 0.5: "1x4x8:v100+1x4x8:k80"}
#: The main comparison's conditions: exact estimates, free restarts (earlier results).
MAIN_CONDITIONS = Conditions()


@dataclass(frozen=True)
class Sweep:
    """One factor varied over ``values`` for each of ``policies``."""

    key: str
    title: str
    xlabel: str
    values: tuple[float, ...]
    policies: tuple[str, ...]
    #: (workload, value, policy, seed) -> the request of that point (label set by the
    #: experiment).
    build: Callable[[Workload, float, str, int], RunRequest]
    note: str = ""


def _request(
    workload: Workload,
    policy: str,
    seed: int,
    options: PolicyOptions = BASE,
    conditions: Conditions = MAIN_CONDITIONS,
    cluster: str = CLUSTER,
) -> RunRequest:
    return RunRequest("", policy, workload, cluster, replace(options, seed=seed),
                      DEFAULT_BATCH_WINDOW, conditions=conditions)  # fmt: skip


def sweeps(policies: Sequence[str]) -> list[Sweep]:
    """The four sweeps; baselines not in ``policies`` (not registered) are left out, and a
    sweep left with no policy is dropped (a table without columns says nothing)."""

    def keep(*names: str) -> tuple[str, ...]:
        return tuple(n for n in names if n in policies)

    every = [
        Sweep(
            "fairness_knob",
            "Fairness knob f",
            "fairness knob f",
            FAIRNESS_KNOBS,
            keep("themis"),
            lambda w, v, p, s: _request(w, p, s, replace(BASE, fairness_knob=v)),
            "The worst ceil((1-f)n) apps bid; f = 0 lets every app bid (efficiency), "
            "f near 1 only the worst-off app (fairness).",
        ),
        Sweep(
            "lease_s",
            "Lease length",
            "lease (minutes)",
            LEASES_S,
            keep("themis", "ftf-oracle", "tiresias"),
            lambda w, v, p, s: _request(w, p, s, replace(BASE, lease=v)),
            "The lease is Themis's grant length and the baselines' re-allocation quantum.",
        ),
        Sweep(
            "contention",
            "Contention",
            "arrivals compressed (x)",
            CONTENTION,
            keep(
                "themis", "ftf-oracle", "gavel", "tiresias", "gandiva", "optimus", "slaq", "max-min"
            ),
            lambda w, v, p, s: _request(compress_arrivals(w, v), p, s),
            "Apps arrive 1x, 2x and 4x as often as in the main run (same apps, same work).",
        ),
        Sweep(
            "vgg_share",
            "Placement-sensitive apps",
            "share of apps training a VGG model",
            VGG_SHARES,
            keep("themis", "ftf-oracle", "gavel", "tiresias", "gandiva", "max-min"),
            lambda w, v, p, s: _request(
                with_model_share(with_gang_mix(w, seed=s, max_gang=MAX_GANG), v, seed=s), p, s
            ),
            "Trials resized to Philly's gang mix (1 GPU 70%, 2 GPUs 10%, 4 GPUs 15%, 8 GPUs "
            "5%, one size per app, same GPU-time); a share of apps switched to VGG models "
            "(same GPU-time), which lose 25-50% of their speed across machines.",
        ),
        Sweep(
            "estimate_error",
            "Estimate error",
            "estimate error E (job work seen x U[1-E, 1+E])",
            ESTIMATE_ERRORS,
            keep("themis", "ftf-oracle", "gavel", "srtf", "optimus"),
            lambda w, v, p, s: _request(
                w, p, s, conditions=replace(MAIN_CONDITIONS, estimate_error=v)
            ),
            "Size-aware policies see each job's work off by a seeded factor in [1-E, 1+E]; "
            "the simulator runs the true work.",
        ),
        Sweep(
            "restart_cost_s",
            "Restart cost",
            "restart cost (s per start, resume or migration)",
            RESTART_COSTS_S,
            # Not gandiva: its 60 s time slices cannot pay a 120 s resume (it refuses it).
            keep("themis", "ftf-oracle", "tiresias"),
            lambda w, v, p, s: _request(
                w, p, s, conditions=replace(MAIN_CONDITIONS, restart_cost=v)
            ),
            "Every (re)start of a gang holds its GPUs this long without progress.",
        ),
        Sweep(
            "k80_share",
            "GPU types",
            "share of GPUs that are K80s (the rest V100s)",
            K80_SHARES,
            keep("themis", "ftf-oracle", "gavel", "tiresias", "max-min"),
            lambda w, v, p, s: _request(w, p, s, cluster=TYPED_CLUSTERS[v]),
            "The same 64 GPUs, all V100, then one rack of V100s and one of K80s (4.3-6.8x "
            "slower per model, docs/gpu_types.md); a gang never mixes types.",
        ),
    ]
    return [sweep for sweep in every if sweep.policies]


def is_main_point(sweep: Sweep, value: float) -> bool:
    """Whether this point of ``sweep`` is the main configuration (then it is not re-run)."""
    main = {
        "fairness_knob": BASE.fairness_knob,
        "lease_s": BASE.lease,
        "contention": 1.0,
        "estimate_error": MAIN_CONDITIONS.estimate_error,
        "restart_cost_s": MAIN_CONDITIONS.restart_cost,
    }
    return sweep.key in main and main[sweep.key] == value


def label(sweep: Sweep, value: float, policy: str) -> str:
    return f"{policy} @ {sweep.key}={value:g}"


def seeded(name: str, seed: int, several: bool) -> str:
    """A run's label: with several seeds each run's label names its seed."""
    return f"{name} seed {seed}" if several else name


@dataclass(frozen=True)
class Plan:
    """Every run of the experiment, and where each sweep point's record comes from."""

    #: the main comparison's runs, per seed in ``seeds`` order, policies in order
    main: list[RunRequest]
    sweeps: list[Sweep]
    #: every run to do
    requests: list[RunRequest]
    #: (sweep key, value, policy, seed) -> label of the run that answers it
    points: dict[tuple[str, float, str, int], str]
    seeds: tuple[int, ...] = (0,)


def plan(workloads: Mapping[int, Workload], policies: Sequence[str]) -> Plan:
    """The experiment for each seed of ``workloads`` (seed -> that seed's workload)."""
    several = len(workloads) > 1
    main = [
        replace(_request(w, p, s), label=seeded(p, s, several), params={"seed": s})
        for s, w in workloads.items()
        for p in policies
    ]
    requests = list(main)
    points: dict[tuple[str, float, str, int], str] = {}
    chosen = sweeps(policies)
    for seed, workload in workloads.items():
        for sweep in chosen:
            for value in sweep.values:
                for policy in sweep.policies:
                    if is_main_point(sweep, value):
                        points[(sweep.key, value, policy, seed)] = seeded(policy, seed, several)
                        continue
                    name = seeded(label(sweep, value, policy), seed, several)
                    request = replace(
                        sweep.build(workload, value, policy, seed),
                        label=name,
                        params={sweep.key: value, "seed": seed},
                    )
                    requests.append(request)
                    points[(sweep.key, value, policy, seed)] = name
    # Longest first: two workers finish soonest when the long runs do not start last.
    requests.sort(key=expected_cost, reverse=True)
    return Plan(main, chosen, requests, points, tuple(workloads))


def expected_cost(request: RunRequest) -> float:
    """A rough relative cost, for ordering only. Themis's rounds cost more the more apps
    bid (low f, high contention) and the more rounds there are (short leases); baselines
    are several times cheaper."""
    contention = float(request.params.get("contention", 1.0))
    if request.policy != "themis":
        return 0.2 * contention
    bidders = (1.0 - request.options.fairness_knob) * contention
    return (0.5 + 4.0 * bidders) * (BASE.lease / request.options.lease) ** 0.5


def saved_in(the_plan: Plan, folder: Path) -> Plan:
    """The plan with each run kept under ``folder`` as it finishes (its summary.json and
    record), in ``seed<s>/<policy>`` or ``seed<s>/<policy>@<sweep>=<value>``: the same
    folder whether the experiment runs one seed or several, so adding seeds reuses the
    runs done."""

    def keep(request: RunRequest) -> RunRequest:
        seed = int(request.params["seed"])
        name = request.label.removesuffix(f" seed {seed}").replace(" @ ", "@")
        slug = re.sub(r"[^A-Za-z0-9@=._+-]+", "_", name)
        return replace(request, out_dir=folder / f"seed{seed}" / slug, files=(SUMMARY_FILE,))

    return replace(
        the_plan,
        main=[keep(r) for r in the_plan.main],
        requests=[keep(r) for r in the_plan.requests],
    )
