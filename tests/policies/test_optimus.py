"""Optimus: each gang goes to the app whose remaining time drops the most per GPU; an app that
cannot finish on what it holds comes first; re-planning at quantum boundaries. Schedules
derived by hand in the comments (toy model: 1 s per iteration; no batching window).

Remaining time with k GPUs (``estimate_time``): max(remaining GPU-seconds / min(k, jobs),
longest remaining job).
"""

from __future__ import annotations

import math

from themis.model.cluster import Cluster, SetShape
from themis.policies import PolicyOptions, make_policy
from themis.policies.optimus import AppPlan, best_shape, priority

from .hand import approx, assert_intervals, finishes, hold, make_app, run, view

NO_BOUNDARY = 1000.0  # a quantum longer than these runs: only arrivals and job ends


def test_freed_gpu_goes_to_the_app_whose_remaining_time_drops_most() -> None:
    # 1x1x3. a: one 30 s job; b: two 100 s jobs; c: three 100 s jobs; all at 0.
    # t=0   Nobody holds anything: shortest remaining time with one gang first.
    #       T_a(1) = 30, T_b(1) = 200, T_c(1) = 300: a0 -> GPU 0, b0 -> 1, c0 -> 2.
    # t=30  a0 ends; GPU 0 is free. b (b0 70 left, b1 100): T(1) = 170, T(2) = 100:
    #       drops 70. c (c0 70 left, c1, c2 100): T(1) = 270, T(2) = 135: drops 135.
    #       c1 -> GPU 0 (b, with less work left, would be SRTF's and max-min's choice).
    # t=100 b0, c0 end. b holds nothing (b1 waits): first. c: T(1) = max(30 + 100, 100) =
    #       130, T(2) = 100: drops 30, still gets the second free GPU. b1 -> 1, c2 -> 2.
    # t=130 c1 ends.   t=200 b1, c2 end.
    r = run(
        [("a", 0.0, [(1, 30.0)]), ("b", 0.0, [(1, 100.0)] * 2), ("c", 0.0, [(1, 100.0)] * 3)],
        "1x1x3",
        "optimus",
        lease=NO_BOUNDARY,
    )
    assert finishes(r) == {"a": approx(30.0), "b": approx(200.0), "c": approx(200.0)}
    assert_intervals(
        r,
        [
            (0.0, 30.0, "a0", (0,)),
            (0.0, 100.0, "b0", (1,)),
            (0.0, 100.0, "c0", (2,)),
            (30.0, 130.0, "c1", (0,)),
            (100.0, 200.0, "b1", (1,)),
            (100.0, 200.0, "c2", (2,)),
        ],
    )


def test_largest_gain_per_gpu_not_an_equal_share() -> None:
    # 1x1x3 at t=0. a: three 60 s jobs, b: two 200 s jobs.
    # First gangs, shortest first: T_a(1) = 180 < T_b(1) = 400: a0, then b0.
    # Third GPU: a drops T(1) - T(2) = 180 - max(90, 60) = 90; b drops 400 - 200 = 200:
    # b1 (max-min would split 2 + 1 the other way).
    # a then runs its jobs one after the other: 0-60, 60-120, 120-180; b ends at 200.
    r = run(
        [("a", 0.0, [(1, 60.0)] * 3), ("b", 0.0, [(1, 200.0)] * 2)],
        "1x1x3",
        "optimus",
        lease=NO_BOUNDARY,
    )
    assert finishes(r) == {"a": approx(180.0), "b": approx(200.0)}
    assert_intervals(
        r,
        [
            (0.0, 60.0, "a0", (0,)),
            (60.0, 120.0, "a1", (0,)),
            (120.0, 180.0, "a2", (0,)),
            (0.0, 200.0, "b0", (1,)),
            (0.0, 200.0, "b1", (2,)),
        ],
    )


