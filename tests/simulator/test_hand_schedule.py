"""Small schedules whose every completion time is derived by hand in the comments.

Unless said otherwise the model is ``toy``: one iteration takes 1 s on one GPU, so a 1-GPU
job of ``w`` iterations runs ``w`` seconds, and a gang of g GPUs spanning machines runs at
``g * cross_machine`` iterations per second.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions, make_policy, policy_names
from themis.reports.metrics import app_rows
from themis.simulator.engine import Interval, SimulationResult, simulate

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def workload(apps: Sequence[tuple[str, float, Sequence[tuple[int, float]]]]) -> Workload:
    """``apps``: (app_id, arrival, [(gang, work), ...]); job ids are app_id + index."""
    specs = tuple(
        AppSpec(
            app_id,
            arrival,
            "toy",
            tuple(JobSpec(f"{app_id}{k}", g, w) for k, (g, w) in enumerate(jobs)),
        )
        for app_id, arrival, jobs in apps
    )
    return Workload(specs, {"toy": TOY}, "hand")


def run(
    apps: Sequence[tuple[str, float, Sequence[tuple[int, float]]]],
    cluster: str,
    policy: str,
    **options: float,
) -> SimulationResult:
    return simulate(
        workload(apps), Cluster.from_spec(cluster), make_policy(policy, PolicyOptions(**options))
    )


def finishes(result: SimulationResult) -> dict[str, float]:
    return {a.app_id: a.finish for a in result.apps}  # type: ignore[misc]


def intervals(result: SimulationResult) -> list[tuple[float, float, str, tuple[int, ...]]]:
    return sorted((i.start, i.end, i.job_id, i.gpus) for i in result.intervals)


def assert_intervals(result: SimulationResult, expected: list[tuple]) -> None:
    got = intervals(result)
    assert [(j, g) for _, _, j, g in got] == [(j, g) for _, _, j, g in sorted(expected)]
    for (s, e, _, _), (s2, e2, _, _) in zip(got, sorted(expected), strict=True):
        assert s == approx(s2)
        assert e == approx(e2)


# a arrives at 0 with three 1-GPU jobs of 20, 20 and 10 s; b arrives at 10 with one of 5 s.
TWO_APPS = [("a", 0.0, [(1, 20.0), (1, 20.0), (1, 10.0)]), ("b", 10.0, [(1, 5.0)])]


def test_fifo_two_apps_one_machine() -> None:
    # 1x1x2: GPUs 0 and 1 in one machine.
    # t=0   a0 -> GPU 0, a1 -> GPU 1 (packed lowest GPU first); a2 waits.
    # t=10  b arrives; nothing free, FIFO never preempts: b0 waits behind a2.
    # t=20  a0, a1 end. a2 (first in line) -> GPU 0, b0 -> GPU 1.
    # t=25  b0 ends: b finishes at 25.   t=30  a2 ends: a finishes at 30.
    r = run(TWO_APPS, "1x1x2", "fifo")
    assert finishes(r) == {"a": approx(30.0), "b": approx(25.0)}
    assert_intervals(
        r,
        [
            (0.0, 20.0, "a0", (0,)),
            (0.0, 20.0, "a1", (1,)),
            (20.0, 30.0, "a2", (0,)),
            (20.0, 25.0, "b0", (1,)),
        ],
    )
    # T_cluster(a) = max(50 GPU-s / 2 GPUs, longest 20) = 25; T_cluster(b) = 5.
    # N_avg(a) = (1*10 + 2*15 + 1*5) / 30 = 1.5; N_avg(b) = 2 over [10, 25].
    a, b = r.apps
    assert (a.t_cluster, b.t_cluster) == (approx(25.0), approx(5.0))
    assert r.n_avg == {"a": approx(1.5), "b": approx(2.0)}
    rows = {row.app_id: row for row in app_rows(r)}
    assert rows["a"].rho == approx(30.0 / (25.0 * 1.5))  # 0.8
    assert rows["b"].rho == approx(15.0 / (5.0 * 2.0))  # 1.5
    for app in r.apps:
        for job in app.jobs:
            assert job.done == job.spec.work
            assert job.attained == approx(job.spec.work)  # 1 GPU at speed 1


def test_max_min_two_apps_one_machine() -> None:
    # t=0   a alone: share min(2, demand 3) = 2. Longest first: a0 -> GPU 0, a1 -> GPU 1.
    # t=10  b arrives: water-fill 2 GPUs over demands (3, 1) -> shares (1, 1). b is below
    #       its share with nothing free: a (2 held > share 1) loses its newest job; a0 and
    #       a1 both started at 0, the first of them (a0, 10 s left) is the victim.
    #       b0 -> GPU 0.
    # t=15  b0 ends (b finishes at 15). a's share is 2 again: a0 (10 left, ties a2 at 10
    #       left, earlier submission first) resumes on GPU 0 -> ends at 25.
    # t=20  a1 ends; a2 -> GPU 1 -> ends at 30. a finishes at 30.
    r = run(TWO_APPS, "1x1x2", "max-min")
    assert finishes(r) == {"a": approx(30.0), "b": approx(15.0)}
    assert_intervals(
        r,
        [
            (0.0, 10.0, "a0", (0,)),
            (10.0, 15.0, "b0", (0,)),
            (15.0, 25.0, "a0", (0,)),
            (0.0, 20.0, "a1", (1,)),
            (20.0, 30.0, "a2", (1,)),
        ],
    )
    # N_avg(a) = (1*10 + 2*5 + 1*15) / 30 = 35/30; N_avg(b) = 2.
    assert r.n_avg == {"a": approx(35.0 / 30.0), "b": approx(2.0)}
    rows = {row.app_id: row for row in app_rows(r)}
    assert rows["b"].rho == approx(5.0 / (5.0 * 2.0))
    assert rows["a"].rho == approx(30.0 / (25.0 * 35.0 / 30.0))
    a0 = r.apps[0].jobs[0]
    assert a0.done == 20.0
    assert a0.attained == approx(20.0)  # preemption kept its progress (10 + 10)


@pytest.mark.parametrize("policy", policy_names())
def test_cross_machine_factor_slows_a_gang_exactly(policy: str) -> None:
    # 1x2x1: two machines of one GPU. A 2-GPU gang of 100 iterations must span both:
    # speed = 2 * cross_machine / 1 s = 1.6 it/s -> 100 / 1.6 = 62.5 s.
    r = run([("a", 3.0, [(2, 100.0)])], "1x2x1", policy)
    assert finishes(r) == {"a": approx(3.0 + 100.0 / (2 * 0.8))}
    assert_intervals(r, [(3.0, 65.5, "a0", (0, 1))])
    # The best a 2-gang can do on this cluster is a rack span: best placed, and
    # T_cluster already pays the factor, so a lone app has rho exactly 1.
    assert r.intervals[0].best_span
    assert r.apps[0].t_cluster == approx(62.5)
    assert app_rows(r)[0].rho == approx(1.0)


@pytest.mark.parametrize("policy", policy_names())
def test_cross_rack_factor_and_one_machine_gang(policy: str) -> None:
    # 2x1x1: the 2-gang spans racks: 2 * 0.4 = 0.8 it/s -> 100 / 0.8 = 125 s.
    r = run([("a", 0.0, [(2, 100.0)])], "2x1x1", policy)
    assert finishes(r) == {"a": approx(125.0)}
    # 1x1x2: same gang inside one machine: 2 it/s -> 50 s.
    r = run([("a", 0.0, [(2, 100.0)])], "1x1x2", policy)
    assert finishes(r) == {"a": approx(50.0)}


def test_fifo_takes_a_cross_machine_placement_when_that_is_all_there_is() -> None:
    # 1x2x2: machine 0 = GPUs 0, 1; machine 1 = GPUs 2, 3.
    # t=0  a: x (100 s) -> GPU 0 (tie: lower machine), y (10 s) -> GPU 1 (best fit: the
    #      machine with 1 free), z (100 s) -> GPU 2. b's 2-gang does not fit GPU 3 alone.
    # t=10 y ends: free {1, 3} on two machines; b0 -> (1, 3) at 2 * 0.8 = 1.6 it/s:
    #      40 iterations take 25 s -> b finishes at 35, on a span worse than its best.
    # t=100 x and z end: a finishes at 100.
    r = run(
        [("a", 0.0, [(1, 100.0), (1, 10.0), (1, 100.0)]), ("b", 0.0, [(2, 40.0)])], "1x2x2", "fifo"
    )
    assert finishes(r) == {"a": approx(100.0), "b": approx(35.0)}
    assert_intervals(
        r,
        [
            (0.0, 100.0, "a0", (0,)),
            (0.0, 10.0, "a1", (1,)),
            (0.0, 100.0, "a2", (2,)),
            (10.0, 35.0, "b0", (1, 3)),
        ],
    )
    (b_interval,) = [i for i in r.intervals if i.app_id == "b"]
    assert not b_interval.best_span


def test_themis_lone_app_finishes_at_t_cluster() -> None:
    # 1x1x2, jobs of 30, 10, 20 s. T_cluster = max(60 GPU-s / 2, longest 30) = 30.
    # The app scheduler starts longest first: j0 (30) -> GPU 0, j2 (20) -> GPU 1; at 20 j1
    # (10) takes GPU 1 and ends at 30, with j0. Leases of 7 s end at 7, 14, 21, 27, 28:
    # the lone app wins its own GPUs back each time, so no job is ever restarted.
    r = run([("a", 5.0, [(1, 30.0), (1, 10.0), (1, 20.0)])], "1x1x2", "themis", lease=7.0)
    assert r.apps[0].t_cluster == approx(30.0)
    assert finishes(r) == {"a": approx(35.0)}
    assert_intervals(
        r,
        [(5.0, 35.0, "a0", (0,)), (5.0, 25.0, "a2", (1,)), (25.0, 35.0, "a1", (1,))],
    )
    (row,) = app_rows(r)
    assert row.n_avg == 1.0
    assert row.rho == approx(1.0)
    assert r.rounds >= 5  # the lease renewals did happen


def test_themis_lone_gang_app_on_bigger_cluster() -> None:
    # 2x2x2 (8 GPUs); app: one 4-GPU job of 40 it + two 1-GPU jobs of 5 it, leases 3 s.
    # The 4-gang fits one rack (2 machines) at best: 4 * 0.8 = 3.2 it/s -> 12.5 s.
    # T_cluster = max((40/0.8 + 10) / 6, 12.5) = 12.5; it runs on a rack span at once, so
    # it finishes at exactly T_cluster and rho = 1.
    r = run([("a", 0.0, [(4, 40.0), (1, 5.0), (1, 5.0)])], "2x2x2", "themis", lease=3.0)
    assert r.apps[0].t_cluster == approx(12.5)
    assert finishes(r) == {"a": approx(12.5)}
    assert app_rows(r)[0].rho == approx(1.0)


def _busy_vs_live(result: SimulationResult, gpus: int) -> list[tuple[float, int, int]]:
    """(time, GPUs busy, 1-GPU jobs live) on every elementary segment of the run."""
    times = sorted({t for i in result.intervals for t in (i.start, i.end)})
    out = []
    for lo, hi in zip(times, times[1:], strict=False):
        mid = (lo + hi) / 2
        busy = sum(len(i.gpus) for i in result.intervals if i.start <= mid < i.end)
        live = sum(
            1
            for app in result.apps
            for job in app.jobs
            if app.arrival <= mid and job.finished_at is not None and job.finished_at > mid
        )
        out.append((mid, busy, min(gpus, live)))
    return out


def test_themis_two_apps_work_conserving_and_short_app_first() -> None:
    # 1x1x2, leases of 5 s. a arrives at 0 with two 1-GPU jobs of 100 s; b at 10 with one
    # of 10 s. Total work: 210 GPU-seconds, all of it at speed 1 per GPU.
    # Work conservation: at every instant busy GPUs = min(2, live jobs).
    # b's rho while waiting grows without bound; it must win a GPU at some lease end and
    # finish well before a (finish order b, a).
    # Let T1 <= T2 be a's job ends. If b ends first, both GPUs are busy on [0, T1], one
    # on [T1, T2]: 210 = 2 T1 + (T2 - T1) -> T2 = 210 - T1; each a-job needs 100 s, so
    # T1 >= 100 -> T2 <= 110, and T2 >= T1 -> T2 >= 105.
    r = run(
        [("a", 0.0, [(1, 100.0), (1, 100.0)]), ("b", 10.0, [(1, 10.0)])],
        "1x1x2",
        "themis",
        lease=5.0,
        fairness_knob=0.0,
    )
    f = finishes(r)
    assert f["b"] < f["a"]
    assert 20.0 - 1e-9 <= f["b"] <= 50.0
    assert 105.0 - 1e-9 <= f["a"] <= 110.0 + 1e-9
    gpu_seconds = sum(len(i.gpus) * (i.end - i.start) for i in r.intervals)
    assert gpu_seconds == approx(210.0)
    for mid, busy, want in _busy_vs_live(r, 2):
        assert busy == want, f"at t={mid}: {busy} busy, {want} could run"
    # Preemptions happen only at lease ends (multiples of 5 s here) or job ends.
    ends = {j.finished_at for app in r.apps for j in app.jobs}
    for i in r.intervals:
        assert i.end in ends or i.end % 5.0 == approx(0.0)


@pytest.mark.parametrize("knob", [0.5, 0.8, 0.99])
def test_themis_fair_knob_serves_the_worst_off_app(knob: float) -> None:
    # Same workload as above with f >= 0.5 (the default is 0.8): with 2 wanting apps, only
    # ceil((1 - f) * 2) = 1 is offered, and it must be the worst off. At t=10 b holds nothing
    # (rho unbounded) while a would finish on time with its GPUs (rho ~1): b is offered a
    # GPU, ends by t=20 and finishes first.
    r = run(
        [("a", 0.0, [(1, 100.0), (1, 100.0)]), ("b", 10.0, [(1, 10.0)])],
        "1x1x2",
        "themis",
        lease=5.0,
        fairness_knob=knob,
    )
    f = finishes(r)
    assert f["b"] < f["a"]
    assert f["b"] <= 20.0 + 5.0  # at most one lease of delay


def test_simultaneous_arrivals_fifo_order_and_intervals() -> None:
    # 1x1x2; a and b both arrive at 0 (a first in the workload). a has one 2-gang of 20 it
    # (10 s on the whole machine), b one 1-GPU job of 4 s. FIFO: a0 takes both GPUs; at
    # 10 b0 starts on GPU 0 and ends at 14.
    r = run([("a", 0.0, [(2, 20.0)]), ("b", 0.0, [(1, 4.0)])], "1x1x2", "fifo")
    assert finishes(r) == {"a": approx(10.0), "b": approx(14.0)}
    assert_intervals(r, [(0.0, 10.0, "a0", (0, 1)), (10.0, 14.0, "b0", (0,))])
    # N_avg: a over [0, 10] had 2 apps; b over [0, 14]: (2*10 + 1*4) / 14.
    assert r.n_avg == {"a": approx(2.0), "b": approx(24.0 / 14.0)}


def test_zero_work_app_finishes_at_arrival() -> None:
    r = run([("a", 0.0, [(1, 10.0)]), ("z", 4.0, [(1, 0.0)])], "1x1x1", "themis")
    assert finishes(r) == {"a": approx(10.0), "z": approx(4.0)}
    assert [i.job_id for i in r.intervals] == ["a0"]
    rows = {row.app_id: row for row in app_rows(r)}
    assert rows["z"].rho == 1.0
    assert isinstance(r.intervals[0], Interval)
