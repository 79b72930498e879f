"""gavel and gavel-mmf against Gavel's own simulator: the same jobs (tests/fixtures/gavel/,
README there for provenance) run through stanford-futuredata/gavel's unmodified
``simulate_scheduler_with_trace.py`` (policies ``finish_time_fairness`` and
``max_min_fairness``), whose per-job completion times are the fixtures.

Checked per workload and policy, rho computed the same way for both runs (``(f - a) /
(T_cluster * N_avg)`` of docs/metrics.md, from each app's last job's finish):

- the median over jobs of (our completion time / Gavel's) within 5% of 1;
- the 90th percentile of the apps' rho within 25%;
- the worst app's rho within 25%, over the apps whose fair time ``T_cluster * N_avg`` is at
  least one reset interval plus a round (2,280 s).

Why tolerances, and what they cover. Gavel solves its program with ECOS, an interior-point
method. Where the optimum is not unique (a job that waited long sets the min-max level and
every other job may take anything between its need and 1) ECOS returns some point inside
the optimal face, and on large instances "optimal_inaccurate" answers (90 of the 375 solves
of ``hd_gangmix_s0``): ``gavel`` takes the leximin optimum instead
(``_gavel_program.solve_ftf``). Probed on random 40-job instances, ECOS reaches the same
min-max level to 4 digits but leaves 1-6% of the GPUs unallocated and ranks the other jobs'
shares differently (Spearman 0.79-1.0). Max-min on one type leaves a choice too when
``C / N`` exceeds the smallest gang (water-filling here). Those choices move priorities, so
single jobs finish rounds earlier or later (per-job ratios, p10 to p90: 0.93 to 1.12), which
shifts when later solves happen. An app whose fair time is shorter than the 1,920 s between
solves has a rho set by where its arrival falls between two solves (it waits for the next
one): on ``hd_gangmix_s0`` app 1013 (one 4-GPU job, 131 s of work, fair time 263 s) waits
1,800 s in Gavel and 720 s here, rho 7.35 against 3.24. Hence the worst-app check over the
apps with a fair time of at least 2,280 s, where a phase shift moves rho by less than the
band. One known miss is kept visible (``KNOWN_TAIL_MISSES``): under max-min on
``hd_gangmix_s0`` both simulators starve the same 4-GPU job for days, 84 h in Gavel and
119 h here, and that one app's rho differs by 70%.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from themis.model.cluster import Cluster
from themis.policies import make_policy
from themis.simulator.engine import SimulationResult, simulate
from themis.workload.loader import load_workload

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gavel"

#: fixture name -> cluster (Gavel: ``-c 8:0:0`` or ``32:0:0``, 8 GPUs per server)
WORKLOADS = {
    "hd_gangmix_s0": "1x1x8",
    "hd_gangmix_s2": "1x1x8",
    "gen200_gangmix_s0": "1x4x8",
}
#: our policy -> Gavel's policy it follows
POLICIES = {"gavel": "finish_time_fairness", "gavel-mmf": "max_min_fairness"}

#: ``Job <id>: <seconds>``, optionally ``  # [Job failed] ...`` (tests/fixtures/gavel/
#: extract_jct.py: a job Gavel gave up on after its last steps, within seconds of its end)
#: The fair time (``T_cluster * N_avg``, seconds) below which an app's rho is set by where
#: its arrival falls between two solves: Gavel's reset interval plus a round.
PHASE_BOUND = 1920.0 + 360.0

#: (workload, policy) whose worst app is a starvation both simulators show but end at
#: different times (see the module docstring): checked for the same worst app instead.
KNOWN_TAIL_MISSES = {("hd_gangmix_s0", "gavel-mmf")}

_JOB_LINE = re.compile(r"^Job (\d+): ([0-9.]+)(  # \[Job failed\].*)?$")


def gavel_jct(name: str, policy: str) -> list[float]:
    """Gavel's per-job completion times (completion - arrival), by job id (trace line)."""
    out: dict[int, float] = {}
    for line in (FIXTURES / f"{name}.{policy}.jct").read_text().splitlines():
        match = _JOB_LINE.match(line)
        assert match is not None, f"{name}.{policy}.jct: not a 'Job N: seconds' line: {line!r}"
        out[int(match.group(1))] = float(match.group(2))
    assert sorted(out) == list(range(len(out)))
    return [out[k] for k in range(len(out))]


