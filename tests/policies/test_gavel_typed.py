"""gavel on typed clusters: Gavel's heterogeneity-aware finish-time fairness (time fractions
per job and GPU type, rho's denominator the isolated time of the work done plus the
remaining work at the isolated speed), checked by hand, against a bisection and a grid;
its per-(job, type) mechanism (priorities per type, the queue walked type by type, gangs on
one type within the type's capacity); a schedule derived by hand and end-to-end runs."""

from __future__ import annotations

import itertools
from dataclasses import replace
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from tests.policies.hand import TOY, approx, assert_intervals, finishes, workload
from themis.experiments.variants import with_gang_mix
from themis.experiments.workloads import generated_workload
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, JobSpec
from themis.policies import PolicyOptions, make_policy
from themis.policies._gavel_mechanism import (
    TypedBooks,
    assign,
    pick_typed,
    type_order,
)
from themis.policies._gavel_program import (
    TypedJobLoad,
    gavel_isolated_typed,
    isolated_typed,
    solve_typed,
    typed_rho,
)
from themis.simulator.engine import SimulationResult, simulate

# -- the allocation program, by hand -----------------------------------------------------------


def test_two_jobs_on_one_v100_and_one_k80_keep_their_isolated_split() -> None:
    # Two 1-GPU jobs, A 4x faster on the V100 than on the K80, B 1.2x; one V100, one K80;
    # speeds in iterations/s (K80 = 1). Both fit: isolated fractions 1, spread 1/2 on each
    # type, so A's isolated speed is (4 + 1) / 2 = 2.5 and B's (1.2 + 1) / 2 = 1.1.
    # Every split that uses the cluster gives A p of the V100 and 1 - p of the K80 (and B
    # the rest): each job's time fractions already sum to 1, so giving A more V100 takes
    # K80 time from it one for one. u_A = (1 + 3p) / 2.5 rises, u_B = (1.2 - 0.2p) / 1.1
    # falls, equal (= 1) at p = 1/2: Gavel's min-max is the isolated split, rho = 1 for
    # both. Giving A the V100 (p = 1) would make B's rho 1.1 / 1 = 1.1.
    jobs = [TypedJobLoad(0.0, 1000.0, 1, (4.0, 1.0)), TypedJobLoad(0.0, 1000.0, 1, (1.2, 1.0))]
    result = solve_typed(jobs, [1.0, 1.0])
    assert result.fractions == ((approx(0.5), approx(0.5)), (approx(0.5), approx(0.5)))
    assert result.level == approx(1.0)
    assert typed_rho(jobs[1], (0.0, 1.0), result.isolated[1]) == approx(1.1)


def test_three_jobs_the_v100_goes_to_the_job_that_gains_most() -> None:
    # One V100, one K80; three 1-GPU jobs just submitted (e = 0, so rho_j = 1 / u_j):
    # A runs 3x faster on the V100 (speeds 3, 1), B1 and B2 alike on both (1, 1).
    # Isolated: 2 GPUs over 3 jobs, 2/3 of the time each, 1/3 on each type: A's isolated
    # speed 4/3, a B's 2/3. A gives up K80 time and B V100 time: A holds a of the V100,
    # the Bs share the rest (1 - a) and the whole K80:
    #   u_A = 3a / (4/3) = 9a/4,   each B: u_B = ((1 - a) / 2 + 1/2) / (2/3) = 3(2 - a)/4.
    # Equal at 9a = 6 - 3a: a = 1/2, u = 9/8 for all three, rho = 8/9 < 1 for everyone.
    # Each B holds 3/4 of the time, 1/4 of it on the V100 between them (which B holds
    # which part is not unique).
    jobs = [
        TypedJobLoad(0.0, 500.0, 1, (3.0, 1.0)),
        TypedJobLoad(0.0, 500.0, 1, (1.0, 1.0)),
        TypedJobLoad(0.0, 500.0, 1, (1.0, 1.0)),
    ]
    result = solve_typed(jobs, [1.0, 1.0])
    x = np.array(result.fractions)
    assert tuple(x[0]) == (approx(0.5), approx(0.0))
    assert x[1:, 0].sum() == approx(0.5)
    assert x[1:, 1].sum() == approx(1.0)
    assert list(x[1:].sum(axis=1)) == [approx(0.75), approx(0.75)]
    assert result.level == approx(8 / 9)
    rhos = [
        typed_rho(j, r, i) for j, r, i in zip(jobs, result.fractions, result.isolated, strict=True)
    ]
    assert rhos == [approx(8 / 9)] * 3


