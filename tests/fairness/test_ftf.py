"""Finish-time fairness estimates, checked against hand arithmetic."""

from __future__ import annotations

import math

import pytest

from themis.fairness.ftf import (
    RHO_MAX,
    GangWork,
    estimate_time,
    posthoc_rho,
    rho,
    t_cluster,
)
from themis.fairness.shares import FairShares
from themis.model.cluster import Cluster, SetShape
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec

# time_per_iteration 2 s: one iteration on one GPU takes 2 s.
P = ModelProfile("toy", time_per_iteration=2.0, cross_machine=0.5, cross_rack=0.25)


def gw(*works: float) -> GangWork:
    return GangWork(sum(works), max(works), len(works))


def test_nothing_remaining_takes_no_time() -> None:
    assert estimate_time(P, {}, SetShape(4, 4, 4)) == 0.0
    assert estimate_time(P, {1: GangWork(0.0, 0.0, 1)}, SetShape(4, 4, 4)) == 0.0


def test_one_gpu_jobs_spread_over_the_set() -> None:
    # Four 1-GPU jobs of 10, 10, 10, 30 iterations = 60 iterations = 120 GPU-seconds.
    work = {1: gw(10, 10, 10, 30)}
    # On 2 GPUs: max(120 / 2, 30 * 2 / 1) = 60.
    assert estimate_time(P, work, SetShape(2, 2, 2)) == pytest.approx(60.0, rel=1e-12)
    # On 3 GPUs: max(120 / 3, 60) = 60 (the longest job bounds it).
    assert estimate_time(P, work, SetShape(3, 3, 3)) == pytest.approx(60.0, rel=1e-12)
    # On 1 GPU: 120.
    assert estimate_time(P, work, SetShape(1, 1, 1)) == pytest.approx(120.0, rel=1e-12)
    # On 16 GPUs the app can use only its demand of 4: max(120 / 4, 60) = 60.
    even = {1: gw(10, 10, 10, 10)}  # 80 GPU-seconds, longest 20 s
    assert estimate_time(P, even, SetShape(16, 4, 16)) == pytest.approx(20.0, rel=1e-12)
    assert estimate_time(P, even, SetShape(2, 1, 2)) == pytest.approx(40.0, rel=1e-12)


def test_one_gpu_jobs_ignore_spans() -> None:
    # 1-GPU jobs always fit one machine: no placement factor even on a scattered set.
    work = {1: gw(10, 10)}
    assert estimate_time(P, work, SetShape(2, 1, 1)) == pytest.approx(20.0, rel=1e-12)


def test_gang_that_cannot_fit_is_infinite() -> None:
    work = {4: gw(10)}
    assert estimate_time(P, work, SetShape(3, 3, 3)) == math.inf
    assert estimate_time(P, work, SetShape(0, 0, 0)) == math.inf
    # Even when other jobs could run: the app cannot finish.
    assert estimate_time(P, {1: gw(5), 4: gw(10)}, SetShape(3, 3, 3)) == math.inf


def test_gang_spanning_machines_pays_the_factor() -> None:
    # One 2-GPU job of 10 iterations: 20 GPU-seconds.
    work = {2: gw(10)}
    # In one machine: 20 / 2 = 10 s.
    assert estimate_time(P, work, SetShape(2, 2, 2)) == pytest.approx(10.0, rel=1e-12)
    # Two machines, one rack: factor 0.5 -> 40 GPU-seconds over 2 GPUs = 20 s.
    assert estimate_time(P, work, SetShape(2, 1, 2)) == pytest.approx(20.0, rel=1e-12)
    # Two racks: factor 0.25 -> 40 s.
    assert estimate_time(P, work, SetShape(2, 1, 1)) == pytest.approx(40.0, rel=1e-12)
    # A 4-GPU set with a 2-GPU machine: the job gets the machine, no factor.
    assert estimate_time(P, work, SetShape(4, 2, 4)) == pytest.approx(10.0, rel=1e-12)


def test_mixed_gangs() -> None:
    # Gang 1: 6 + 4 iterations (20 GPU-s, longest 12 s); gang 2: one job of 8 (32 GPU-s
    # at factor 0.5, i.e. 8 * 2 / (2 * 0.5) = 16 s). Set: 3 GPUs, at most 1 per machine.
    work = {1: gw(6, 4), 2: gw(8)}
    shape = SetShape(3, 1, 3)
    # GPU-seconds = 20 + 32 = 52; usable = min(3, 1 + 1 + 2) = 3 -> 17.333 > 16.
    assert estimate_time(P, work, shape) == pytest.approx(52 / 3, rel=1e-12)


