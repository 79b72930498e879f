"""Policies on hand-built views: water-filling, FIFO, max-min preemption, and one round of
the Themis arbiter (offer, auction, leftover)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.arbiter.leftover import allocate_leftover
from themis.arbiter.options import ArbiterOptions
from themis.arbiter.round import Arbiter, offered_count
from themis.errors import ThemisError
from themis.fairness.ftf import t_cluster
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, JobSpec
from themis.policies import PolicyOptions, SchedulingView, make_policy, policy_names
from themis.policies.max_min import water_fill

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)

# -- water_fill ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "demands", "shares"),
    [
        (10, [2, 8, 8], [2, 4, 4]),  # 3 each; the first needs only 2; 1 more each for the rest
        (5, [3, 3], [3, 2]),  # 2 each, the odd one to the earlier entry
        (4, [0, 5], [0, 4]),
        (10, [1, 2], [1, 2]),  # enough for everyone: demands
        (0, [3, 3], [0, 0]),
        (3, [], []),
        (2, [1, 1, 1], [1, 1, 0]),  # fewer GPUs than apps: the earlier ones
        (7, [7, 1, 1, 1], [4, 1, 1, 1]),
    ],
)
def test_water_fill_hand_cases(capacity: int, demands: list[int], shares: list[int]) -> None:
    assert water_fill(capacity, demands) == shares


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.lists(st.integers(0, 12), max_size=8))
def test_water_fill_is_max_min_fair(capacity: int, demands: list[int]) -> None:
    shares = water_fill(capacity, demands)
    assert len(shares) == len(demands)
    assert sum(shares) == min(capacity, sum(demands))
    assert all(0 <= s <= d for s, d in zip(shares, demands, strict=True))
    # Max-min: nobody below its demand has 2+ fewer than anyone else.
    for i, (s, d) in enumerate(zip(shares, demands, strict=True)):
        if s < d:
            assert all(other <= s + 1 for other in shares), (i, shares)


# -- registry ------------------------------------------------------------------------------


def test_policy_names_and_unknown_policy() -> None:
    names = policy_names()
    assert {"fifo", "max-min", "themis"} <= set(names)
    with pytest.raises(ThemisError) as err:
        make_policy("nope")
    text = str(err.value)
    assert "'nope'" in text
    assert err.value.field == "--policy"
    for name in names:
        assert name in text
    for name in names:
        assert make_policy(name).name == name


# -- offered_count ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "f", "expected"),
    [
        (0, 0.5, 0),
        (10, 0.0, 10),
        (10, 0.8, 2),
        (5, 0.8, 1),  # (1 - 0.8) * 5 is 1.0000000000000002 in floats: still 1
        (3, 0.5, 2),  # ceil(1.5)
        (1, 0.99, 1),
        (100, 0.99, 1),
        (7, 0.0, 7),
        (10, 0.7, 3),  # 0.3 * 10 = 3.0000000000000004 in floats: still 3
        (10, 0.95, 1),  # ceil(0.5)
    ],
)
def test_offered_count(n: int, f: float, expected: int) -> None:
    assert offered_count(n, f) == expected


@given(st.integers(1, 200), st.floats(0.0, 0.999))
def test_offered_count_bounds(n: int, f: float) -> None:
    k = offered_count(n, f)
    assert 1 <= k <= n
    assert k >= (1 - f) * n - 1e-6


# -- hand-built views ----------------------------------------------------------------------


def make_app(
    app_id: str,
    arrival: float,
    jobs: Sequence[tuple[int, float]],
    cluster: Cluster,
    profile: ModelProfile = TOY,
) -> AppState:
    spec = AppSpec(
        app_id,
        arrival,
        profile.name,
        tuple(JobSpec(f"{app_id}{k}", g, w) for k, (g, w) in enumerate(jobs)),
    )
    app = AppState(spec, profile, 0.0)
    for job in app.jobs:
        job.updated_at = arrival
    app.t_cluster = t_cluster(profile, app.remaining_by_gang(arrival), cluster.shape)
    return app


def run_job(job: JobState, gpus: tuple[int, ...], since: float, until: float | None) -> None:
    """``job`` has held ``gpus`` (one machine) since ``since`` at 1 it/s per GPU."""
    job.updated_at = since
    job.start(gpus, len(gpus) * 1.0, since)
    job.until = until


def view(cluster: Cluster, apps: list[AppState], now: float, n_avg: float = 2.0) -> SchedulingView:
    return SchedulingView(now, cluster, apps, lambda _app: n_avg)


def used_gpus(schedule) -> list[int]:
    return [g for a in schedule.values() for g in a.gpus]


def test_fifo_never_preempts_and_backfills() -> None:
    c = Cluster.from_spec("1x1x4")
    a = make_app("a", 0.0, [(2, 100.0), (4, 10.0), (1, 10.0)], c)
    b = make_app("b", 5.0, [(1, 10.0), (1, 10.0)], c)
    run_job(a.jobs[0], (0, 1), 0.0, None)
    v = view(c, [a, b], 10.0)
    s = make_policy("fifo").schedule(v)
    # a0 keeps its GPUs; a1 (4-gang) cannot fit 2 free GPUs and does not block: a2 and b0
    # are backfilled in order; b1 finds nothing left.
    assert {j.job_id: asg.gpus for j, asg in s.items()} == {
        "a0": (0, 1),
        "a2": (2,),
        "b0": (3,),
    }
    assert all(asg.until is None for asg in s.values())


def test_fifo_keeps_every_running_job_even_when_others_wait() -> None:
    c = Cluster.from_spec("1x2x2")
    late = make_app("late", 0.0, [(1, 5.0)] * 4, c)
    early_but_waiting = make_app("early", -10.0, [(2, 5.0)], c)
    for k, job in enumerate(late.jobs):
        run_job(job, (k,), 0.0, None)
    s = make_policy("fifo").schedule(view(c, [early_but_waiting, late], 1.0))
    assert {j.job_id: asg.gpus for j, asg in s.items()} == {f"late{k}": (k,) for k in range(4)}


def test_max_min_preempts_newest_jobs_of_over_share_app() -> None:
    c = Cluster.from_spec("1x1x4")
    a = make_app("a", 0.0, [(1, 100.0)] * 4, c)
    b = make_app("b", 10.0, [(1, 50.0), (1, 50.0), (1, 50.0)], c)
    for k, job in enumerate(a.jobs):
        run_job(job, (k,), float(k), None)  # a3 started last, on GPU 3
    s = make_policy("max-min").schedule(view(c, [a, b], 10.0))
    # Shares: water-fill 4 over demands (4, 3) -> (2, 2). a loses its two newest jobs
    # (a3, then a2), b's first two jobs take their GPUs.
    placed = {j.job_id: asg.gpus for j, asg in s.items()}
    assert placed["a0"] == (0,) and placed["a1"] == (1,)
    assert "a2" not in placed and "a3" not in placed
    assert sorted(placed[k] for k in ("b0", "b1")) == [(2,), (3,)]
    assert len(placed) == 4


def test_max_min_does_not_preempt_for_a_gang_that_cannot_fit() -> None:
    c = Cluster.from_spec("1x1x4")
    a = make_app("a", 0.0, [(1, 100.0)] * 3, c)
    b = make_app("b", 10.0, [(4, 40.0)], c)
    for k, job in enumerate(a.jobs):
        run_job(job, (k,), 0.0, None)
    s = make_policy("max-min").schedule(view(c, [a, b], 10.0))
    # Shares (2, 2): b is below its share, but its 4-gang cannot run unless a gives up all
    # 3 GPUs, which is more than a's excess. Preempting a job of a helps nobody.
    assert {j.job_id: asg.gpus for j, asg in s.items()} == {"a0": (0,), "a1": (1,), "a2": (2,)}


def test_max_min_gives_idle_gpus_to_whoever_can_use_them() -> None:
    c = Cluster.from_spec("1x1x4")
    a = make_app("a", 0.0, [(1, 100.0)] * 3, c)
    b = make_app("b", 0.0, [(1, 100.0)], c)
    s = make_policy("max-min").schedule(view(c, [a, b], 0.0))
    # Shares (3, 1): demands fit exactly; all 4 GPUs busy.
    assert sorted(used_gpus(s)) == [0, 1, 2, 3]
    assert sum(1 for j in s if j.app is a) == 3


# -- one Themis arbiter round ------------------------------------------------------------------


class FixedRandom(random.Random):
    """random() always returns ``value``: forces the whole-GPU rounding up (0.0) or down."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.fixture