def test_a_job_that_waited_gets_its_best_and_the_others_share_the_rest() -> None:
    # The same three jobs, but B2 waited 10,000 s with nothing done (c = 0): its isolated
    # speed is 2/3, so R = 750 s and even holding a GPU all the time (u = 1.5) its rho is
    # (10000 + 500) / 750 = 14: the min-max level. The leximin optimum gives B2 its best
    # (a whole GPU's time) and lets A and B1 share the other GPU at one lower level.
    jobs = [
        TypedJobLoad(0.0, 500.0, 1, (3.0, 1.0)),
        TypedJobLoad(0.0, 500.0, 1, (1.0, 1.0)),
        TypedJobLoad(10_000.0, 500.0, 1, (1.0, 1.0)),
    ]
    result = solve_typed(jobs, [1.0, 1.0])
    x = np.array(result.fractions)
    assert result.level == approx(14.0)
    assert x[2].sum() == approx(1.0)
    rhos = [
        typed_rho(j, r, i) for j, r, i in zip(jobs, result.fractions, result.isolated, strict=True)
    ]
    assert rhos[0] == pytest.approx(rhos[1], rel=1e-6) and rhos[0] < 14.0
    assert result.level == pytest.approx(_bisection(jobs, [1.0, 1.0]), rel=1e-6)


def test_work_done_lowers_the_denominator_and_raises_the_share() -> None:
    # Two alike jobs, same wait and work left; one has done 2,000 s of isolated work, the
    # other none. rho_j = (e + R / u) / (c_j + R): the one with c = 0 has the smaller
    # denominator, so it needs more to reach the same rho, and gets it.
    jobs = [
        TypedJobLoad(3000.0, 1000.0, 1, (2.0, 1.0), isolated_done=2000.0),
        TypedJobLoad(3000.0, 1000.0, 1, (2.0, 1.0), isolated_done=0.0),
    ]
    result = solve_typed(jobs, [1.0, 1.0])
    x = np.array(result.fractions)
    assert (x[1] * [2.0, 1.0]).sum() > (x[0] * [2.0, 1.0]).sum() + 0.1


def test_gavels_isolated_share_caps_each_job_at_its_gang_without_refilling() -> None:
    # Gavel's IsolatedPolicy: C / m GPUs each (16 / 4 = 4), a fraction min(1, 4 / g) spread
    # 1/4 : 3/4 over the types; the 1-GPU job leaves 3 of its 4 GPUs unused (no water-filling).
    iso = gavel_isolated_typed([1, 8, 8, 8], [4.0, 12.0])
    assert iso[0].tolist() == [approx(0.25), approx(0.75)]
    assert iso[1].tolist() == [approx(0.5 / 4), approx(0.5 * 3 / 4)]


def test_isolated_split_is_an_equal_share_of_every_type() -> None:
    # 4 jobs on 4 V100s + 12 K80s: C / N = 4 GPUs each. The 1-GPU job is capped at its
    # gang (fraction 1); the others share 15 GPUs: L = 5 (capped 8-gang: 5/8). Each
    # fraction is spread 1/4 : 3/4 over the types.
    iso = isolated_typed([1, 8, 8, 8], [4.0, 12.0])
    assert iso[0].tolist() == [approx(0.25), approx(0.75)]
    assert iso[1].tolist() == [approx(5 / 8 / 4), approx(5 / 8 * 3 / 4)]
    assert (iso * np.array([[1], [8], [8], [8]])).sum(axis=0).tolist() == [
        approx(4.0),
        approx(12.0),
    ]


def test_one_type_is_the_one_type_program() -> None:
    # m = 2 on 4 GPUs: isolated shares 1 and 1/2. Job 0: R = 50 s, D = 50, rho at x = 1 is
    # (5 + 50) / 50 = 1.1 > job 1's 0.5 at x = 1: job 0 gets 1, job 1 the 3 GPUs left.
    jobs = [TypedJobLoad(5.0, 100.0, 1, (2.0,)), TypedJobLoad(0.0, 10.0, 4, (0.5,))]
    result = solve_typed(jobs, [4.0])
    assert result.fractions == ((approx(1.0),), (approx(0.75),))
    assert result.level == approx(1.1)


