"""Tiresias (discretized 2D-LAS) on hand-derived schedules, one rule per test.

The model is ``toy`` (1 s per iteration on one GPU, cross-machine factor 0.8), so a 1-GPU
job of ``w`` iterations runs ``w`` seconds. Thresholds are small (10 GPU-seconds) so that
demotion happens within a few seconds; the batching window is 0 unless a test says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings

from tests.policies.test_policies import make_app, run_job, view
from tests.simulator.test_hand_schedule import (
    approx,
    assert_intervals,
    finishes,
    intervals,
    workload,
)
from tests.simulator.test_invariants import check_result, idle_while_waiting, scenarios
from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.policies.tiresias import PROMOTE_KNOB, THRESHOLDS, TiresiasPolicy
from themis.simulator.engine import SimulationResult, simulate

Apps = Sequence[tuple[str, float, Sequence[tuple[int, float]]]]


def run(
    apps: Apps,
    cluster: str,
    thresholds: Sequence[float] = (10.0,),
    knob: float = math.inf,
    window: float = 0.0,
    lease: float = 600.0,
) -> SimulationResult:
    policy = TiresiasPolicy(PolicyOptions(lease=lease), thresholds=thresholds, promote_knob=knob)
    return simulate(workload(apps), Cluster.from_spec(cluster), policy, batch_window=window)


def test_registered_with_the_documented_defaults() -> None:
    policy = make_policy("tiresias")
    assert isinstance(policy, TiresiasPolicy)
    # the authors' default run (dlas-gpu): 3 queues at 3,250 and 7,200 GPU-s, no promotion
    assert policy.thresholds == THRESHOLDS == (3250.0, 7200.0)
    assert policy.promote_knob == PROMOTE_KNOB == math.inf


def test_settings_come_from_the_options() -> None:
    options = PolicyOptions(tiresias_thresholds=(3600.0,), tiresias_promote_knob=8.0)
    policy = make_policy("tiresias", options)
    assert isinstance(policy, TiresiasPolicy)
    assert (policy.thresholds, policy.promote_knob) == ((3600.0,), 8.0)


def test_preempts_the_tail_of_the_lowest_queue_first() -> None:
    # 1x1x2. a0 starts at 0, b0 at 5 (both 50 s); both cross 10 GPU-s and run on in the
    # low queue (no one waits), a0 entering it at 10, b0 at 15. At 20 c0 (4 s) arrives in
    # the top queue with no GPU free: b0, the last to enter the low queue, is its tail (in
    # the authors' simulator a job joins the tail of a queue on entering it) and is
    # preempted although a0 has less attained service. c0 runs 20-24 on b0's GPU 1; b0
    # resumes at 24 with 35 s left -> 59.
    r = run([("a", 0.0, [(1, 50.0)]), ("b", 5.0, [(1, 50.0)]), ("c", 20.0, [(1, 4.0)])], "1x1x2")
    assert finishes(r) == {"a": approx(50.0), "b": approx(59.0), "c": approx(24.0)}
    assert_intervals(
        r,
        [
            (0.0, 50.0, "a0", (0,)),
            (5.0, 20.0, "b0", (1,)),
            (20.0, 24.0, "c0", (1,)),
            (24.0, 59.0, "b0", (1,)),
        ],
    )


def test_of_two_jobs_in_the_lowest_queue_the_one_started_last_is_preempted() -> None:
    # 1x1x2, thresholds 10. a0 and b0 (60 s) start at 0 and cross into the low queue at
    # 10. c0 (5 s) arrives at 12 and preempts b0 (a tie in entry and start: the later
    # submission is the tail); b0 resumes at 17. At 30 d0 (5 s) arrives: now b0, which
    # started last (17), is the tail, not a0, although b0 has less service.
    apps = [
        ("a", 0.0, [(1, 60.0)]),
        ("b", 0.0, [(1, 60.0)]),
        ("c", 12.0, [(1, 5.0)]),
        ("d", 30.0, [(1, 5.0)]),
    ]
    r = run(apps, "1x1x2")
    assert [(s, e) for s, e, j, _ in intervals(r) if j == "b0"] == [
        (0.0, 12.0),
        (17.0, 30.0),
        (35.0, 70.0),
    ]
    assert finishes(r)["a"] == approx(60.0)


def test_a_job_of_the_same_queue_waits_until_the_runner_is_demoted() -> None:
    # 1x1x1. a0 (30 s) runs from 0; b0 (5 s) arrives at 4 into the same top queue: FIFO
    # inside a queue, no preemption. At 10 a0 has 10 GPU-s: demoted, and b0 (top queue)
    # preempts it: b0 runs 10-15, a0 resumes 15-35.
    r = run([("a", 0.0, [(1, 30.0)]), ("b", 4.0, [(1, 5.0)])], "1x1x1")
    assert finishes(r) == {"a": approx(35.0), "b": approx(15.0)}
    assert_intervals(
        r, [(0.0, 10.0, "a0", (0,)), (10.0, 15.0, "b0", (0,)), (15.0, 35.0, "a0", (0,))]
    )


def test_a_crossing_due_within_the_batching_window_is_handled_at_once() -> None:
    # Same workload with a 30 s batching window: at 4, a0's crossing (due at 10) falls in
    # the window, so a0 counts as demoted already and b0 preempts it at once.
    r = run([("a", 0.0, [(1, 30.0)]), ("b", 4.0, [(1, 5.0)])], "1x1x1", window=30.0)
    assert_intervals(r, [(0.0, 4.0, "a0", (0,)), (4.0, 9.0, "b0", (0,)), (9.0, 35.0, "a0", (0,))])


def test_starving_job_is_promoted_back_to_the_top_queue() -> None:
    # 1x1x1, PROMOTEKNOB 1, one new 8 s job arriving at 15, 22, 29 and 35 (b, c, d, e).
    # a0 (100 s) runs 0-15 (demoted at 10); b0 preempts it at 15. a0 has run 15 s since it
    # entered the top queue: it is promoted once it has waited 15 s more, at 30, and joins
    # the top queue behind d0 (entered at 29) but before e0 (35). c0 (23-31) and d0
    # (31-39) are not preempted (same queue); a0 runs 39-49, is demoted again and e0
    # preempts it; a0 runs its last 75 s from 57.
    apps = [("a", 0.0, [(1, 100.0)])] + [
        (name, at, [(1, 8.0)]) for name, at in (("b", 15.0), ("c", 22.0), ("d", 29.0), ("e", 35.0))
    ]
    r = run(apps, "1x1x1", knob=1.0)
    assert_intervals(
        r,
        [
            (0.0, 15.0, "a0", (0,)),
            (15.0, 23.0, "b0", (0,)),
            (23.0, 31.0, "c0", (0,)),
            (31.0, 39.0, "d0", (0,)),
            (39.0, 49.0, "a0", (0,)),
            (49.0, 57.0, "e0", (0,)),
            (57.0, 132.0, "a0", (0,)),
        ],
    )
    # Without promotion a0 waits until every newer job is done.
    r = run(apps, "1x1x1", knob=math.inf)
    assert [(s, e) for s, e, j, _ in intervals(r) if j == "a0"] == [(0.0, 15.0), (47.0, 132.0)]


def test_a_job_entering_a_queue_stands_behind_the_jobs_waiting_there() -> None:
    # 1x1x1. a0 (30 s) runs from 0; b0 (30 s) arrives at 2 and waits in the same top
    # queue. At 10 a0 enters the low queue and b0 preempts it: b0 runs 10-20. At 20 b0
    # enters the low queue too, at its tail, behind a0 which waits there: a0 preempts it
    # (in the authors' simulator a job entering a queue joins the end of its list, after
    # the waiting jobs) and runs 20-40; b0 runs last, 40-60. A job that entered earlier,
    # at an earlier round, is never preempted by a job of its own queue.
    r = run([("a", 0.0, [(1, 30.0)]), ("b", 2.0, [(1, 30.0)])], "1x1x1")
    assert_intervals(
        r,
        [
            (0.0, 10.0, "a0", (0,)),
            (10.0, 20.0, "b0", (0,)),
            (20.0, 40.0, "a0", (0,)),
            (40.0, 60.0, "b0", (0,)),
        ],
    )


def test_a_preempted_job_waits_ahead_of_those_already_waiting_in_its_queue() -> None:
    # 1x1x3: c0 (1 GPU, 30 s) starts at 9 on GPU 0; a0 (2 GPUs, 15 s) at 12 on 1, 2 and
    # enters the low queue at 17 (10 GPU-s). At 19 c0 enters it too, and b0 (2 GPUs,
    # 2.5 s) arrives: of the low queue's running jobs, the tail (c0, just entered) then
    # a0 are chosen, and c0 spared: a0 stops after 7 s. At 20 d0 (1 GPU, 20 s) arrives
    # and preempts c0. At 21.5 b0 ends: c0, preempted last, waits ahead of a0 (the
    # authors' lists move each round's preempted jobs ahead of the jobs already waiting)
    # and runs 21.5-40.5 on GPU 1; a0 needs two GPUs and waits. At 30 d0 enters the low
    # queue, behind a0: a0 preempts it and runs its last 8 s on 0, 2; d0 runs 38-48.
    # (First come first served by queue entry would run a0 at 21.5, before c0.)
    apps = [
        ("c", 9.0, [(1, 30.0)]),
        ("a", 12.0, [(2, 30.0)]),
        ("b", 19.0, [(2, 5.0)]),
        ("d", 20.0, [(1, 20.0)]),
    ]
    r = run(apps, "1x1x3")
    assert_intervals(
        r,
        [
            (9.0, 20.0, "c0", (0,)),
            (12.0, 19.0, "a0", (1, 2)),
            (19.0, 21.5, "b0", (1, 2)),
            (20.0, 30.0, "d0", (0,)),
            (21.5, 40.5, "c0", (1,)),
            (30.0, 38.0, "a0", (0, 2)),
            (38.0, 48.0, "d0", (0,)),
        ],
    )


def test_after_a_promotion_waiting_counts_only_once_the_job_has_run_again() -> None:
    # 1x1x1, thresholds 50, PROMOTEKNOB 1; b0..f0 are 45 s jobs (never demoted). a0 (200
    # s) runs 0-60 (in the low queue from 50); b0 preempts it at 60 (c0 follows at 105).
    # a0 ran 60 s: promoted at 120, it waits behind c0 and runs again 150-200, when it has
    # 50 GPU-s since its promotion: demoted, and d0 (arrived 190) preempts it. The
    # authors count its waiting from its restart at 150: promoted when 150 + 50 + 50 =
    # 250, after f0 arrived (230), so f0 runs before it. (Counted from the promotion at
    # 120, it would be promoted at 220, before f0 arrived, and f0 would finish at 385.)
    apps = [("a", 0.0, [(1, 200.0)])] + [
        (name, at, [(1, 45.0)])
        for name, at in (("b", 60.0), ("c", 61.0), ("d", 190.0), ("e", 215.0), ("f", 230.0))
    ]
    r = run(apps, "1x1x1", thresholds=(50.0,), knob=1.0)
    assert_intervals(
        r,
        [
            (0.0, 60.0, "a0", (0,)),
            (60.0, 105.0, "b0", (0,)),
            (105.0, 150.0, "c0", (0,)),
            (150.0, 200.0, "a0", (0,)),
            (200.0, 245.0, "d0", (0,)),
            (245.0, 290.0, "e0", (0,)),
            (290.0, 335.0, "f0", (0,)),
            (335.0, 425.0, "a0", (0,)),
        ],
    )


def test_gangs_take_the_lowest_free_gpus_whatever_their_span() -> None:
    # 1x2x2: machine 0 = GPUs 0, 1; machine 1 = GPUs 2, 3. a0 takes GPU 0; b0's 2-gang
    # takes GPUs 1 and 2 (placement-unaware) although 2 and 3 share a machine: it runs at
    # 2 * 0.8 it/s, 40 it in 25 s.
    r = run([("a", 0.0, [(1, 100.0)]), ("b", 0.0, [(2, 40.0)])], "1x2x2")
    assert finishes(r) == {"a": approx(100.0), "b": approx(25.0)}
    assert_intervals(r, [(0.0, 100.0, "a0", (0,)), (0.0, 25.0, "b0", (1, 2))])
    (b,) = [i for i in r.intervals if i.job_id == "b0"]
    assert not b.best_span


def test_victims_not_needed_are_spared() -> None:
    # 1x1x4 at t=100 with thresholds 10: low-queue jobs x (2 GPUs, started at 10, in the
    # low queue from 15) and y (1 GPU, started at 60, in the low queue from 70) run; GPU 3
    # is free. A top-queue 3-gang needs 2 more GPUs: the tail of the low queue, y, is
    # chosen first, then x; with x's 2 GPUs y is not needed after all and keeps running.
    c = Cluster.from_spec("1x1x4")
    low = make_app("low", 0.0, [(2, 500.0), (1, 500.0)], c)
    new = make_app("new", 50.0, [(3, 30.0)], c)
    run_job(low.jobs[0], (0, 1), 10.0, None)  # 180 GPU-s by t=100
    run_job(low.jobs[1], (2,), 60.0, None)  # 40 GPU-s by t=100
    policy = TiresiasPolicy(PolicyOptions(), thresholds=(10.0,), promote_knob=math.inf)
    s = policy.schedule(view(c, [low, new], 100.0))
    assert {j.job_id: a.gpus for j, a in s.items()} == {"low1": (2,), "new0": (0, 1, 3)}


def test_asks_to_be_called_at_the_crossing_that_matters_and_every_quantum() -> None:
    c = Cluster.from_spec("1x1x1")
    a = make_app("a", 0.0, [(1, 100.0)], c)
    b = make_app("b", 2.0, [(1, 100.0)], c)
    run_job(a.jobs[0], (0,), 0.0, None)
    policy = TiresiasPolicy(PolicyOptions(lease=600.0), thresholds=(10.0,))
    # At 4, a0 has 4 GPU-s and b0 waits in the top queue: a0's crossing (at 10) matters.
    s = policy.schedule(view(c, [a, b], 4.0))
    assert {j.job_id: (asg.gpus, asg.until) for j, asg in s.items()} == {"a0": ((0,), 10.0)}
    # Alone, a0's crossing changes nothing: the next call is the quantum's end.
    alone = TiresiasPolicy(PolicyOptions(lease=600.0), thresholds=(10.0,))
    s = alone.schedule(view(c, [a], 4.0))
    assert {j.job_id: asg.until for j, asg in s.items()} == {"a0": 600.0}


@pytest.mark.parametrize(
    ("thresholds", "knob"),
    [((10.0, 5.0), 1.0), ((0.0,), 1.0), ((10.0, 10.0), 1.0), ((math.inf,), 1.0), ((10.0,), 0.0)],
)
def test_bad_parameters_are_user_errors(thresholds: tuple[float, ...], knob: float) -> None:
    with pytest.raises(ThemisError):
        TiresiasPolicy(PolicyOptions(), thresholds=thresholds, promote_knob=knob)


def test_one_queue_is_fifo_with_backfill() -> None:
    # No thresholds: K = 1, nothing is ever preempted. 1x1x2: a0 (2-gang) waits for b0's
    # GPU; c0 (1 GPU, after a0 in FIFO order) backfills GPU 1 meanwhile.
    apps = [("b", 0.0, [(1, 10.0)]), ("a", 1.0, [(2, 20.0)]), ("c", 2.0, [(1, 5.0)])]
    r = run(apps, "1x1x2", thresholds=())
    assert_intervals(
        r, [(0.0, 10.0, "b0", (0,)), (2.0, 7.0, "c0", (1,)), (10.0, 20.0, "a0", (0, 1))]
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenario=scenarios())
def test_invariants_with_small_thresholds_and_frequent_promotion(scenario) -> None:
    # The registry-wide invariants use the default 3,250 GPU-s threshold, which the small
    # random jobs rarely reach: here demotion, preemption and promotion happen all the time.
    workload_, cluster, options, window = scenario

    def once() -> SimulationResult:
        policy = TiresiasPolicy(options, thresholds=(20.0, 200.0), promote_knob=0.5)
        return simulate(workload_, Cluster.from_spec(cluster), policy, window)

    result = once()
    check_result(result, "tiresias")
    assert idle_while_waiting(result) == []
    assert once().intervals == result.intervals