def three_apps() -> tuple[Cluster, list[AppState]]:
    """1x1x4 at t=100: A, B, C each run one job on GPUs 0, 1, 2 (leases to t=1000) and
    have one 1-GPU job waiting; GPU 3 is free. N_avg = 2 for everyone.

    A: 110 + 10 it (T_cluster = max(120/2, 110) = 110); at t=100 10 + 10 left on 1 GPU:
       rho = (100 + 20) / (110 * 2) = 0.545; with GPU 3: (100 + 10) / 220 = 0.5.
    B: 200 + 100 it (T_cluster 200); left 100 + 100: rho = (100 + 200) / 400 = 0.75;
       with GPU 3: (100 + 100) / 400 = 0.5.
    C: 200 + 120 it (T_cluster 200); left 100 + 120: rho = 320 / 400 = 0.8;
       with GPU 3: (100 + 120) / 400 = 0.55.
    """
    c = Cluster.from_spec("1x1x4")
    apps = [
        make_app("A", 0.0, [(1, 110.0), (1, 10.0)], c),
        make_app("B", 0.0, [(1, 200.0), (1, 100.0)], c),
        make_app("C", 0.0, [(1, 200.0), (1, 120.0)], c),
    ]
    for g, app in enumerate(apps):
        run_job(app.jobs[0], (g,), 0.0, 1000.0)
    assert [a.t_cluster for a in apps] == [110.0, 200.0, 200.0]
    return c, apps