def test_a_type_a_gang_cannot_use_gets_no_time() -> None:
    # The 8-gang fits only the 8-GPU type (speed 0 on the 4-GPU one).
    jobs = [TypedJobLoad(0.0, 100.0, 8, (0.0, 1.0)), TypedJobLoad(0.0, 100.0, 1, (2.0, 1.0))]
    result = solve_typed(jobs, [4.0, 8.0])
    assert result.fractions[0][0] == 0.0
    _check_feasible(jobs, [4.0, 8.0], np.array(result.fractions))


# -- the allocation program against a bisection and a grid -------------------------------------


def _bisection(jobs: list[TypedJobLoad], caps: list[float]) -> float:
    """min-max rho by bisection on z, one feasibility LP per step: an independent check."""
    n, k = len(jobs), len(caps)
    iso = gavel_isolated_typed([j.gang for j in jobs], caps)
    v = np.array([j.speeds for j in jobs])
    alone = (iso * v).sum(axis=1)
    e = np.array([j.elapsed for j in jobs])
    r = np.array([j.remaining for j in jobs])
    denominator = np.array([j.isolated_done for j in jobs]) + r / alone

    def feasible(z: float) -> bool:
        slack = z * denominator - e
        if (slack <= 0).any():
            return False
        need = r / slack  # s_j >= need_j
        a_ub = []
        b_ub = []
        for j in range(n):
            row = np.zeros(n * k)
            row[j * k : (j + 1) * k] = -v[j]
            a_ub.append(row)
            b_ub.append(-need[j])
            row = np.zeros(n * k)
            row[j * k : (j + 1) * k] = 1.0
            a_ub.append(row)
            b_ub.append(1.0)
        for t in range(k):
            row = np.zeros(n * k)
            row[t::k] = [j.gang for j in jobs]
            a_ub.append(row)
            b_ub.append(caps[t])
        lp = linprog(np.zeros(n * k), A_ub=np.array(a_ub), b_ub=b_ub, bounds=(0, 1), method="highs")
        return bool(lp.status == 0)

    lo, hi = float(np.max(e / denominator)), _isolated_level(jobs, caps) * (1 + 1e-9)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def _isolated_level(jobs: list[TypedJobLoad], caps: list[float]) -> float:
    """The worst rho at Gavel's isolated split (every ``u_j = 1``)."""
    iso = gavel_isolated_typed([j.gang for j in jobs], caps)
    alone = (iso * np.array([j.speeds for j in jobs])).sum(axis=1)
    return max(
        (j.elapsed + j.remaining / s) / (j.isolated_done + j.remaining / s)
        for j, s in zip(jobs, alone, strict=True)
    )


def _check_feasible(jobs: list[TypedJobLoad], caps: list[float], x: np.ndarray) -> None:
    assert (x >= 0).all() and (x <= 1).all()
    assert (x.sum(axis=1) <= 1 + 1e-8).all()
    gangs = np.array([j.gang for j in jobs], dtype=float)
    assert ((gangs[:, None] * x).sum(axis=0) <= np.array(caps) + 1e-7).all()


_JOB = st.tuples(
    st.sampled_from([0.0, 100.0, 5000.0]),
    st.sampled_from([50.0, 1000.0, 20000.0]),
    st.integers(1, 4),
    st.lists(st.sampled_from([0.5, 1.0, 1.2, 3.0, 4.3]), min_size=3, max_size=3),
)


@settings(max_examples=25, deadline=None)
@given(st.lists(_JOB, min_size=1, max_size=5), st.integers(2, 3), st.integers(0, 10_000))
def test_the_program_matches_a_bisection(rows, types: int, draw: int) -> None:
    rng = np.random.default_rng(draw)
    caps = [float(c) for c in rng.integers(1, 6, size=types)]
    if max(caps) < 4:
        caps[0] = 4.0  # every gang fits some type
    jobs = [
        TypedJobLoad(
            e, r, g, tuple(s if g <= c else 0.0 for s, c in zip(speeds[:types], caps, strict=True))
        )
        for e, r, g, speeds in rows
    ]
    result = solve_typed(jobs, caps)
    x = np.array(result.fractions)
    _check_feasible(jobs, caps, x)
    rhos = [
        typed_rho(j, r, i) for j, r, i in zip(jobs, result.fractions, result.isolated, strict=True)
    ]
    assert max(rhos) == pytest.approx(result.level, rel=1e-6)
    assert result.level <= _isolated_level(jobs, caps) * (1 + 1e-6)  # never worse than isolated
    assert result.level == pytest.approx(_bisection(jobs, caps), rel=1e-6, abs=1e-7)