def test_t_cluster_is_estimate_on_whole_cluster() -> None:
    c = Cluster.from_spec("1x2x2")
    work = {1: gw(10, 30), 2: gw(5)}
    assert t_cluster(P, work, c.shape) == estimate_time(P, work, c.shape)
    # 1-GPU: 80 GPU-s, 2-GPU: 20 GPU-s; demand 4 = cluster: max(100 / 4, 60) = 60.
    assert t_cluster(P, work, c.shape) == pytest.approx(60.0, rel=1e-12)


def test_rho_formula() -> None:
    # T_sh = (30 - 10) + 40 = 60; T_id = 20 * 1.5 = 30.
    assert rho(30.0, 10.0, 40.0, 20.0, 1.5) == pytest.approx(2.0, rel=1e-12)
    assert rho(0.0, 0.0, math.inf, 20.0, 1.0) == RHO_MAX
    assert rho(5.0, 0.0, 0.0, 0.0, 1.0) == RHO_MAX
    assert rho(0.0, 0.0, 0.0, 0.0, 1.0) == 1.0
    assert posthoc_rho(10.0, 70.0, 20.0, 1.5) == pytest.approx(2.0, rel=1e-12)
    assert posthoc_rho(10.0, 10.0, 0.0, 1.0) == 1.0


@pytest.mark.parametrize("spec", ["1x1x2", "1x2x2", "2x2x4"])
def test_lone_app_rho_at_arrival_is_one(spec: str) -> None:
    c = Cluster.from_spec(spec)
    app_spec = AppSpec(
        "a",
        123.0,
        "toy",
        (JobSpec("j1", 1, 17.0), JobSpec("j2", 1, 3.5), JobSpec("j3", c.size, 40.0)),
    )
    app = AppState(app_spec, P, 0.0)
    for job in app.jobs:
        job.updated_at = 123.0
    remaining = app.remaining_by_gang(123.0)
    assert remaining[1] == GangWork(20.5, 17.0, 2)
    t_cl = t_cluster(P, remaining, c.shape)
    assert 0 < t_cl < math.inf
    on_whole = estimate_time(P, remaining, c.shape)
    assert rho(123.0, 123.0, on_whole, t_cl, 1.0) == 1.0


def test_n_avg_is_time_weighted() -> None:
    acts = FairShares()  # every app its own owner: N_avg, the active apps over time
    acts.arrive(0.0, "a", "a")
    # a over [0, 10] read at t=10: alone.
    assert acts.n_eff("a", 10.0) == pytest.approx(1.0, rel=1e-12)
    acts.arrive(10.0, "b", "b")
    # At b's arrival instant: the current count (b included).
    assert acts.n_eff("b", 10.0) == 2.0
    acts.arrive(15.0, "c", "c")
    acts.leave(20.0, "c")
    # b over [10, 30], read when it leaves: (10 + 15 + 20) / 20 = 2.25.
    assert acts.n_eff("b", 30.0) == pytest.approx(2.25, rel=1e-12)
    acts.leave(30.0, "b")
    # Count: 1 on [0,10), 2 on [10,15), 3 on [15,20), 2 on [20,30), 1 on [30,40].
    assert acts.owners_area(40.0) == pytest.approx(10 + 10 + 15 + 20 + 10, rel=1e-12)
    # a over [0, 40]: 65 / 40.
    assert acts.n_eff("a", 40.0) == pytest.approx(65 / 40, rel=1e-12)
    acts.leave(40.0, "a")
    with pytest.raises(KeyError):  # more apps left than arrived
        acts.leave(41.0, "a")


def test_verified_rho_is_elapsed_over_the_fair_time_of_the_work_done() -> None:
    """Two 1-GPU jobs that made 100 iterations each (1 s per iteration) by t = 400 on a
    4-GPU machine: alone the app would have done that in 100 s (its 2 GPUs), times N = 2:
    200 s of fair time for 400 s elapsed, rho 2. Nothing done: RHO_MAX."""
    from themis.fairness.ftf import RHO_MAX, verified_rho
    from themis.model.cluster import SetShape

    profile = ModelProfile("toy", 1.0, 0.5, 0.25)
    shape = SetShape(4, 4, 4)
    done = {1: GangWork(200.0, 100.0, 2)}
    assert verified_rho(400.0, 0.0, profile, done, shape, 2.0) == 2.0
    assert verified_rho(400.0, 0.0, profile, {}, shape, 2.0) == RHO_MAX
