"""ftf-oracle (per app, lexicographic, every event): the min-max rho program against
hand-derived optima and a brute-force search, the HiGHS stage, the deficit rounds, and whole
schedules by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.simulator.test_invariants import scenarios
from themis.fairness.ftf import estimate_time, rho, t_cluster
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile, load_profiles
from themis.model.state import AppState, GangWork, JobState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions, SchedulingView, make_policy
from themis.policies._deficit_rounds import Claim, DeficitLedger, pick_jobs
from themis.policies._ftf_program import AppLoad, app_load, solve, spread_unclaimed
from themis.policies.ftf_oracle import FtfOraclePolicy
from themis.simulator.engine import Conditions, simulate
from themis.workload.generator import GeneratorSpec, generate

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


# -- the program's rho is Themis's rho ------------------------------------------------------


def test_app_load_at_its_cap_is_estimate_time_on_the_cluster() -> None:
    # 2x2x2 (8 GPUs, 4 per rack, 2 per machine). Gangs of 1 (3 jobs: 30 it in total, the
    # longest 20) and of 4 (one job, 40 it; best placement: one rack, factor 0.8).
    # work = 30 + 40 / 0.8 = 80 GPU-s; longest = max(20, 40 / (4 * 0.8)) = 20 s;
    # demand = 3 + 4 = 7 GPUs.
    cluster = Cluster.from_spec("2x2x2")
    remaining = {1: GangWork(30.0, 20.0, 3), 4: GangWork(40.0, 40.0, 1)}
    load = app_load(TOY, remaining, cluster.shape, elapsed=5.0, ideal=50.0)
    assert load is not None
    assert (load.work, load.longest, load.cap) == (approx(80.0), approx(20.0), 7.0)
    t = estimate_time(TOY, remaining, cluster.shape)
    assert load.remaining_time(load.cap) == approx(t)
    # The same rho Themis's agents report with the whole cluster.
    assert load.rho(load.cap) == approx(rho(10.0, 5.0, t, 25.0, 2.0))
    # Fewer GPUs: the GPU-seconds bound; below it the longest job's bound.
    assert load.remaining_time(2.0) == approx(40.0)
    assert load.saturation == approx(4.0)  # 80 / 20
    assert load.floor == approx((5.0 + 20.0) / 50.0)
    assert load.remaining_time(0.0) == math.inf
    assert app_load(TOY, {1: GangWork(0.0, 0.0, 2)}, cluster.shape, 0.0, 1.0) is None


# -- stage 1 on hand cases --------------------------------------------------------------------


def test_two_apps_on_four_gpus_share_to_equal_rho() -> None:
    # A: elapsed 100, T_id 200, 400 GPU-s left, longest 100 (4 GPUs of 1-GPU jobs).
    # B: just arrived, T_id 100, 200 GPU-s left, longest 50.
    # rho_A(x) = (100 + 400 / x) / 200,  rho_B(y) = (200 / y) / 100,  x + y = 4.
    # Equal rho: 1/2 + 2/x = 2/(4 - x)  ->  x^2 + 4x - 16 = 0  ->  x = 2 sqrt(5) - 2.
    a = AppLoad(elapsed=100.0, ideal=200.0, work=400.0, longest=100.0, cap=4.0)
    b = AppLoad(elapsed=0.0, ideal=100.0, work=200.0, longest=50.0, cap=4.0)
    alloc = solve([a, b], 4.0)
    x = 2 * math.sqrt(5) - 2
    assert alloc.shares == (approx(x), approx(4 - x))
    assert alloc.rhos == (approx((3 + math.sqrt(5)) / 4), approx((3 + math.sqrt(5)) / 4))
    assert alloc.water_level == approx((3 + math.sqrt(5)) / 4)
    # Any other split makes one of them worse.
    for dx in (-0.01, 0.01):
        assert max(a.rho(x + dx), b.rho(4 - x - dx)) > alloc.max_rho + 1e-6


def test_app_above_the_level_saturates_and_the_rest_go_lower() -> None:
    # A: one 1-GPU job of 300 s, 300 s elapsed, T_id 600: floor (300 + 300) / 600 = 1.0 at
    # 1 GPU (saturation: more GPUs cannot shorten one job).
    # B: 600 GPU-s in jobs of 100 s, T_id 300, cap 4: rho_B(y) = (600 / y) / 300.
    # 4 GPUs: A takes its saturation 1 and stays at 1.0 whatever happens; B gets the other
    # 3 -> rho 2/3. Max rho 1.0 is A's floor; the water level is B's 2/3 (lexicographic).
    a = AppLoad(elapsed=300.0, ideal=600.0, work=300.0, longest=300.0, cap=1.0)
    b = AppLoad(elapsed=0.0, ideal=300.0, work=600.0, longest=100.0, cap=4.0)
    alloc = solve([a, b], 4.0)
    assert alloc.shares == (approx(1.0), approx(3.0))
    assert alloc.rhos == (approx(1.0), approx(2.0 / 3.0))
    assert alloc.max_rho == approx(1.0)
    assert alloc.water_level == approx(2.0 / 3.0)


def test_everyone_saturated_unclaimed_gpus_go_to_the_worst_rho_first() -> None:
    # 3 GPUs. A: one 300 s job and two of 10 s (work 320, longest 300, cap 3): saturation
    # 320 / 300 = 16/15, floor 300 / 600 = 0.5. B: one 200 s job, two of 10 s (work 220,
    # longest 200, cap 3): saturation 1.1, floor 200 / 300 = 2/3. Saturations sum to
    # 2.1667 <= 3: no water level. The 0.8333 GPUs left go to B (the worse floor) up to its
    # cap; rhos stay at the floors.
    a = AppLoad(elapsed=0.0, ideal=600.0, work=320.0, longest=300.0, cap=3.0)
    b = AppLoad(elapsed=0.0, ideal=300.0, work=220.0, longest=200.0, cap=3.0)
    alloc = solve([a, b], 3.0)
    assert alloc.water_level is None
    assert alloc.shares == (approx(16.0 / 15.0), approx(3.0 - 16.0 / 15.0))
    assert alloc.rhos == (approx(0.5), approx(2.0 / 3.0))
    # With room for both caps, everybody gets its cap.
    assert solve([a, b], 8.0).shares == (approx(3.0), approx(3.0))


def test_spread_unclaimed_is_solved_by_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.optimize  # _ftf_program imports linprog from here when it solves

    calls = []
    real = scipy.optimize.linprog

    def spy(*args, **kwargs):
        calls.append(kwargs["method"])
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "linprog", spy)
    a = AppLoad(elapsed=0.0, ideal=600.0, work=320.0, longest=300.0, cap=3.0)
    b = AppLoad(elapsed=0.0, ideal=300.0, work=220.0, longest=200.0, cap=3.0)
    spread_unclaimed([a, b], [a.saturation, b.saturation], 3.0)
    assert calls == ["highs"]
    # Nothing unclaimed: no LP at all, the shares come back unchanged.
    assert spread_unclaimed([a, b], [1.5, 1.5], 3.0) == [1.5, 1.5]
    # Room for every cap: the optimum is forced, no LP either.
    assert spread_unclaimed([a, b], [a.saturation, b.saturation], 6.0) == [3.0, 3.0]
    assert calls == ["highs"]


def test_lone_app_at_arrival_has_rho_one() -> None:
    # T_id = T_cluster * 1 = max(work / cap, longest): its projected rho at its saturation
    # is exactly 1, as the report's rho of an app alone on the cluster.
    load = AppLoad(elapsed=0.0, ideal=max(500.0 / 4, 90.0), work=500.0, longest=90.0, cap=4.0)
    alloc = solve([load], 16.0)
    assert alloc.rhos == (approx(1.0),)
    assert alloc.shares == (approx(4.0),)  # its cap: the spare GPUs let every job run


def test_no_apps_and_bad_capacity() -> None:
    assert solve([], 4.0).shares == ()
    with pytest.raises(ValueError):
        solve([], 0.0)
    with pytest.raises(ValueError):
        AppLoad(elapsed=0.0, ideal=0.0, work=1.0, longest=1.0, cap=1.0)


# -- stage 1 against brute force ----------------------------------------------------------


@st.composite
def loads(draw: st.DrawFn) -> tuple[list[AppLoad], float]:
    capacity = float(draw(st.integers(1, 4)))
    apps = []
    for _ in range(draw(st.integers(1, 3))):
        demand = draw(st.integers(1, 5))
        work = float(draw(st.integers(1, 400)))
        # The longest job is at least the average job: work / demand <= longest <= work.
        longest = work / demand + draw(st.floats(0.0, 1.0)) * (work - work / demand)
        apps.append(
            AppLoad(
                elapsed=float(draw(st.integers(0, 300))),
                ideal=float(draw(st.integers(20, 400))),
                work=work,
                longest=longest,
                cap=float(min(demand, capacity)),
            )
        )
    return apps, capacity


def brute_force_min_max(apps: list[AppLoad], capacity: float, step: float) -> float:
    """The best max rho over every split of the cluster on a grid of ``step`` GPUs."""
    grids = [np.arange(step, a.cap + step / 2, step) for a in apps]
    rhos = [np.array([a.rho(s) for s in grid]) for a, grid in zip(apps, grids, strict=True)]
    total = sum(np.meshgrid(*grids, indexing="ij"))
    worst = np.maximum.reduce(np.meshgrid(*rhos, indexing="ij"))
    feasible = total <= capacity + 1e-12
    return float(worst[feasible].min()) if feasible.any() else math.inf


@settings(max_examples=60, deadline=None)
@given(loads())
def test_min_max_matches_brute_force_and_nothing_beats_it(case) -> None:
    apps, capacity = case
    alloc = solve(apps, capacity)
    shares = alloc.shares
    # Feasible.
    assert sum(shares) <= capacity + 1e-9
    assert all(0 < s <= a.cap + 1e-12 for a, s in zip(apps, shares, strict=True))
    # No split on a fine grid is better.
    grid_best = brute_force_min_max(apps, capacity, 1 / 16)
    assert alloc.max_rho <= grid_best + 1e-9
    # Every app sits at the water level, or below it only at its floor (saturated, where
    # more GPUs would not help): no GPU could lower the worst rho.
    for a, s, r in zip(apps, shares, alloc.rhos, strict=True):
        assert r == approx(a.rho(s))
        if alloc.water_level is not None:
            assert r <= max(alloc.water_level, a.floor) + 1e-9
            if r < alloc.water_level - 1e-9:
                assert s >= a.saturation - 1e-9
        else:
            assert r == approx(a.floor)
    if alloc.water_level is not None:
        assert sum(shares) == pytest.approx(capacity, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(loads())
def test_nothing_strictly_below_the_optimum_is_feasible(case) -> None:
    # Independent of stage 1's search: the least GPUs every app needs to reach the optimum
    # minus a little must exceed the cluster (or some app cannot get there at all).
    apps, capacity = case
    alloc = solve(apps, capacity)
    target = alloc.max_rho * (1 - 1e-6)
    if any(target < a.floor for a in apps):
        return  # somebody's floor is the optimum: nothing is below it
    assert sum(a.need(target) for a in apps) > capacity


# -- the rounds --------------------------------------------------------------------------------


def _job(app_id: str, k: int, gang: int) -> JobState:
    app = AppState(AppSpec(app_id, 0.0, "toy", (JobSpec(f"{app_id}{k}", gang, 10.0),)), TOY, 1.0)
    return app.jobs[0]


def test_ledger_charges_allotted_minus_held_and_bounds_it() -> None:
    ledger = DeficitLedger(round_length=600.0)
    ledger.advance(0.0, {"a": 1, "b": 1})
    ledger.record({"a": 1.5, "b": 0.5}, {"a": 1, "b": 1})
    ledger.advance(100.0, {"a": 1, "b": 1})
    # a: (1.5 - 1) * 100 = 50 GPU-s owed; b: (0.5 - 1) * 100 = -50.
    assert ledger.deficit("a") == approx(50.0)
    assert ledger.deficit("b") == approx(-50.0)
    assert ledger.claim("a", 1.5) == approx(1.5 + 50.0 / 600.0)
    # Anti-windup: at most one round of the largest gang either way.
    ledger.advance(10_000.0, {"a": 2, "b": 1})
    assert ledger.deficit("a") == approx(2 * 600.0)
    assert ledger.deficit("b") == approx(-600.0)
    ledger.advance(10_100.0, {"b": 1})  # a finished: forgotten
    assert ledger.deficit("a") == 0.0
    with pytest.raises(ValueError):
        ledger.advance(5.0, {"b": 1})


def test_pick_serves_the_largest_unmet_claim_and_backfills() -> None:
    a = [_job("a", k, 1) for k in range(3)]
    b = [_job("b", 0, 4), _job("b", 1, 1)]
    c = [_job("c", 0, 2)]
    claims = [
        Claim((0, "a"), 1.2, 0, a),  # owed 1.2
        Claim((1, "b"), 3.0, 0, b),  # owed 3.0, but its 4-gang never fits 3 GPUs
        Claim((2, "c"), 2.0, 1, c),  # owed 1.0 beyond the GPU it keeps
    ]
    # 3 free GPUs. b first (owed 3.0): its 4-gang is passed over, its 1-GPU job runs; b has
    # nothing more. a (1.2) takes one (0.2 left, 1 GPU free). c (1.0) is next, but its
    # 2-gang no longer fits: passed over. a takes the last GPU.
    assert pick_jobs(claims, 3) == [b[1], a[0], a[1]]
    # Nothing fits: nothing chosen.
    assert pick_jobs([Claim((0, "b"), 9.0, 0, b[:1])], 3) == []


def test_rounds_realize_fractional_shares() -> None:
    # Shares 1.5 and 2.5 GPUs of 1-GPU jobs on 4 GPUs, rounds of 100 s: over 20 rounds the
    # apps hold 30 and 50 GPU-rounds, within one gang-round.
    ledger = DeficitLedger(round_length=100.0)
    jobs = {app: [_job(app, k, 1) for k in range(4)] for app in ("a", "b")}
    shares = {"a": 1.5, "b": 2.5}
    got = {"a": 0, "b": 0}
    for r in range(20):
        ledger.advance(100.0 * r, {"a": 1, "b": 1})
        claims = [
            Claim((i, app), ledger.claim(app, shares[app]), 0, jobs[app])
            for i, app in enumerate(("a", "b"))
        ]
        chosen = pick_jobs(claims, 4)
        held = {app: sum(1 for j in chosen if j.app.app_id == app) for app in ("a", "b")}
        assert sum(held.values()) == 4  # work conserving
        for app in held:
            got[app] += held[app]
        ledger.record(shares, held)
    assert abs(got["a"] - 30) <= 1
    assert abs(got["b"] - 50) <= 1


# -- the policy, end to end -----------------------------------------------------------------


def run(apps, cluster: str, lease: float):
    specs = tuple(
        AppSpec(
            app_id,
            arrival,
            "toy",
            tuple(JobSpec(f"{app_id}{k}", g, w) for k, (g, w) in enumerate(jobs)),
        )
        for app_id, arrival, jobs in apps
    )
    policy = make_policy("ftf-oracle", PolicyOptions(lease=lease))
    return simulate(Workload(specs, {"toy": TOY}, "hand"), Cluster.from_spec(cluster), policy)


def test_app_below_its_share_runs_at_the_next_round() -> None:
    # 1x1x2, rounds of 100 s. A at 0: two 1-GPU jobs of 1000 s; B at 50: one of 100 s.
    # t=0   A alone: share 2. A0 -> GPU 0, A1 -> GPU 1 until the round ends at 100.
    # t=50  B arrives: no GPU is free and rounds only preempt at their end: B waits. Program
    #       (A: elapsed 50, T_id 1000, 1900 GPU-s left; B: T_id 100 * 2): level ~1.24,
    #       shares A ~1.60, B ~0.40. Over [50, 100] A holds 2 (0.40 too many), B 0.
    # t=100 Shares A ~1.31, B ~0.69; claims A 1.31 - 0.20 = 1.11, B 0.69 + 0.20 = 0.89.
    #       A gets a GPU (its first job, on GPU 0 again), then B (0.89 > 1.11 - 1): B0 on
    #       GPU 1; A1 is preempted.
    # t=200 B ends (B finishes at 200); A gets both GPUs back: A1 resumes (900 s left).
    # t=1000 A0 ends; t=1100 A1 ends: A finishes at 1100.
    r = run([("A", 0.0, [(1, 1000.0), (1, 1000.0)]), ("B", 50.0, [(1, 100.0)])], "1x1x2", 100.0)
    assert {a.app_id: a.finish for a in r.apps} == {"A": approx(1100.0), "B": approx(200.0)}
    got = sorted((i.start, i.end, i.job_id, i.gpus) for i in r.intervals)
    assert got == [
        (0.0, 100.0, "A1", (1,)),
        (0.0, approx(1000.0), "A0", (0,)),
        (100.0, approx(200.0), "B0", (1,)),
        (approx(200.0), approx(1100.0), "A1", (1,)),
    ]


def test_lone_app_runs_uninterrupted_across_rounds() -> None:
    # Round ends renew the lone app's grants on the same GPUs: one interval per job.
    r = run([("A", 3.0, [(1, 250.0), (2, 120.0)])], "1x1x4", 50.0)
    got = sorted((i.start, i.end, i.job_id) for i in r.intervals)
    assert got == [(3.0, approx(63.0), "A1"), (3.0, approx(253.0), "A0")]
    assert r.rounds >= 5


def _view_app(app_id: str, arrival: float, jobs, cluster: Cluster) -> AppState:
    spec = AppSpec(
        app_id,
        arrival,
        "toy",
        tuple(JobSpec(f"{app_id}{k}", g, w) for k, (g, w) in enumerate(jobs)),
    )
    app = AppState(spec, TOY, 0.0)
    for job in app.jobs:
        job.updated_at = arrival
    app.t_cluster = t_cluster(TOY, app.remaining_by_gang(arrival), cluster.shape)
    return app


def test_policy_shares_use_the_views_n_avg_and_themis_rho() -> None:
    # Two apps at 0 on 1x1x4 with N_avg 2: T_id = 2 T_cluster. A: four 100 s jobs
    # (T_cluster 100), B: four 50 s jobs (T_cluster 50). rho_A = (400/x)/200,
    # rho_B = (200/y)/100: equal at x = y = 2, rho 1.
    cluster = Cluster.from_spec("1x1x4")
    apps = [
        _view_app("A", 0.0, [(1, 100.0)] * 4, cluster),
        _view_app("B", 0.0, [(1, 50.0)] * 4, cluster),
    ]
    policy = FtfOraclePolicy(PolicyOptions(lease=60.0))
    schedule = policy.schedule(SchedulingView(0.0, cluster, apps, lambda _a: 2.0))
    assert policy.last_shares == {"A": approx(2.0), "B": approx(2.0)}
    assert policy.last_allocation is not None
    assert policy.last_allocation.max_rho == approx(1.0)
    held = {"A": 0, "B": 0}
    for job, grant in schedule.items():
        held[job.app.app_id] += len(grant.gpus)
        assert grant.until == 60.0
    assert held == {"A": 2, "B": 2}


def test_n_avg_below_one_counts_as_one() -> None:
    # N_avg includes the app itself. The simulator reports 0 when an app is admitted a
    # rounding error after its arrival (an average over a zero-length span): the program
    # must treat it as 1 (rho defined), not crash. Lone app: share = its cap, rho 1.
    cluster = Cluster.from_spec("1x1x4")
    app = _view_app("A", 0.0, [(1, 100.0)] * 2, cluster)
    policy = FtfOraclePolicy(PolicyOptions(lease=60.0))
    schedule = policy.schedule(SchedulingView(1e-15, cluster, [app], lambda _a: 0.0))
    assert policy.last_shares == {"A": approx(2.0)}
    assert policy.last_allocation is not None
    assert policy.last_allocation.max_rho == approx(1.0)
    assert sorted(len(g.gpus) for g in schedule.values()) == [1, 1]


def test_rejects_a_non_positive_round() -> None:
    with pytest.raises(ValueError):
        FtfOraclePolicy(PolicyOptions(lease=0.0))


# -- the incremental round -------------------------------------------------------------------


def _both_ways(workload: Workload, cluster: Cluster, options: PolicyOptions, **kw) -> list:  # type: ignore[no-untyped-def]
    """The run asked for changes (the simulator's default here) and for the full schedule:
    (rounds, intervals, finishes) of each."""
    fast = FtfOraclePolicy(options)
    assert fast.incremental
    full = FtfOraclePolicy(options)
    full.incremental = False  # type: ignore[misc]
    return [
        (
            r.rounds,
            [(i.start, i.end, i.job_id, i.gpus, i.best_span) for i in r.intervals],
            [(a.app_id, a.finish) for a in r.apps],
        )
        for r in (simulate(workload, cluster, p, **kw) for p in (fast, full))
    ]


@pytest.mark.parametrize(
    ("spec", "cluster", "conditions", "window"),
    [
        (GeneratorSpec(jobs=300, seed=1, gpus=32, load=1.5), "1x4x8", Conditions(), 0.0),
        (GeneratorSpec(jobs=300, seed=2, gpus=64, load=1.5), "2x4x8", Conditions(0.3, 30.0), 30.0),
        (GeneratorSpec(jobs=200, seed=3, gpus=64), "1x4x8:v100+1x4x8:k80", Conditions(), 0.0),
        (  # online successive halving: trials pause at rungs and resume
            GeneratorSpec(jobs=24, seed=2, load=1.5, gpus=8, max_trials=8, online_halving=1),
            "1x2x4",
            Conditions(0.2, 30.0),
            5.0,
        ),
    ],
)
def test_changes_make_the_run_the_full_schedule_makes(
    spec: GeneratorSpec, cluster: str, conditions: Conditions, window: float
) -> None:
    fast, full = _both_ways(
        generate(spec, load_profiles()),
        Cluster.from_spec(cluster),
        PolicyOptions(),
        conditions=conditions,
        batch_window=window,
    )
    assert fast[0] > 100
    assert fast == full


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_changes_make_the_full_run_on_small_workloads(scenario: tuple) -> None:
    workload, cluster, options, window = scenario
    fast, full = _both_ways(workload, Cluster.from_spec(cluster), options, batch_window=window)
    assert fast == full