@pytest.mark.parametrize(
    ("rows", "caps"),
    [
        ([(0.0, 100.0, 1, (4.0, 1.0)), (0.0, 100.0, 1, (1.2, 1.0))], [1.0, 2.0]),
        ([(3000.0, 100.0, 1, (4.0, 1.0)), (0.0, 5000.0, 1, (1.2, 1.0))], [1.0, 1.0]),
        ([(0.0, 800.0, 2, (6.8, 1.0)), (200.0, 100.0, 1, (4.3, 1.0))], [2.0, 1.0]),
    ],
)
def test_no_point_of_a_fine_grid_beats_the_program(rows, caps: list[float]) -> None:
    # Two jobs, two types: every X on a 1/40 grid (41^4 points), feasible ones only.
    jobs = [TypedJobLoad(*row) for row in rows]
    result = solve_typed(jobs, caps)
    grid = np.linspace(0.0, 1.0, 41)
    x = np.array(list(itertools.product(grid, repeat=4)))  # a_v, a_k, b_v, b_k
    gangs = [j.gang for j in jobs]
    ok = (
        (x[:, 0] + x[:, 1] <= 1 + 1e-12)
        & (x[:, 2] + x[:, 3] <= 1 + 1e-12)
        & (gangs[0] * x[:, 0] + gangs[1] * x[:, 2] <= caps[0] + 1e-12)
        & (gangs[0] * x[:, 1] + gangs[1] * x[:, 3] <= caps[1] + 1e-12)
    )
    x = x[ok]
    worst = np.zeros(len(x))
    for j, job in enumerate(jobs):
        speed = x[:, 2 * j] * job.speeds[0] + x[:, 2 * j + 1] * job.speeds[1]
        alone = float(np.dot(result.isolated[j], job.speeds))
        with np.errstate(divide="ignore"):
            rho = (job.elapsed + job.remaining / speed) / (
                job.isolated_done + job.remaining / alone
            )
        worst = np.maximum(worst, rho)
    best = float(worst.min())
    assert result.level <= best + 1e-9  # the grid never beats it
    assert best <= result.level * 1.05  # and the grid gets close to it


# -- the mechanism -----------------------------------------------------------------------------


def _jobs(gangs: list[int]) -> list[JobState]:
    spec = AppSpec("a", 0.0, "toy", tuple(JobSpec(f"j{k}", g, 100.0) for k, g in enumerate(gangs)))
    return AppState(spec, TOY, 1.0).jobs


def test_type_order_is_gavels_fastest_first() -> None:
    assert type_order(("k80", "v100")) == ["v100", "k80"]
    assert type_order(("k80", "a100", "p100")) == ["p100", "k80", "a100"]


def test_priorities_are_per_type_and_the_queue_walks_types_in_order() -> None:
    a, b = _jobs([1, 1])
    books = TypedBooks(["v100", "k80"])
    books.add(a)
    books.add(b)
    books.reset(0.0, lambda jobs: {a: {"v100": 0.5, "k80": 0.5}, b: {"v100": 0.5, "k80": 0.5}})
    books.ran(a, "v100", 360.0, live=True)
    books.ran(b, "k80", 360.0, live=True)
    # v100: a 540 of 720 s, b 180: b first; k80: a first. The v100 queue comes first.
    assert books.by_type["v100"].priority(b) == approx(0.5 / (180 / 720))
    assert books.queue(books.types) == [(b, "v100"), (a, "v100"), (a, "k80"), (b, "k80")]
    assert pick_typed(books.queue(books.types), {"v100": 1, "k80": 1}) == {b: "v100", a: "k80"}