def n_avg(intervals: list[tuple[float, float]]) -> list[float]:
    """Each app's time-averaged number of active apps (itself included) over its
    ``[arrival, finish]``, from every app's interval."""
    out = []
    for a, f in intervals:
        if f <= a:
            out.append(1.0)
            continue
        overlap = sum(max(0.0, min(f, f2) - max(a, a2)) for a2, f2 in intervals)
        out.append(overlap / (f - a))
    return out


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], SimulationResult]:
    out = {}
    for name, cluster in WORKLOADS.items():
        workload = load_workload(str(FIXTURES / f"{name}.json"))
        for policy in POLICIES:
            out[name, policy] = simulate(workload, Cluster.from_spec(cluster), make_policy(policy))
    return out


def _ours(result: SimulationResult) -> list[float]:
    """Per-job completion times, in Gavel's job order (apps by arrival, jobs in order)."""
    return [
        job.finished_at - app.arrival
        for app in result.apps
        for job in app.jobs
        if job.finished_at is not None
    ]


def app_rhos(result: SimulationResult, jct: list[float]) -> list[tuple[float, float, str]]:
    """(rho, fair time T_cluster * N_avg, app id) of every app when its jobs finish ``jct``
    after its arrival."""
    spans = []
    k = 0
    for app in result.apps:
        spans.append((app.arrival, app.arrival + max(jct[k : k + len(app.jobs)])))
        k += len(app.jobs)
    navg = n_avg(spans)
    return [
        ((f - a) / (app.t_cluster * n), app.t_cluster * n, app.app_id)
        for app, (a, f), n in zip(result.apps, spans, navg, strict=True)
    ]


def _max_rho(result: SimulationResult, jct: list[float], bound: float = 0.0) -> float:
    """The worst rho over the apps whose fair time is at least ``bound``."""
    return max(rho for rho, fair, _ in app_rhos(result, jct) if fair >= bound)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_per_job_completion_times_match_gavels_simulator(
    runs: dict, name: str, policy: str
) -> None:
    result = runs[name, policy]
    ours = _ours(result)
    theirs = gavel_jct(name, POLICIES[policy])
    assert len(ours) == len(theirs) == result.workload.job_count
    ratio = statistics.median(o / t for o, t in zip(ours, theirs, strict=True))
    assert ratio == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_app_rho_tail_matches_gavels_simulator(runs: dict, name: str, policy: str) -> None:
    result = runs[name, policy]
    ours = app_rhos(result, _ours(result))
    theirs = app_rhos(result, gavel_jct(name, POLICIES[policy]))
    assert np.percentile([r for r, _, _ in ours], 90) == pytest.approx(
        np.percentile([r for r, _, _ in theirs], 90), rel=0.25
    )
    if (name, policy) in KNOWN_TAIL_MISSES:
        # the same app starves in both, far beyond every other app
        assert max(ours)[2] == max(theirs)[2]
        assert max(ours)[0] > 3 * sorted(ours)[-2][0]
        assert max(theirs)[0] > 3 * sorted(theirs)[-2][0]
        return
    assert _max_rho(result, _ours(result), PHASE_BOUND) == pytest.approx(
        _max_rho(result, gavel_jct(name, POLICIES[policy]), PHASE_BOUND), rel=0.25
    )


def test_the_rho_here_is_the_simulators(runs: dict) -> None:
    # A control for _max_rho: from our own run's finishes it gives the simulator's report.
    result = runs["hd_gangmix_s0", "gavel"]
    spans = [(app.arrival, app.finish) for app in result.apps]
    assert n_avg(spans) == [pytest.approx(result.n_avg[app.app_id]) for app in result.apps]
    assert _max_rho(result, _ours(result)) == pytest.approx(
        max(
            (app.finish - app.arrival) / (app.t_cluster * result.n_avg[app.app_id])
            for app in result.apps
        )
    )


def test_the_old_formula_is_far_from_gavels_finish_time_fairness(runs: dict) -> None:
    # The band is tight enough to tell the two programs apart: this port's earlier
    # finish-time fairness (now gavel-mmf) against Gavel's FTF fails it by far.
    result = runs["hd_gangmix_s0", "gavel-mmf"]
    old = _max_rho(result, _ours(result), PHASE_BOUND)
    gavel_ftf = _max_rho(result, gavel_jct("hd_gangmix_s0", "finish_time_fairness"), PHASE_BOUND)
    assert old > 2 * gavel_ftf