def check_round(schedule, apps: list[AppState]) -> dict[str, tuple[int, ...]]:
    gpus = used_gpus(schedule)
    assert len(gpus) == len(set(gpus)), "a GPU was granted twice"
    for app in apps:  # running jobs whose leases do not end keep GPUs and lease
        job = app.jobs[0]
        assert schedule[job].gpus == job.gpus
        assert schedule[job].until == 1000.0
    for job, asg in schedule.items():
        assert len(asg.gpus) == job.gang
    return {j.job_id: asg.gpus for j, asg in schedule.items()}


def test_round_rhos_and_only_worst_offered_with_f_near_one(three_apps) -> None:
    c, apps = three_apps
    arbiter = Arbiter(
        c, ArbiterOptions(fairness_knob=0.99, lease=30.0, ranking="declared"), random.Random(1)
    )
    s = arbiter.run_round(view(c, apps, 100.0))
    rec = arbiter.last_round
    assert rec is not None
    assert rec.rhos == {
        "A": pytest.approx(120 / 220, rel=1e-12),
        "B": pytest.approx(0.75, rel=1e-12),
        "C": pytest.approx(0.8, rel=1e-12),
    }
    assert rec.offered == ["C"]
    assert rec.pool == [3]
    # C, the only bidder, gets the whole offer (c_C = 1): its waiting job on GPU 3, leased
    # for 30 s from now.
    placed = check_round(s, apps)
    assert placed == {"A0": (0,), "B0": (1,), "C0": (2,), "C1": (3,)}
    assert s[apps[2].jobs[1]].until == 130.0
    assert rec.outcome is not None and rec.outcome.apps["C"].c == 1.0
    assert rec.leftover_grants == {}


def test_verified_ranking_reads_progress_not_declared_remaining_work(three_apps) -> None:
    """Ranked by the rho of the work done, A, B and C tie: each made 100 iterations on one
    GPU in 100 s (fair time 100 s alone, times N = 2: rho 0.5), whatever each declares is
    left; the tie goes to arrival, then id: A is offered, not C (the worst by declared rho)."""
    c, apps = three_apps
    arbiter = Arbiter(
        c, ArbiterOptions(fairness_knob=0.99, lease=30.0, ranking="verified"), random.Random(1)
    )
    arbiter.run_round(view(c, apps, 100.0))
    rec = arbiter.last_round
    assert rec is not None and rec.offered == ["A"]
    assert rec.rhos["C"] == pytest.approx(0.8, rel=1e-12)  # bids still value declared work


def test_round_f_half_offers_the_two_worst(three_apps) -> None:
    c, apps = three_apps
    arbiter = Arbiter(
        c, ArbiterOptions(fairness_knob=0.5, lease=30.0, ranking="declared"), FixedRandom(0.0)
    )  # rounding up
    s = arbiter.run_round(view(c, apps, 100.0))
    rec = arbiter.last_round
    assert rec is not None
    assert rec.offered == ["C", "B"]  # ceil(0.5 * 3) = 2, worst first
    # Proportional fairness: B gains log(0.75 / 0.5) > C's log(0.8 / 0.55): B wins GPU 3.
    # Without B, C would win: c_B = (0.55 / 0.8) ... = 0.6875, rounded up to the 1 GPU.
    assert rec.outcome is not None
    assert rec.outcome.apps["B"].choice == (3,)
    assert rec.outcome.apps["B"].c == pytest.approx(0.55 / 0.8, rel=1e-9)
    placed = check_round(s, apps)
    assert placed["B1"] == (3,)
    assert len(placed) == 4