def test_pick_passes_over_a_gang_that_does_not_fit_its_type() -> None:
    big, small, other = _jobs([8, 2, 4])
    queue = [(big, "k80"), (small, "k80"), (big, "v100"), (other, "k80"), (other, "v100")]
    # k80 has 4: big does not fit, small takes 2; big fits the v100's 8; other (4) fits
    # neither the k80's 2 left nor the v100's 0.
    assert pick_typed(queue, {"v100": 8, "k80": 4}) == {small: "k80", big: "v100"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
    st.sampled_from(["1x1x8:v100+1x2x4:k80", "1x2x4:v100+1x1x4:k80", "1x1x2:k80+1x1x8:v100"]),
)
def test_pick_and_assign_never_mix_types_nor_exceed_a_type(gangs, rnd, spec: str) -> None:
    cluster = Cluster.from_spec(spec)
    jobs = _jobs(gangs)
    for job in jobs:  # some ran last round somewhere
        if rnd.random() < 0.3:
            start = rnd.randrange(0, cluster.size - job.gang + 1)
            job.gpus = tuple(range(start, start + job.gang))
    queue = [(job, t) for t in cluster.types for job in rnd.sample(jobs, len(jobs))]
    workers = {t: part.count for t, part in cluster.shape.parts}
    chosen = pick_typed(queue, workers)
    taken: set[int] = set()
    for gpu_type in cluster.types:
        mine = [j for j, t in chosen.items() if t == gpu_type]
        assert sum(j.gang for j in mine) <= workers[gpu_type]
        placed = assign(cluster, mine, dict.fromkeys(jobs, 0.5), gpu_type)
        assert set(placed) == set(mine)
        for job, gpus in placed.items():
            assert len(gpus) == job.gang
            assert {cluster.type_of[g] for g in gpus} == {gpu_type}
            assert not taken.intersection(gpus)
            taken.update(gpus)


def test_untyped_assign_refuses_a_typed_cluster() -> None:
    with pytest.raises(ValueError, match="one GPU type at a time"):
        assign(Cluster.from_spec("1x1x1:v100+1x1x1:k80"), [], {})


# -- whole schedules ---------------------------------------------------------------------------


def _typed_run(apps, cluster: str, k80: float) -> SimulationResult:
    wl = replace(workload(apps), notes={"gpu_types": {"toy": {"v100": 1.0, "k80": k80}}})
    return simulate(
        wl, Cluster.from_spec(cluster), make_policy("gavel", PolicyOptions()), batch_window=0.0
    )


def test_two_jobs_take_turns_on_the_v100_by_hand() -> None:
    # One V100 (GPU 0), one K80 (GPU 1); toy model, 1 s per iteration on the V100, 4 s on
    # the K80. A (650 iterations) and B (1000), 1-GPU, both at t = 0: the allocation is
    # 1/2 on each type for both (the isolated split, see above). Every (job, type) starts
    # with 180 s received, 360 per type in all; the V100 queue is walked first.
    # t=0     all priorities 1: A (submitted first) takes the V100, B the K80.
    # t=360   V100: A 540 of 720, B 180: B first; K80: A first. B -> V100, A -> K80.
    #         A did 360 iterations (290 left), B 90 (910 left).
    # t=720   V100: 540 of 1080 each: a tie, submission order: A -> V100, B -> K80.
    #         A did 90 more (200 left), B 360 (550 left).
    # t=920   A ends; the V100 idles until the round's end. B: 90 more (460 left).
    # t=1080  B alone takes the V100 (its queue is walked first) and ends at 1540, kept
    #         across the 1440 round. No reset before 1920 s: the allocation is unchanged.
    result = _typed_run(
        [("A", 0.0, [(1, 650.0)]), ("B", 0.0, [(1, 1000.0)])], "1x1x1:v100+1x1x1:k80", 4.0
    )
    assert_intervals(
        result,
        [
            (0.0, 360.0, "A0", (0,)),
            (0.0, 360.0, "B0", (1,)),
            (360.0, 720.0, "B0", (0,)),
            (360.0, 720.0, "A0", (1,)),
            (720.0, 920.0, "A0", (0,)),
            (720.0, 1080.0, "B0", (1,)),
            (1080.0, 1540.0, "B0", (0,)),
        ],
    )
    assert finishes(result) == {"A": approx(920.0), "B": approx(1540.0)}


