"""Gandiva: round-robin time slices when oversubscribed, none otherwise, migration of a spread
gang to a freed machine at a quantum boundary. Schedules derived by hand in the comments
(models in ``hand.py``; no batching window)."""

from __future__ import annotations

import pytest

from themis.model.cluster import Cluster, Span
from themis.policies import PolicyOptions, make_policy
from themis.policies.gandiva import migrate
from themis.simulator.engine import simulate

from .hand import approx, assert_intervals, finishes, hold, make_app, run, view, workload


def test_time_slices_round_robin_in_order_of_waiting() -> None:
    # 1x1x1, quantum 10. a0 (30 s) at 0, b0 (30 s) at 5, c0 (10 s) at 15. The queue is
    # ordered by when a job began waiting: its arrival or the end of its last turn.
    # t=0   a0 runs (turn until 10).
    # t=10  b0 (waiting since 5) runs; a0 waits since 10.
    # t=15  c0 arrives, waits since 15: behind a0.
    # t=20  a0 (since 10) runs; queue: c0 (15), b0 (20).
    # t=30  c0 runs; queue: b0 (20), a0 (30).   t=40  c0 ends; b0 runs.
    # t=50  a0 runs (its third 10 s: done at 60); queue: b0.   t=60  b0 runs, ends at 70.
    r = run(
        [("a", 0.0, [(1, 30.0)]), ("b", 5.0, [(1, 30.0)]), ("c", 15.0, [(1, 10.0)])],
        "1x1x1",
        "gandiva",
        lease=10.0,
    )
    assert finishes(r) == {"a": approx(60.0), "b": approx(70.0), "c": approx(40.0)}
    assert_intervals(
        r,
        [
            (0.0, 10.0, "a0", (0,)),
            (10.0, 20.0, "b0", (0,)),
            (20.0, 30.0, "a0", (0,)),
            (30.0, 40.0, "c0", (0,)),
            (40.0, 50.0, "b0", (0,)),
            (50.0, 60.0, "a0", (0,)),
            (60.0, 70.0, "b0", (0,)),
        ],
    )


def test_no_time_slicing_when_every_job_fits() -> None:
    # 1x1x2, quantum 10: two 35 s jobs on two GPUs. Every boundary (10, 20, 30) renews both
    # turns on the same GPUs: one uninterrupted run each.
    r = run([("a", 0.0, [(1, 35.0), (1, 35.0)])], "1x1x2", "gandiva", lease=10.0)
    assert_intervals(r, [(0.0, 35.0, "a0", (0,)), (0.0, 35.0, "a1", (1,))])
    assert r.rounds >= 4  # the boundaries did happen


def test_migrates_spread_vgg_gang_to_freed_machine_at_boundary() -> None:
    # 1x2x2: machine 0 = GPUs 0, 1; machine 1 = GPUs 2, 3. Quantum 10.
    # t=0  a0 (5 s) -> GPU 0, a1 (100 s) -> GPU 1 (best fit), c0 (8 s) -> GPU 2; 3 is free.
    # t=2  b0, a 2-GPU VGG gang of 25 iterations, arrives: one free GPU, it waits.
    # t=5  a0 ends: b0 -> (0, 3), across machines: 2 * 0.5 = 1 it/s; 5 done by t=10.
    # t=8  c0 ends: GPU 2 frees, machine 1 is whole again; no boundary, nothing moves.
    # t=10 boundary: b0 continues and moves to machine 1, (2, 3), at 2 it/s: its 20 left
    #      take 10 s -> b finishes at 20 (it would have run to 30 where it was).
    #      a1 keeps GPU 1 throughout.
    r = run(
        [
            ("a", 0.0, [(1, 5.0), (1, 100.0)]),
            ("c", 0.0, [(1, 8.0)]),
            ("b", 2.0, [(2, 25.0)], "vgg"),
        ],
        "1x2x2",
        "gandiva",
        lease=10.0,
    )
    assert finishes(r) == {"a": approx(100.0), "b": approx(20.0), "c": approx(8.0)}
    assert_intervals(
        r,
        [
            (0.0, 5.0, "a0", (0,)),
            (0.0, 100.0, "a1", (1,)),
            (0.0, 8.0, "c0", (2,)),
            (5.0, 10.0, "b0", (0, 3)),
            (10.0, 20.0, "b0", (2, 3)),
        ],
    )
    moved = [i for i in r.intervals if i.job_id == "b0"]
    assert [i.best_span for i in sorted(moved, key=lambda i: i.start)] == [False, True]
    assert r.apps[2].jobs[0].done == 25.0  # progress kept across the move