def test_round_hidden_payment_goes_to_the_worst_off_app_that_did_not_pay_it(three_apps) -> None:
    c, apps = three_apps
    # Same round, rounding always down: B's 0.6875 of one GPU is nothing; GPU 3 is
    # leftover. B paid it as its hidden payment, so B comes last; of the others the worst
    # off (C, rho 0.8, ahead of A's 0.545) gets it, whether it was offered or not.
    arbiter = Arbiter(
        c, ArbiterOptions(fairness_knob=0.5, lease=30.0, ranking="declared"), FixedRandom(0.999)
    )
    s = arbiter.run_round(view(c, apps, 100.0))
    rec = arbiter.last_round
    assert rec is not None
    assert rec.outcome is not None and rec.outcome.apps["B"].granted == ()
    assert rec.outcome.apps["B"].choice == (3,)
    assert rec.leftover_grants == {"C": [3]}
    placed = check_round(s, apps)
    assert placed["C1"] == (3,)
    assert s[apps[2].jobs[1]].until == 130.0


def test_round_with_everyone_offered_leftover_goes_worst_first(three_apps) -> None:
    c, apps = three_apps
    arbiter = Arbiter(
        c, ArbiterOptions(fairness_knob=0.0, lease=30.0, ranking="declared"), FixedRandom(0.999)
    )
    s = arbiter.run_round(view(c, apps, 100.0))
    rec = arbiter.last_round
    assert rec is not None
    assert rec.offered == ["C", "B", "A"]
    # B wins the auction but keeps nothing after rounding down; all were offered, so the
    # leftover goes by rho, worst first: C.
    assert rec.leftover_grants == {"C": [3]}
    assert check_round(s, apps)["C1"] == (3,)


def test_round_renews_expiring_lease_without_restart() -> None:
    c = Cluster.from_spec("1x1x2")
    a = make_app("a", 0.0, [(1, 100.0), (1, 100.0)], c)
    run_job(a.jobs[0], (1,), 0.0, 30.0)  # its lease ends now
    run_job(a.jobs[1], (0,), 0.0, 30.0)
    arbiter = Arbiter(c, ArbiterOptions(fairness_knob=0.8, lease=30.0), random.Random(0))
    s = arbiter.run_round(view(c, [a], 30.0, n_avg=1.0))
    assert {j.job_id: (asg.gpus, asg.until) for j, asg in s.items()} == {
        "a0": ((1,), 60.0),
        "a1": ((0,), 60.0),
    }


def test_round_with_nothing_free_changes_nothing(three_apps) -> None:
    c, apps = three_apps
    d = make_app("D", 0.0, [(1, 500.0)], c)
    run_job(d.jobs[0], (3,), 0.0, 1000.0)  # GPU 3 busy too; no lease ends now
    arbiter = Arbiter(c, ArbiterOptions(fairness_knob=0.0, lease=30.0), random.Random(0))
    s = arbiter.run_round(view(c, [*apps, d], 100.0))
    assert {j.job_id: (a.gpus, a.until) for j, a in s.items()} == {
        "A0": ((0,), 1000.0),
        "B0": ((1,), 1000.0),
        "C0": ((2,), 1000.0),
        "D0": ((3,), 1000.0),
    }


def test_themis_rejects_bad_knobs() -> None:
    # checked once, when the options are made (policies/knobs.py), before any arbiter
    for bad in ({"fairness_knob": 1.0}, {"fairness_knob": -0.1}, {"lease": 0.0}):
        with pytest.raises(ValueError):
            make_policy("themis", PolicyOptions(**bad))  # type: ignore[arg-type]


def test_allocate_leftover_prefers_best_span_then_candidate_order() -> None:
    c = Cluster.from_spec("1x2x2")  # machines {0,1}, {2,3}
    first = make_app("first", 0.0, [(2, 10.0)], c)
    second = make_app("second", 0.0, [(1, 10.0), (1, 10.0)], c)
    leftover = {1, 2, 3}
    placed = allocate_leftover(c, [first, second], set(), leftover, 0.0)
    # Best-span pass: first's 2-gang fits machine 1 (2, 3); second's jobs take GPU 1 and
    # then find nothing.
    assert {j.job_id: g for j, g in placed.items()} == {"first0": (2, 3), "second0": (1,)}
    assert leftover == set()


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 200), st.lists(st.integers(0, 40), max_size=30))
def test_fast_water_fill_is_water_fill(capacity: int, demands: list[int]) -> None:
    from themis.policies.max_min import fast_water_fill, water_fill

    assert fast_water_fill(capacity, demands) == water_fill(capacity, demands)