def test_one_typed_type_runs_as_the_untyped_cluster() -> None:
    apps = [(f"a{i}", 100.0 * i, [(1 + i % 3, 200.0 + 50 * k) for k in range(2)]) for i in range(6)]
    typed = _typed_run(apps, "1x2x4:v100", 1.0)
    untyped = simulate(
        workload(apps),
        Cluster.from_spec("1x2x4"),
        make_policy("gavel", PolicyOptions()),
        batch_window=0.0,
    )
    key = sorted((i.start, i.end, i.job_id, i.gpus) for i in typed.intervals)
    assert key == sorted((i.start, i.end, i.job_id, i.gpus) for i in untyped.intervals)


def _generated(cluster: Cluster, seed: int):  # type: ignore[no-untyped-def]
    profiles = load_profiles()
    wl = generated_workload("generate:jobs=40,load=1.5,max_trials=6", cluster, profiles, seed)
    return with_gang_mix(wl, seed=seed, max_gang=8)


def test_end_to_end_on_two_types() -> None:
    # --cluster 1x2x8:v100+1x2x8:k80, a generated workload with Philly's gang mix.
    cluster = Cluster.from_spec("1x2x8:v100+1x2x8:k80")
    wl = _generated(cluster, 3)
    runs = [simulate(wl, cluster, make_policy("gavel", PolicyOptions(seed=3))) for _ in range(2)]
    result = runs[0]
    assert all(a.finish is not None for a in result.apps)
    for interval in result.intervals:
        assert len({cluster.type_of[g] for g in interval.gpus}) == 1
    # deterministic
    assert [(i.start, i.end, i.job_id, i.gpus) for i in runs[1].intervals] == [
        (i.start, i.end, i.job_id, i.gpus) for i in result.intervals
    ]
    # GPUs of each type busy at any instant never exceed the type's size
    for gpu_type in cluster.types:
        events = sorted(
            (t, d * len(i.gpus))
            for i in result.intervals
            if cluster.type_of[i.gpus[0]] == gpu_type
            for t, d in ((i.start, 1), (i.end, -1))
        )
        busy = 0
        for _, delta in events:
            busy += delta
            assert busy <= 16


@settings(max_examples=40, deadline=None)
@given(st.lists(_JOB, min_size=1, max_size=8), st.integers(0, 10_000))
# Found in CI: a job on a 0.0019 share, whose rounding to 1e-9 moves its rho by 5e-7.
@pytest.mark.pure_only
@example(
    [
        (0.0, 50.0, 4, [0.5, 0.5, 0.5]),
        (5000.0, 50.0, 2, [4.3, 0.5, 0.5]),
        (5000.0, 50.0, 2, [4.3, 0.5, 0.5]),
    ],
    297,
)
def test_two_types_without_an_lp_reach_the_lp_methods_level(rows, draw: int) -> None:
    # The two-type bisection (an O(n) knapsack per step) against the Dinkelbach-type LPs
    # that more types use: the same level; every job at one common level, or above it at
    # its best speed (the leximin choice).
    rng = np.random.default_rng(draw)
    caps = [float(c) for c in rng.integers(1, 9, size=2)]
    caps[int(rng.integers(0, 2))] = max(caps[0], caps[1], 4.0)
    jobs = [
        TypedJobLoad(e, r, g, tuple(s if g <= c else 0.0 for s, c in zip(v[:2], caps, strict=True)))
        for e, r, g, v in rows
    ]
    fast = solve_typed(jobs, caps)
    with patch("themis.policies._gavel_program._two_types", return_value=None):
        slow = solve_typed(jobs, caps)
    # Both answers are rounded to 1e-9 per share (solver noise must not decide Gavel's
    # ties), which moves a job's rho by up to 1e-9 / its share: the levels agree to that.
    shares = [f for r in (*fast.fractions, *slow.fractions) for f in r if f > 0]
    rounding = 1e-9 / min(shares) if shares else 0.0
    assert fast.level == pytest.approx(slow.level, rel=1e-7 + 2 * rounding)
    _check_feasible(jobs, caps, np.array(fast.fractions))
    rhos = [typed_rho(j, r, i) for j, r, i in zip(jobs, fast.fractions, fast.isolated, strict=True)]
    assert max(rhos) == pytest.approx(fast.level, rel=1e-7)
    common = min(rhos)
    for job, rho, row in zip(jobs, rhos, fast.fractions, strict=True):
        if rho > common * (1 + 1e-6):  # above the common level: the job holds its best
            best = max(job.speeds)
            assert float(np.dot(row, job.speeds)) == pytest.approx(best, rel=1e-6)
