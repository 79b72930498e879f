"""``tiresias`` against the Tiresias authors' own simulator (SymbioticLab/Tiresias,
``simulator/run_sim.py --schedule=dlas-gpu --scheme=count``), run on the same job lists.

The fixtures (``tests/fixtures/tiresias/``, provenance in its README) are the job lists
the authors' simulator read and the per-job completions it wrote. Here ``tiresias`` with
its defaults (the authors' default run: 3 queues at 3,250 / 7,200 GPU-seconds, no
promotion) replays the same jobs, and per-job completion times and per-app rho must agree:

- two synthetic 400-job traces on 32 GPUs (gangs of 1-8, placement-insensitive profiles,
  so that placement cannot make a difference the authors' ``count`` scheme does not
  model), with their default run and with their promotion run (``dlas-gpu-8``, PROMOTEKNOB
  8): the median per-job completion ratio within 5%, and 85% of jobs within 5%;
- the bundled HyperDrive trace (4,697 jobs, apps one every 9,000 s, 2x4x8): the same per
  job, and the largest per-app rho within 25% of the authors' (2.04). The authors' rho is
  this project's rho (``posthoc_rho``) computed from their finish times: the same
  T_cluster, N_avg from their apps' lifetimes.

Measured: on the bundled trace 99.0% of jobs within 1% (max rho 2.031 against their
2.030); on the synthetic traces 97.8% and 94.8% within 5%, with promotion 91.5% and
87.3%. Both simulators are event-driven with the same rules, but not step for step: ours
batches events within 30 s and dates threshold crossings exactly; theirs steps in whole
seconds, and checks a gang's crossing only at events (its own "jump" event divides
GPU-seconds minus seconds by the gang, which is late for a gang that has run), so gangs
there stay a little longer in a queue; jobs near a tie may then swap. That is what the
tolerances cover.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable
from pathlib import Path

import pytest

from themis.cli.run_options import load_inputs, make_config
from themis.fairness.ftf import posthoc_rho
from themis.policies import make_policy
from themis.simulator.engine import SimulationResult, simulate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiresias"


def authors_completions(name: str, schedule: str = "dlas-gpu") -> dict[str, float]:
    """job id -> completion time (end - submit) in the authors' ``job.csv``."""
    with (FIXTURES / f"{name}_{schedule}_job.csv").open(newline="") as f:
        return {row["job_id"]: float(row["JCT"]) for row in csv.DictReader(f)}


def authors_ends(name: str) -> dict[str, float]:
    with (FIXTURES / f"{name}_dlas-gpu_job.csv").open(newline="") as f:
        return {row["job_id"]: float(row["end_time"]) for row in csv.DictReader(f)}


def completions(result: SimulationResult, arrival: dict[str, float]) -> dict[str, float]:
    """job id -> completion time (last end - its app's arrival) in our run."""
    end: dict[str, float] = {}
    for i in result.intervals:
        end[i.job_id] = max(end.get(i.job_id, 0.0), i.end)
    return {j: e - arrival[j] for j, e in end.items()}


def ratios(ours: dict[str, float], theirs: dict[str, float]) -> list[float]:
    """Per job, ours / theirs, over the jobs both ran: ours has no interval for a job
    without work (2 rows of the bundled trace), which theirs runs for the 1 s its parser
    allows at least."""
    common = ours.keys() & theirs.keys()
    assert len(common) >= 0.999 * len(theirs), (len(common), len(theirs))
    return [ours[j] / theirs[j] for j in common]


def check_per_job(ours: dict[str, float], theirs: dict[str, float]) -> None:
    """The median ratio within 5%, and 85% of jobs within 5% of theirs: the
    same schedule, job for job, up to the two simulators' clocks."""
    r = ratios(ours, theirs)
    assert 0.95 <= statistics.median(r) <= 1.05, statistics.median(r)
    close = sum(1 for x in r if abs(x - 1) <= 0.05) / len(r)
    assert close >= 0.85, close


def max_rho(
    arrivals: dict[str, float], finishes: dict[str, float], t_cluster: dict[str, float]
) -> float:
    """The largest ``posthoc_rho`` over apps: N_avg is the time-averaged number of apps
    active over each app's lifetime, from these arrivals and finishes."""
    events = sorted([(t, 1) for t in arrivals.values()] + [(t, -1) for t in finishes.values()])

    def integral(upto: float) -> float:
        total, count, last = 0.0, 0, 0.0
        for t, step in events:
            if t > upto:
                break
            total += count * (t - last)
            count, last = count + step, t
        return total + count * (upto - last)

    worst = 0.0
    for app, arrival in arrivals.items():
        finish = finishes[app]
        n_avg = (integral(finish) - integral(arrival)) / (finish - arrival)
        worst = max(worst, posthoc_rho(arrival, finish, t_cluster[app], n_avg))
    return worst


def run(trace: str, cluster: str, **kw: object) -> tuple[SimulationResult, Iterable]:
    config = make_config(
        trace=trace,
        cluster=cluster,
        fairness_knob=0.8,
        lease=600.0,
        batch_window=30.0,
        seed=0,
        arrivals=None,
        app_interval=9000.0,
        **kw,  # type: ignore[arg-type]
    )
    workload, cluster_ = load_inputs(config)
    policy = make_policy("tiresias", config.options)
    return simulate(workload, cluster_, policy, batch_window=30.0), workload.apps


@pytest.mark.parametrize(
    ("name", "schedule", "knob"),
    [
        ("synthetic1", "dlas-gpu", None),
        ("synthetic2", "dlas-gpu", None),
        # their promotion run: PROMOTEKNOB 8, the same queues
        ("synthetic1", "dlas-gpu-8", 8.0),
        ("synthetic2", "dlas-gpu-8", 8.0),
    ],
)
def test_per_job_completions_match_the_authors_simulator(
    name: str, schedule: str, knob: float | None
) -> None:
    result, apps = run(
        str(FIXTURES / f"{name}_job.csv"),
        "1x4x8",
        profiles=str(FIXTURES / "flat_profiles.json"),
        trace_format_name="tiresias",
        tiresias_promote_knob=knob,
    )
    arrival = {j.job_id: a.arrival for a in apps for j in a.jobs}
    check_per_job(completions(result, arrival), authors_completions(name, schedule))


def test_bundled_trace_per_job_and_max_rho_match_the_authors_simulator() -> None:
    result, apps = run("hyperdrive", "2x4x8", profiles=None)
    arrival = {j.job_id: a.arrival for a in apps for j in a.jobs}
    check_per_job(completions(result, arrival), authors_completions("hyperdrive"))

    ends = authors_ends("hyperdrive")
    app_arrival = {a.app_id: a.arrival for a in apps}
    theirs = {a.app_id: max(ends[j.job_id] for j in a.jobs) for a in apps}
    t_cluster = {a.app_id: a.t_cluster for a in result.apps}
    authors = max_rho(app_arrival, theirs, t_cluster)
    assert authors == pytest.approx(2.04, abs=0.01)  # the figure first reported, recomputed
    ours = max(
        posthoc_rho(a.arrival, a.finish, a.t_cluster, result.n_avg[a.app_id])
        for a in result.apps
        if a.finish is not None
    )
    assert abs(ours / authors - 1) <= 0.25, (ours, authors)
