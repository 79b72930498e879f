"""gavel and gavel-mmf, Gavel as it ships: the max-min program (isolated 1/N shares, which
is also the optimum of the finish-time-fairness formula before Gavel fixed it), Gavel's
finish-time fairness (tests/policies/test_gavel_ftf.py has its program), the round
mechanism (priorities, greedy pick, strided workers), and whole schedules derived by hand,
with GPUs idle mid-round and a late job waiting for the next solve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from tests.policies.hand import TOY, approx, assert_intervals, finishes, run, workload
from tests.simulator.test_invariants import scenarios
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, JobSpec
from themis.policies import Policy, PolicyOptions, make_policy
from themis.policies._ftf_program import AppLoad, water_level
from themis.policies._gavel_mechanism import ROUND_SECONDS, GavelBooks, assign, pick
from themis.policies._gavel_program import JobLoad, isolated_fractions, rho, solve
from themis.policies.gavel import GavelPolicy
from themis.simulator.engine import Conditions, SimulationResult, simulate
from themis.workload.generator import GeneratorSpec, generate

# -- the allocation program ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gangs", "capacity", "fractions"),
    [
        # N = 4 jobs on 4 GPUs: C / N = 1 GPU each on average, whatever the gang.
        ([1, 1, 2, 4], 4.0, [1.0, 1.0, 0.5, 0.25]),
        # C / N = 2 > the smallest gang: water-filling, min(1, L) + min(4, L) = 4 -> L = 3.
        ([1, 4], 4.0, [1.0, 0.75]),
        ([1, 1, 1], 2.0, [2 / 3, 2 / 3, 2 / 3]),
        ([2, 2], 8.0, [1.0, 1.0]),  # everything fits: every job all the time
        ([], 4.0, []),
    ],
)
def test_isolated_fractions_are_an_equal_share_of_gpus(
    gangs: list[int], capacity: float, fractions: list[float]
) -> None:
    assert list(isolated_fractions(gangs, capacity)) == [approx(f) for f in fractions]


def test_min_max_ignores_wait_and_remaining_work_on_one_gpu_type() -> None:
    # Two 1-GPU jobs on one GPU: one waited 1000 s with 10 s left, the other just came with
    # 5000 s left. Gavel's denominator is each one's time on its own 1/2 share, so rho_j <= 1
    # needs x_j >= 1/2 for both: the only optimum is (1/2, 1/2), with rho = 1 for both.
    jobs = [JobLoad(1000.0, 10.0, 1), JobLoad(0.0, 5000.0, 1)]
    result = solve(jobs, 1.0)
    assert result.fractions == (approx(0.5), approx(0.5))
    assert result.level == approx(1.0)
    assert rho(jobs[0], 0.5, 0.5) == approx((1000 + 20) / (1000 + 20))
    # Any other split makes one of them worse than 1: (0.6, 0.4) gives the second
    # (5000 / 0.4) / (5000 / 0.5) = 1.25.
    assert rho(jobs[1], 0.4, 0.5) == approx(1.25)


def test_min_max_with_a_large_gang_takes_the_water_filling_share() -> None:
    # 4 GPUs, a 1-GPU job and a 4-GPU job: isolated shares 1 and 3 GPUs (fractions 1, 3/4);
    # the program returns exactly those, whatever their work.
    result = solve([JobLoad(50.0, 100.0, 1), JobLoad(0.0, 7.0, 4)], 4.0)
    assert result.fractions == (approx(1.0), approx(0.75))
    assert result.isolated == (approx(1.0), approx(0.75))


def test_everything_fits_means_every_job_all_the_time() -> None:
    result = solve([JobLoad(0.0, 10.0, 2), JobLoad(3.0, 1.0, 1)], 8.0)
    assert result.fractions == (1.0, 1.0)
    assert result.level is None


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1e4), st.floats(1.0, 1e4), st.integers(1, 4)),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 8),
    st.lists(st.floats(0.01, 1.0), min_size=8, max_size=8),
)
def test_the_program_is_feasible_and_no_split_beats_it(
    rows: list[tuple[float, float, int]], capacity: int, weights: list[float]
) -> None:
    jobs = [JobLoad(e, r, g) for e, r, g in rows if g <= capacity] or [JobLoad(0.0, 1.0, 1)]
    result = solve(jobs, float(capacity))
    fractions = result.fractions
    assert all(0.0 <= x <= 1.0 for x in fractions)
    assert sum(j.gang * x for j, x in zip(jobs, fractions, strict=True)) <= capacity + 1e-9
    best = max(rho(j, x, i) for j, x, i in zip(jobs, fractions, result.isolated, strict=True))
    assert best == approx(1.0)  # the isolated split is feasible and gives everyone 1
    # Any other feasible split (random weights, scaled into the cluster) is no better.
    raw = [min(1.0, w) for w in weights[: len(jobs)]]
    used = sum(j.gang * x for j, x in zip(jobs, raw, strict=True))
    scale = min(1.0, capacity / used)
    other = max(rho(j, x * scale, i) for j, x, i in zip(jobs, raw, result.isolated, strict=True))
    assert other >= best - 1e-9


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1e4), st.floats(1.0, 1e4), st.integers(1, 4)),
        min_size=2,
        max_size=10,
    ),
    st.integers(1, 8),
)
def test_a_numerical_solve_of_gavels_program_lands_on_the_isolated_split(
    rows: list[tuple[float, float, int]], capacity: int
) -> None:
    # Gavel's program solved numerically, as ftf-oracle's water level (one load per job):
    # its min-max is 1 and its shares are the isolated ones, up to rounding.
    jobs = [JobLoad(e, r, g) for e, r, g in rows if g <= capacity]
    if sum(j.gang for j in jobs) <= capacity:
        return  # everything fits: no level to find
    iso = isolated_fractions([j.gang for j in jobs], float(capacity))
    loads = [
        AppLoad(
            j.elapsed, j.elapsed + j.remaining / x, j.gang * j.remaining, j.remaining, float(j.gang)
        )
        for j, x in zip(jobs, iso, strict=True)
    ]
    level = water_level(loads, float(capacity))
    assert level == pytest.approx(1.0, rel=1e-9)
    shares = [load.need(level) / j.gang for load, j in zip(loads, jobs, strict=True)]
    assert shares == pytest.approx(list(solve(jobs, float(capacity)).fractions), rel=1e-6)


@pytest.mark.parametrize(
    ("gangs", "capacity"), [([1, 1, 2, 4], 4), ([2, 2, 2], 3), ([1, 1, 1, 1, 1], 2), ([4, 8], 8)]
)
def test_isolated_split_is_gavels_max_min_lp_solved_by_highs(gangs: list[int], capacity: int):
    # Gavel's isolated allocation is an LP (MaxMinFairnessPolicy, throughputs 1):
    # maximize z subject to z <= g_j x_j, sum_j g_j x_j <= C, 0 <= x_j <= 1. HiGHS finds its
    # optimum; ours reaches the same minimum, and fills the cluster.
    n = len(gangs)
    cost = np.zeros(n + 1)
    cost[-1] = -1.0  # maximize z
    rows = [[-g if k == j else 0.0 for k in range(n)] + [1.0] for j, g in enumerate(gangs)]
    rows.append([float(g) for g in gangs] + [0.0])
    lp = linprog(
        cost,
        A_ub=np.array(rows),
        b_ub=[0.0] * n + [float(capacity)],
        bounds=[(0.0, 1.0)] * n + [(0.0, None)],
        method="highs",
    )
    assert lp.status == 0
    ours = isolated_fractions(gangs, float(capacity))
    assert min(g * x for g, x in zip(gangs, ours, strict=True)) == approx(-lp.fun)
    assert sum(g * x for g, x in zip(gangs, ours, strict=True)) == approx(float(capacity))


# -- the round mechanism, piece by piece -------------------------------------------------------


def _jobs(cluster: Cluster, gangs: list[int]) -> list[JobState]:
    spec = AppSpec("a", 0.0, "toy", tuple(JobSpec(f"j{k}", g, 100.0) for k, g in enumerate(gangs)))
    return AppState(spec, TOY, 1.0).jobs


def test_pick_passes_over_a_gang_that_does_not_fit() -> None:
    a, b, c, d = _jobs(Cluster.from_spec("1x2x4"), [4, 4, 2, 1])
    # 6 workers: a (2 left), b does not fit, c (0 left), then nothing more.
    assert pick([a, b, c, d], 6) == [a, c]


def test_assign_biggest_gang_first_strided_and_a_small_job_can_lose_its_gpu() -> None:
    cluster = Cluster.from_spec("1x2x4")  # machines {0..3}, {4..7}
    one, four = _jobs(cluster, [1, 4])
    one.gpus = (0,)  # ran last round on GPU 0
    placed = assign(cluster, [one, four], {one: 0.5, four: 0.5})
    # Gavel walks gang sizes biggest first and keeps a job's workers only within its own
    # size's pass: the new 4-gang takes machine 0, GPU 0 included; the 1-gang moves on.
    assert placed == {four: (0, 1, 2, 3), one: (4,)}


def test_assign_keeps_last_round_workers_and_drops_jobs_without_allocation() -> None:
    cluster = Cluster.from_spec("1x2x4")
    four, two, one, late = _jobs(cluster, [4, 2, 1, 1])
    four.gpus = (4, 5, 6, 7)
    placed = assign(cluster, [four, two, one, late], {four: 0.5, two: 0.5, one: 0.5})
    assert placed == {four: (4, 5, 6, 7), two: (0, 1), one: (2,)}  # `late` is dropped


def test_books_priority_is_allocation_over_share_of_time_received() -> None:
    a, b = _jobs(Cluster.from_spec("1x1x2"), [1, 1])
    books = GavelBooks()
    books.add(a)
    books.add(b)
    books.reset(0.0, lambda jobs: {j: 0.5 for j in jobs})
    assert books.worker_time == 2 * ROUND_SECONDS / 2  # both start with half a round
    books.ran(a, 360.0, live=True)
    # a: 540 of 720 s received, b: 180 of 720: priorities 0.5 / 0.75 and 0.5 / 0.25.
    assert books.priority(a) == approx(0.5 / (540 / 720))
    assert books.priority(b) == approx(2.0)
    assert books.order() == [b, a]
    assert not books.reset_due(1000.0)  # nothing changed since the solve
    books.remove(a)
    assert not books.reset_due(1919.0) and books.reset_due(1920.0)
    # At the reset b's deficit grows by what it was owed minus what it got: 0.5 * 1920 - 0.
    books.reset(1920.0, lambda jobs: {j: 1.0 for j in jobs})
    assert books.deficit[b] == approx(960.0)


class _DictBooks:
    """The books as plain dicts, one Python sort per order: what ``GavelBooks`` computes
    with arrays, holes and compaction, written the direct way to check it against."""

    def __init__(self) -> None:
        self.job_time: dict[JobState, float] = {}
        self.deficit: dict[JobState, float] = {}
        self.allocation: dict[JobState, float] = {}
        self.worker_time = 0.0
        self.last_reset: float | None = None

    def add(self, job: JobState) -> None:
        self.job_time[job] = ROUND_SECONDS / 2
        self.deficit[job] = 0.0

    def remove(self, job: JobState) -> None:
        del self.job_time[job]
        del self.deficit[job]

    def ran(self, job: JobState, seconds: float, live: bool) -> None:
        if live:
            self.job_time[job] += seconds
        self.worker_time += seconds

    def reset(self, now: float, allocation: dict[JobState, float]) -> None:
        since = 0.0 if self.last_reset is None else now - self.last_reset
        for job, received in self.job_time.items():
            owed = self.allocation.get(job, 0.0) * since
            self.deficit[job] += owed - (received - ROUND_SECONDS / 2)
            self.job_time[job] = ROUND_SECONDS / 2
        self.worker_time = ROUND_SECONDS / 2 * len(self.job_time)
        self.last_reset = now
        self.allocation = dict(allocation)

    def order(self) -> list[JobState]:
        def key(job: JobState) -> tuple[float, float, float]:
            share = self.allocation.get(job)
            fraction = self.job_time[job] / self.worker_time if self.worker_time else 0.0
            if share is None or share == 0.0:
                priority = 0.0
            elif fraction > 0.0:
                priority = share / fraction
            else:
                priority = share * 1e9
            return (priority, self.deficit[job], self.allocation.get(job, 0.0))

        return sorted(self.job_time, key=key, reverse=True)


#: One step on the books: (what, job number, a number: seconds, a share or a time step).
_Step = tuple[str, int, float]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "ran", "ran", "reset", "fill", "drain"]),
            st.integers(0, 15),  # few jobs stepped on one by one: they come and go
            # Few distinct values: equal priorities, deficits and shares, so ties.
            st.sampled_from([0.0, 0.125, 0.25, 0.5, 1.0, 90.0, 180.0, 360.0]),
        ),
        max_size=300,
    )
)
def test_books_order_matches_a_direct_sort_through_holes_and_compaction(steps: list[_Step]) -> None:
    # 200 jobs, added and removed in bulk (``fill``, ``drain``): holes outnumber the 64 the
    # arrays keep before compacting. Jobs come back after a removal (a trial resumed after
    # a pause) with the allocation the last solve gave them.
    jobs = _jobs(Cluster.from_spec("1x1x2"), [1] * 200)
    books, direct = GavelBooks(), _DictBooks()
    now = 0.0
    for what, k, x in steps:
        job = jobs[k]
        if what == "fill":
            for j in [j for j in jobs[k : k + 150] if j not in books]:
                books.add(j)
                direct.add(j)
        elif what == "drain":
            for j in [j for j in jobs[k : k + 120] if j in books]:
                books.remove(j)
                direct.remove(j)
        elif what == "add" and job not in books:
            books.add(job)
            direct.add(job)
        elif what == "remove" and job in books:
            books.remove(job)
            direct.remove(job)
        elif what == "ran" and job in books:
            books.ran(job, x, live=True)
            direct.ran(job, x, live=True)
        elif what == "reset":
            now += 100.0 * x
            live = list(direct.job_time)
            allocation = {j: x * (1 + (i % 3)) / 4 for i, j in enumerate(live) if i % 5}
            books.reset(now, lambda _, a=allocation: a)
            direct.reset(now, allocation)
        assert books.order() == direct.order()
        assert books.jobs == list(direct.job_time)
        assert books.job_time == direct.job_time
        assert books.deficit == direct.deficit
        assert books.worker_time == direct.worker_time


# -- whole schedules by hand -------------------------------------------------------------------


def test_rounds_by_hand_priorities_preemption_and_idle_gpus_mid_round() -> None:
    # 1x1x2, toy model (1 s per iteration on 1 GPU). All at t=0: A = A0 (100 s), A1 (1000 s);
    # B = B0 (2000 s), B1 (2000 s). Four 1-GPU jobs on 2 GPUs: every allocation is 1/2.
    # Time received starts at 180 s each (half a round), 720 s in all.
    # t=0     priorities equal (0.5 / (180/720) = 2): submission order, A0 -> GPU 0, A1 -> 1.
    # t=100   A0 ends; GPU 0 stays idle until the round ends although B0 and B1 wait.
    # t=360   total 720 + 100 + 360 = 1180; A1 540, B0 = B1 = 180: priorities
    #         A1 0.5/(540/1180) = 1.09, B 0.5/(180/1180) = 3.28: B0 -> 0, B1 -> 1; A1 waits.
    # t=720   A1 = B0 = B1 = 540 of 1900: a tie, broken by submission order: A1, B0. B0 keeps
    #         GPU 0, A1 takes GPU 1 (B1 preempted).
    # t=1080  A1 = B0 = 900 of 2620, B1 540: B1 (2.43) and A1 (1.46) before B0 (1.46, later
    #         submitted): A1 keeps GPU 1, B1 takes GPU 0 (B0 preempted).
    # t=1360  A1 ends (280 s left at 1080): GPU 1 idles until 1440 while B0 waits.
    # t=1440  B0, B1 (900 of 3260 each): B1 keeps GPU 0, B0 takes GPU 1; both have 1280 s
    #         left and finish at 2720. (No new solve before 1920 s: the allocation is stale
    #         but every live job still has one.)
    apps = [("A", 0.0, [(1, 100.0), (1, 1000.0)]), ("B", 0.0, [(1, 2000.0), (1, 2000.0)])]
    expected = [
        (0.0, 100.0, "A0", (0,)),
        (0.0, 360.0, "A1", (1,)),
        (360.0, 1080.0, "B0", (0,)),
        (360.0, 720.0, "B1", (1,)),
        (720.0, 1360.0, "A1", (1,)),
        (1080.0, 2720.0, "B1", (0,)),
        (1440.0, 2720.0, "B0", (1,)),
    ]
    for lease in (60.0, 600.0):  # the round is Gavel's 360 s, whatever --lease says
        result = run(apps, "1x1x2", "gavel", lease)
        assert_intervals(result, expected)
        assert finishes(result) == {"A": approx(1360.0), "B": approx(2720.0)}
    assert not _held(result, 0, 200.0) and not _held(result, 1, 1400.0)  # idle mid-round


def test_a_job_submitted_after_a_solve_waits_for_the_next_solve() -> None:
    # gavel-mmf (max-min: equal shares whatever the wait).
    # 1x1x2: A (t=0) has two long 1-GPU jobs; B (t=100) one 1-GPU job of 500 s.
    # t=0     solve: A0, A1 hold their GPUs all the time (fractions 1).
    # t=360.. B0 is in the books but not in the allocation (priority 0, dropped): Gavel
    #         re-solves only with a reset, at least 1920 s after the last one: at t=2160.
    # t=2160  reset, 2/3 each, counters back to 180 s: all priorities equal, submission
    #         order: A0, A1 run one more round.
    # t=2520  of 540 + 720 = 1260 s, A0 = A1 = 540, B0 = 180: B0 (4.67) first, then A0
    #         (keeps GPU 0); B0 takes GPU 1 and ends at 3020, 2420 s after it arrived.
    result = run(
        [("A", 0.0, [(1, 10000.0), (1, 10000.0)]), ("B", 100.0, [(1, 500.0)])],
        "1x1x2",
        "gavel-mmf",
        600.0,
    )
    first = _first_intervals(result)
    assert first["A0"] == (0.0, approx(2880.0), (0,))
    assert first["A1"] == (0.0, approx(2520.0), (1,))
    assert first["B0"] == (approx(2520.0), approx(3020.0), (1,))
    assert finishes(result)["B"] == approx(3020.0)


def test_finish_time_fairness_gives_the_job_that_waited_its_whole_gang() -> None:
    # gavel, the same jobs. The solve at t=2160 (the first reset after B's arrival):
    # m = 3 jobs on 2 GPUs, isolated share 2/3 each. A0, A1 ran 2160 s at share 1 (the t=0
    # solve: 2 jobs, 2 GPUs): cumulative isolated time c = 2160, 7840 s left, so
    # D = 2160 + 7840 / (2/3) = 13920 and at x = 1 rho = (2160 + 7840) / 13920 = 0.72. B0
    # waited e = 2060 s, c = 0, D = 500 / (2/3) = 750: even at x = 1 its rho is
    # (2060 + 500) / 750 = 3.41, the min-max level. Leximin: B0 gets 1, A0 and A1 share the
    # other GPU, 1/2 each (rho 1.28). After the reset (180 s each, 540 in all) B0's
    # priority is 1 / (1/3) = 3, the As' 1.5: B0 and A0 run (A0 keeps GPU 0, B0 takes GPU 1,
    # A1 stops). At t=2520 A1 (0.5 / (180/1260) = 3.5) and B0 (2.33) beat A0 (1.17): B0 keeps
    # GPU 1 and ends at 2660, 2560 s after it arrived (3020 under max-min).
    result = run(
        [("A", 0.0, [(1, 10000.0), (1, 10000.0)]), ("B", 100.0, [(1, 500.0)])],
        "1x1x2",
        "gavel",
        600.0,
    )
    first = _first_intervals(result)
    assert first["A1"] == (0.0, approx(2160.0), (1,))
    assert first["A0"] == (0.0, approx(2520.0), (0,))
    assert first["B0"] == (approx(2160.0), approx(2660.0), (1,))
    assert finishes(result)["B"] == approx(2660.0)


def test_cluster_resolve_solves_at_the_first_round_after_an_arrival() -> None:
    # gavel with Gavel's cluster-scheduler re-solves: B arrives at t=100, the next round
    # (t=360) solves anew (no 1920 s wait; the counters keep running, no reset yet).
    # A0, A1: c = 360, 9640 s left, D = 360 + 9640 * 1.5 = 14820; B0: e = 260, D = 750.
    # Level L with 500 / (750 L - 260) + 2 * 9640 / (14820 L - 360) = 2: L = 1.15, B0 gets
    # 0.83, each A 0.58. Counters of t=0 (A0 = A1 = 540, B0 = 180 of 1080): B0 0.83 * 6 = 5,
    # A0, A1 0.58 / 0.5 = 1.17: B0 runs from 360 on GPU 1 (A0 keeps GPU 0). At 720, B0
    # (540 of 1800: 2.8) stays ahead of A1 (1.9) and A0; it ends at 860 (3020 with the
    # simulator's 1920 s re-solves under max-min, 2660 under FTF).
    apps = [("A", 0.0, [(1, 10000.0), (1, 10000.0)]), ("B", 100.0, [(1, 500.0)])]
    policy = GavelPolicy(PolicyOptions(lease=600.0), resolve="cluster")
    result = simulate(workload(apps), Cluster.from_spec("1x1x2"), policy, batch_window=0.0)
    first = _first_intervals(result)
    assert first["B0"] == (approx(360.0), approx(860.0), (1,))
    assert finishes(result)["B"] == approx(860.0)
    with pytest.raises(ValueError, match="resolve"):
        GavelPolicy(PolicyOptions(), resolve="sometimes")


def _first_intervals(result: SimulationResult) -> dict[str, tuple]:
    first: dict[str, tuple] = {}
    for interval in sorted(result.intervals, key=lambda i: i.start):
        first.setdefault(interval.job_id, (interval.start, interval.end, interval.gpus))
    return first


@pytest.mark.pure_only  # subclasses the compiled GavelPolicy
@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6).map(lambda k: 150.0 * k),
            st.lists(
                st.tuples(st.integers(1, 4), st.sampled_from([5.0, 100.0, 700.0])),
                min_size=1,
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["1x2x2", "1x1x4", "2x1x2"]),
)
def test_jobs_start_only_when_a_round_starts(rows, cluster: str) -> None:
    # Rounds are synchronous: every start of a job is a round start, every grant ends at
    # its round's start + 360 s, and a new round starts only when the last one's 360 s are
    # over or nothing runs any more (every job of it finished, or the cluster was idle).
    apps = [(f"a{k}", arrival, jobs) for k, (arrival, jobs) in enumerate(rows)]
    policy = _Recording(PolicyOptions())
    result = simulate(workload(apps), Cluster.from_spec(cluster), policy, batch_window=0.0)
    starts = {round(s, 6) for s in policy.round_starts}
    assert {round(i.start, 6) for i in result.intervals} <= starts
    assert all(until == approx(s + ROUND_SECONDS) for s, until in policy.grants)
    for previous, start in zip(policy.round_starts, policy.round_starts[1:], strict=False):
        assert start >= previous + ROUND_SECONDS - 1e-6 or not _spans(result, start)


class _Recording(GavelPolicy):
    """gavel, recording each round's start and each grant's (round start, end)."""

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self.round_starts: list[float] = []
        self.grants: list[tuple[float, float]] = []

    def _new_round(self, view):  # type: ignore[no-untyped-def]
        schedule = super()._new_round(view)
        self.round_starts.append(view.now)
        self.grants.extend((view.now, a.until) for a in schedule.values())
        return schedule


def _held(result: SimulationResult, gpu: int, t: float) -> bool:
    return any(i.start <= t < i.end and gpu in i.gpus for i in result.intervals)


def _spans(result: SimulationResult, t: float) -> bool:
    """Whether a job that ran before ``t`` runs on past it."""
    return any(i.start < t - 1e-9 and i.end > t + 1e-9 for i in result.intervals)


def test_registered_under_its_name() -> None:
    policy: Policy = make_policy("gavel")
    assert isinstance(policy, GavelPolicy)
    assert policy.round_length == ROUND_SECONDS
    assert (policy.program, policy.resolve) == ("ftf", "simulator")
    mmf = make_policy("gavel-mmf")
    assert isinstance(mmf, GavelPolicy) and mmf.program == "mmf"
    cluster = make_policy("gavel", PolicyOptions(gavel_resolve="cluster"))
    assert isinstance(cluster, GavelPolicy) and cluster.resolve == "cluster"


# -- the incremental round -------------------------------------------------------------------


class _FullScan(GavelPolicy):
    """gavel finding the live jobs by a walk of every active app's jobs each round, as if
    the mechanism did not say which apps changed."""

    def _begin(self, view):  # type: ignore[no-untyped-def]
        ran = super()._begin(view)
        self._dirty = None
        return ran


def _three_ways(workload, cluster: Cluster, **kw) -> list[tuple]:  # type: ignore[no-untyped-def]
    """The run asked for changes (the simulator's default for gavel), for the full schedule,
    and with the full walk of the jobs: (rounds, intervals, finishes) of each."""
    fast = GavelPolicy(PolicyOptions())
    assert fast.incremental
    full = GavelPolicy(PolicyOptions())
    full.incremental = False  # type: ignore[misc]
    scan = _FullScan(PolicyOptions())
    return [
        (
            r.rounds,
            [(i.start, i.end, i.job_id, i.gpus, i.best_span) for i in r.intervals],
            [(a.app_id, a.finish) for a in r.apps],
        )
        for r in (simulate(workload, cluster, p, **kw) for p in (fast, full, scan))
    ]


@pytest.mark.pure_only  # subclasses the compiled GavelPolicy
@pytest.mark.parametrize(
    ("spec", "cluster", "conditions"),
    [
        (GeneratorSpec(jobs=300, seed=1, gpus=32, load=1.5), "1x4x8", Conditions()),
        (GeneratorSpec(jobs=300, seed=2, gpus=64, load=1.5), "2x4x8", Conditions(0.3, 30.0)),
        (GeneratorSpec(jobs=200, seed=3, gpus=64), "1x4x8:v100+1x4x8:k80", Conditions()),
        # Online successive halving: trials pause at rungs and resume, leaving and
        # re-entering the books.
        (
            GeneratorSpec(jobs=24, seed=2, load=1.5, gpus=8, max_trials=8, online_halving=1),
            "1x2x4",
            Conditions(0.2, 30.0),
        ),
    ],
)
def test_changes_and_the_walk_of_changed_apps_make_the_full_run(
    spec: GeneratorSpec, cluster: str, conditions: Conditions
) -> None:
    fast, full, scan = _three_ways(
        generate(spec, load_profiles()), Cluster.from_spec(cluster), conditions=conditions
    )
    assert fast[0] > 100
    assert fast == full == scan


@pytest.mark.pure_only  # subclasses the compiled GavelPolicy
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_changes_make_the_full_run_on_small_workloads(scenario: tuple) -> None:
    workload, cluster, _, window = scenario
    fast, full, scan = _three_ways(workload, Cluster.from_spec(cluster), batch_window=window)
    assert fast == full == scan
