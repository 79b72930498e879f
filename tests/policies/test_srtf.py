"""SRTF (shortest remaining time first, per job, preemptive at arrivals and job ends) on
hand-derived schedules. Model ``toy``: 1 s per iteration on one GPU, cross-machine factor
0.8, so a 1-GPU job of ``w`` iterations runs ``w`` seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.simulator.test_hand_schedule import approx, assert_intervals, finishes, workload
from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import SimulationResult, simulate

Apps = Sequence[tuple[str, float, Sequence[tuple[int, float]]]]


def run(apps: Apps, cluster: str) -> SimulationResult:
    policy = make_policy("srtf", PolicyOptions())
    return simulate(workload(apps), Cluster.from_spec(cluster), policy)


def test_shortest_runs_first() -> None:
    # 1x1x1, three jobs at 0 of 5, 3 and 8 s: 3 (0-3), 5 (3-8), 8 (8-16).
    r = run([("a", 0.0, [(1, 5.0), (1, 3.0), (1, 8.0)])], "1x1x1")
    assert finishes(r) == {"a": approx(16.0)}
    assert_intervals(r, [(0.0, 3.0, "a1", (0,)), (3.0, 8.0, "a0", (0,)), (8.0, 16.0, "a2", (0,))])


def test_a_shorter_arrival_preempts_a_longer_one_does_not() -> None:
    # 1x1x1. a0 (10 s) from 0; b0 (3 s) arrives at 2, when a0 has 8 s left: preempted.
    # c0 (20 s) arrives at 3: longer than b0's 2 s left, it waits. At 5 b0 ends; a0 (8 s
    # left) goes before c0: 5-13, then c0 13-33.
    r = run([("a", 0.0, [(1, 10.0)]), ("b", 2.0, [(1, 3.0)]), ("c", 3.0, [(1, 20.0)])], "1x1x1")
    assert finishes(r) == {"a": approx(13.0), "b": approx(5.0), "c": approx(33.0)}
    assert_intervals(
        r,
        [
            (0.0, 2.0, "a0", (0,)),
            (2.0, 5.0, "b0", (0,)),
            (5.0, 13.0, "a0", (0,)),
            (13.0, 33.0, "c0", (0,)),
        ],
    )


def test_remaining_time_is_at_the_gangs_best_span() -> None:
    # 1x2x1 (two machines of one GPU): a 2-gang is at best spread over the rack, at
    # 2 * 0.8 = 1.6 it/s: x (30 it) needs 18.75 s; y (1 GPU, 17 it) needs 17 s and goes
    # first (by iterations, GPU-time, or an ideal 2 it/s, x would). x cannot use the GPU
    # left and waits; it runs 17-35.75.
    r = run([("a", 0.0, [(2, 30.0), (1, 17.0)])], "1x2x1")
    assert_intervals(r, [(0.0, 17.0, "a1", (0,)), (17.0, 35.75, "a0", (0, 1))])


def test_a_shorter_gang_that_cannot_fit_does_not_block_a_longer_job() -> None:
    # 1x1x3, all at 0: x (1 GPU, 5 s), y (3-gang, 30 it: 10 s), z (1 GPU, 50 s). x takes
    # GPU 0; y is next but only 2 GPUs are left: passed over, and z runs on GPU 1 (one GPU
    # idles: only y's gang is left, and it does not fit). At 5 x ends: y (10 s) is now
    # shorter than z (45 s left) and fits by preempting z: y runs 5-15, z 15-60.
    r = run([("a", 0.0, [(1, 5.0), (3, 30.0), (1, 50.0)])], "1x1x3")
    assert finishes(r) == {"a": approx(60.0)}
    assert_intervals(
        r,
        [
            (0.0, 5.0, "a0", (0,)),
            (0.0, 5.0, "a2", (1,)),
            (5.0, 15.0, "a1", (0, 1, 2)),
            (15.0, 60.0, "a2", (0,)),
        ],
    )