def test_migrate_moves_to_strictly_better_spans_only() -> None:
    # 2x2x2: rack 0 = machines 0 {0, 1}, 1 {2, 3}; rack 1 = machines 2 {4, 5}, 3 {6, 7}.
    c = Cluster.from_spec("2x2x2")
    app = make_app("a", 0.0, [(2, 100.0), (2, 100.0), (2, 100.0), (1, 100.0)])
    rack_wide, cluster_wide, in_machine, single = app.jobs
    hold(rack_wide, (1, 2), 0.0, 10.0)  # machines 0 and 1: a rack span
    hold(cluster_wide, (3, 4), 0.0, 10.0)  # racks 0 and 1
    hold(in_machine, (6, 7), 0.0, 10.0)  # already one machine
    hold(single, (5,), 0.0, 10.0)
    available = {0}
    # Largest gangs first, ties in order. rack_wide: free {0} + its own {1, 2} holds a pair
    # in machine 0, (0, 1): a machine span, moved; free becomes {2}. cluster_wide: {2} +
    # its own {3, 4} holds machine 1's (2, 3): moved; free becomes {4}. in_machine is at
    # its best span already and single is one GPU: neither is considered.
    moved = migrate(c, available, [rack_wide, cluster_wide, in_machine, single])
    assert moved == {rack_wide: (0, 1), cluster_wide: (2, 3)}
    assert available == {4}
    assert all(c.span(g) is Span.MACHINE for g in moved.values())


def test_migrate_keeps_a_gang_when_nothing_better_is_free() -> None:
    # 1x2x2: a gang on (1, 2) spans the two machines. With nothing free it stays. With GPU 0
    # free, {0, 1, 2} holds machine 0's pair (0, 1): it moves there; with GPU 3 free,
    # {1, 2, 3} holds machine 1's pair (2, 3).
    c = Cluster.from_spec("1x2x2")
    app = make_app("a", 0.0, [(2, 100.0)])
    (job,) = app.jobs
    hold(job, (1, 2), 0.0, 10.0)
    assert migrate(c, set(), [job]) == {}
    assert migrate(c, {0}, [job]) == {job: (0, 1)}
    assert migrate(c, {3}, [job]) == {job: (2, 3)}


def test_boundary_round_on_a_hand_built_view_rotates_and_queues() -> None:
    # 1x1x2, quantum 10, t=10: a0 and a1 hold GPUs 0, 1 and their turns end now; b0 has
    # waited since its arrival at 4. Waiting jobs come first, then the jobs whose turns end
    # in the order they run: b0, a0, a1. Two GPUs: b0 and a0 run, a0 on its own GPU 0, b0
    # on a1's GPU 1; a1 waits. Every turn ends at the next boundary, 20.
    c = Cluster.from_spec("1x1x2")
    a = make_app("a", 0.0, [(1, 100.0), (1, 100.0)])
    b = make_app("b", 4.0, [(1, 100.0)])
    hold(a.jobs[0], (0,), 0.0, 10.0)
    hold(a.jobs[1], (1,), 0.0, 10.0)
    policy = make_policy("gandiva", PolicyOptions(gandiva_slice=10.0))
    schedule = policy.schedule(view(c, [a, b], 10.0))
    assert {j.job_id: (s.gpus, s.until) for j, s in schedule.items()} == {
        "a0": ((0,), 20.0),
        "b0": ((1,), 20.0),
    }


def test_quantum_must_be_positive_and_finite() -> None:
    for bad in (0.0, -5.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="'--gandiva-slice': must be a number of seconds > 0"):
            make_policy("gandiva", PolicyOptions(gandiva_slice=bad))


def test_the_time_slice_is_its_own_a_minute_by_default_not_the_lease() -> None:
    # Gandiva switches jobs about every 60 s whatever the lease: a 1-GPU cluster and two
    # 150 s jobs at 0 take turns at 60 and 120 (a0 0-60, b0 60-120, a0 120-180, ...).
    c = Cluster.from_spec("1x1x1")
    policy = make_policy("gandiva", PolicyOptions(lease=600.0))
    assert policy.slice == 60.0  # type: ignore[attr-defined]
    r = simulate(
        workload([("a", 0.0, [(1, 150.0)]), ("b", 0.0, [(1, 150.0)])]),
        c,
        policy,
        batch_window=0.0,
    )
    assert_intervals(
        r,
        [
            (0.0, 60.0, "a0", (0,)),
            (60.0, 120.0, "b0", (0,)),
            (120.0, 180.0, "a0", (0,)),
            (180.0, 240.0, "b0", (0,)),
            (240.0, 270.0, "a0", (0,)),
            (270.0, 300.0, "b0", (0,)),
        ],
    )


def test_a_resume_as_long_as_the_time_slice_is_refused_before_the_run() -> None:
    # With 60 s slices a 120 s resume leaves a time-sliced job no time to run: the bundled
    # trace's simulated clock passed a year before the run was stopped. It is refused up
    # front, naming the option; a resume shorter than the slice runs.
    from themis.errors import ThemisError
    from themis.simulator.engine import Conditions

    w = workload([("a", 0.0, [(1, 600.0)] * 3)])
    cluster = Cluster.from_spec("1x1x2")
    with pytest.raises(ThemisError, match="not shorter than its 60 s time slice") as raised:
        simulate(
            w, cluster, make_policy("gandiva", PolicyOptions()), conditions=Conditions(0.0, 60.0)
        )
    assert raised.value.field == "--restart-cost"
    done = simulate(
        w, cluster, make_policy("gandiva", PolicyOptions()), conditions=Conditions(0.0, 30.0)
    )
    assert len(done.apps) == 1
