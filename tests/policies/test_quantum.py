"""The quantum grid and round halves shared by Gandiva, Optimus and SLAQ."""

from __future__ import annotations

import pytest

from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.policies._quantum import fill, open_round, place, quantum_end
from themis.simulator.engine import simulate

from .hand import hold, make_app, view, workload


@pytest.mark.parametrize(
    ("now", "window", "quantum", "end"),
    [
        (0.0, 0.0, 10.0, 10.0),
        (5.0, 0.0, 10.0, 10.0),
        (10.0, 0.0, 10.0, 20.0),  # on a boundary: the next one
        (7.0, 5.0, 10.0, 20.0),  # 10 is inside the window: it counts as now
        (569.0, 30.0, 600.0, 600.0),
        (570.0, 30.0, 600.0, 1200.0),
    ],
)
def test_quantum_end_is_the_first_grid_point_beyond_the_window(
    now: float, window: float, quantum: float, end: float
) -> None:
    assert quantum_end(now, window, quantum) == end
    assert end > now + window


def test_fill_passes_over_gangs_that_do_not_fit() -> None:
    app = make_app("a", 0.0, [(4, 1.0), (1, 1.0), (2, 1.0), (1, 1.0)])
    j4, j1, j2, j1b = app.jobs
    assert fill(app.jobs, 3) == [j1, j2]  # 4 cannot fit; 1 + 2 fill all 3
    assert fill(app.jobs, 8) == [j4, j1, j2, j1b]
    assert fill(app.jobs, 0) == []


def test_round_keeps_running_jobs_and_places_largest_gangs_first() -> None:
    # 1x2x2 (machine 0: GPUs 0, 1; machine 1: GPUs 2, 3), t=4, quantum 10. k holds GPU 0
    # until 10: kept. e holds GPU 2 and its grant ends now. Up for grabs: free 1, 3 and
    # e's 2. Choosing e and s2: e keeps GPU 2, s2 gets what is left, (1, 3), across
    # machines. Choosing s1 and s2 instead: s2 is placed first (largest gang) and takes
    # machine 1 whole, (2, 3); s1 gets GPU 1. Every grant made ends at 10.
    c = Cluster.from_spec("1x2x2")
    app = make_app("a", 0.0, [(1, 50.0), (1, 50.0), (1, 50.0), (2, 50.0)])
    k, e, s1, s2 = app.jobs
    hold(k, (0,), 0.0, 10.0)
    hold(e, (2,), 0.0, 4.0)
    rnd = open_round(view(c, [app], 4.0), 10.0)
    assert rnd.keep == [k]
    assert rnd.ending == [e]
    assert sorted(rnd.free) == [1, 3]
    assert rnd.capacity == 3
    assert rnd.boundary
    schedule = place(rnd, [e, s2])
    assert {j.job_id: (a.gpus, a.until) for j, a in schedule.items()} == {
        "a0": ((0,), 10.0),
        "a1": ((2,), 10.0),
        "a3": ((1, 3), 10.0),
    }
    schedule = place(rnd, [s1, s2])
    assert {j.job_id: a.gpus for j, a in schedule.items()} == {
        "a0": (0,),
        "a3": (2, 3),
        "a2": (1,),
    }


@pytest.mark.parametrize("policy", ["gandiva", "optimus", "slaq"])
def test_a_policy_object_reused_for_a_second_run_schedules_it_afresh(policy: str) -> None:
    # The policies keep state between rounds (Gandiva's queue, SLAQ's cached priorities):
    # a second run with the same object must give the schedule a fresh object gives.
    apps = [
        ("a", 0.0, [(1, 30.0), (2, 20.0)]),
        ("b", 5.0, [(1, 12.0), (1, 40.0)]),
        ("c", 7.0, [(2, 9.0)], "vgg"),
    ]
    cluster = Cluster.from_spec("1x2x2")
    options = PolicyOptions(lease=10.0)
    reused = make_policy(policy, options)
    first = simulate(workload(apps), cluster, reused, batch_window=0.0)
    again = simulate(workload(apps), cluster, reused, batch_window=0.0)
    fresh = simulate(workload(apps), cluster, make_policy(policy, options), batch_window=0.0)
    assert again.intervals == fresh.intervals == first.intervals