def test_newcomer_waits_for_the_boundary_then_gets_its_first_gang() -> None:
    # 1x1x2, quantum 10. a: two 100 s jobs at 0 (both GPUs: a0 -> 0, a1 -> 1).
    # t=5   b (two 100 s jobs) arrives: nothing is free and no turn ends: it waits.
    # t=10  boundary: every grant ends, nobody holds anything. T_a(1) = 90 + 90 = 180,
    #       T_b(1) = 200: a first (a0, a running job, keeps GPU 0), then b: b0 -> GPU 1;
    #       a1 is preempted.
    # t=20, 30, ...  T_a(1) = 190 - t < T_b(1) = 210 - t: the same two jobs go on.
    # t=100 a0 ends (and a boundary): T_a(1) = 90 (a1) < T_b(1) = 10 + 100: a1 -> GPU 0,
    #       b0 goes on on GPU 1.   t=110 b0 ends: b1 -> GPU 1, ends at 210; a1 ends at 190.
    r = run(
        [("a", 0.0, [(1, 100.0)] * 2), ("b", 5.0, [(1, 100.0)] * 2)],
        "1x1x2",
        "optimus",
        lease=10.0,
    )
    assert finishes(r) == {"a": approx(190.0), "b": approx(210.0)}
    assert_intervals(
        r,
        [
            (0.0, 100.0, "a0", (0,)),
            (0.0, 10.0, "a1", (1,)),
            (100.0, 190.0, "a1", (0,)),
            (10.0, 110.0, "b0", (1,)),
            (110.0, 210.0, "b1", (1,)),
        ],
    )


def test_priority_of_an_app_below_its_largest_gang_is_its_remaining_time() -> None:
    # 1x1x4, t=0. An app with a 2-GPU job (50 it) and a 1-GPU job (30 it) holds 1 GPU: it
    # can never finish on that (T = inf), so it ranks in the first tier by its remaining
    # time after the unit. With 3 GPUs: max(80 GPU-seconds / 3, longest: the 2-GPU job
    # 50 / 2 = 25, the 1-GPU job 30) = 30.
    c = Cluster.from_spec("1x1x4")
    app = make_app("a", 0.0, [(2, 50.0), (1, 30.0)])
    plan = AppPlan(app, 0, 1, app.jobs, 0.0)
    assert math.isinf(plan.time(c, 1))
    assert priority(plan, c, 2) == (0, approx(30.0), 0)
    # Holding 3 (enough for every gang): adding a 1-GPU unit -> 4 GPUs, capped by the
    # demand of 3: no gain at all.
    plan.held = 3
    assert priority(plan, c, 1) == (1, approx(0.0), 0)


def test_best_shape_packs_as_tightly_as_the_cluster_allows() -> None:
    c = Cluster.from_spec("2x4x8")  # 8 GPUs a machine, 32 a rack
    assert best_shape(c, 0) == SetShape(0, 0, 0)
    assert best_shape(c, 5) == SetShape(5, 5, 5)
    assert best_shape(c, 20) == SetShape(20, 8, 20)
    assert best_shape(c, 40) == SetShape(40, 8, 32)


def test_between_boundaries_only_free_gpus_are_handed_out() -> None:
    # Hand-built view, 1x1x2, t=3: a0 runs on GPU 0 until the boundary at 10; GPU 1 is free.
    # b (holding nothing) takes GPU 1 with a grant to 10; a0 is untouched.
    c = Cluster.from_spec("1x1x2")
    a = make_app("a", 0.0, [(1, 100.0), (1, 100.0)])
    b = make_app("b", 3.0, [(1, 10.0)])
    hold(a.jobs[0], (0,), 0.0, 10.0)
    policy = make_policy("optimus", PolicyOptions(lease=10.0))
    schedule = policy.schedule(view(c, [a, b], 3.0))
    assert {j.job_id: (s.gpus, s.until) for j, s in schedule.items()} == {
        "a0": ((0,), 10.0),
        "b0": ((1,), 10.0),
    }
