"""LAS (least attained GPU-time first, per job, preemptive every quantum) on hand-derived
schedules. Model ``toy``: 1 s per iteration on one GPU, cross-machine factor 0.8 (0.5 in
the hand-built views of ``test_policies``). The batching window is 0: quanta end exactly
at the multiples of the lease.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.policies.test_policies import make_app, run_job, view
from tests.simulator.test_hand_schedule import approx, assert_intervals, finishes, workload
from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import SimulationResult, simulate

Apps = Sequence[tuple[str, float, Sequence[tuple[int, float]]]]


def run(apps: Apps, cluster: str, lease: float) -> SimulationResult:
    policy = make_policy("las", PolicyOptions(lease=lease))
    return simulate(workload(apps), Cluster.from_spec(cluster), policy, batch_window=0.0)


def test_equal_jobs_take_turns() -> None:
    # 1x1x1, quanta of 5 s, two 20 s jobs arriving together.
    # 0: both 0 GPU-s, a0 first (earlier app in the view). 5: b0 (0) < a0 (5): b0 runs.
    # 10: tie at 5 GPU-s: the running b0 keeps the GPU (a tie is no reason to preempt).
    # 15: a0 (5) < b0 (10). 20: tie at 10, a0 keeps. 25: b0 (10) < a0 (15). 30: tie at 15,
    # b0 keeps and ends at 35 (20 GPU-s); a0 runs its last 5 s, 35-40.
    r = run([("a", 0.0, [(1, 20.0)]), ("b", 0.0, [(1, 20.0)])], "1x1x1", lease=5.0)
    assert finishes(r) == {"a": approx(40.0), "b": approx(35.0)}
    assert_intervals(
        r,
        [
            (0.0, 5.0, "a0", (0,)),
            (5.0, 15.0, "b0", (0,)),
            (15.0, 25.0, "a0", (0,)),
            (25.0, 35.0, "b0", (0,)),
            (35.0, 40.0, "a0", (0,)),
        ],
    )


def test_an_arrival_waits_for_the_end_of_the_quantum() -> None:
    # 1x1x1, quanta of 10 s. b0 (0 GPU-s) arrives at 3 while a0 is in its quantum: it
    # waits until 10, then preempts a0 (10 GPU-s) and ends at 15; a0 resumes 15-35. Its
    # stretch from 15 spans the quantum ends at 20 and 30 without a restart.
    r = run([("a", 0.0, [(1, 30.0)]), ("b", 3.0, [(1, 5.0)])], "1x1x1", lease=10.0)
    assert finishes(r) == {"a": approx(35.0), "b": approx(15.0)}
    assert_intervals(
        r, [(0.0, 10.0, "a0", (0,)), (10.0, 15.0, "b0", (0,)), (15.0, 35.0, "a0", (0,))]
    )


def test_service_is_gpu_time_not_time() -> None:
    # 1x1x2 at a quantum end (t = 600). x, a 2-gang, has run 10 s (20 GPU-s); y and z, one
    # GPU each, have run 15 s and 12 s before (15 and 12 GPU-s). Least GPU-time first:
    # z, y; x does not fit what is left and is preempted (by running time it would stay).
    c = Cluster.from_spec("1x1x2")
    a = make_app("a", 0.0, [(2, 100.0), (1, 100.0), (1, 100.0)], c)
    x, y, z = a.jobs
    run_job(x, (0, 1), 590.0, 600.0)
    for job, held in ((y, 15.0), (z, 12.0)):
        job.attained = held
        job.done = held
    s = make_policy("las", PolicyOptions(lease=600.0)).schedule(view(c, [a], 600.0))
    assert {j.job_id: asg.gpus for j, asg in s.items()} == {"a2": (0,), "a1": (1,)}
    assert {asg.until for asg in s.values()} == {1200.0}


def test_a_job_inside_its_quantum_keeps_its_gpus() -> None:
    # The same state at t = 300, x's grant running to 600: nothing is re-decided; the
    # waiting jobs get no GPU (none is free).
    c = Cluster.from_spec("1x1x2")
    a = make_app("a", 0.0, [(2, 100.0), (1, 100.0)], c)
    run_job(a.jobs[0], (0, 1), 290.0, 600.0)
    s = make_policy("las", PolicyOptions(lease=600.0)).schedule(view(c, [a], 300.0))
    assert {j.job_id: (asg.gpus, asg.until) for j, asg in s.items()} == {"a0": ((0, 1), 600.0)}


def test_new_gangs_are_packed_on_the_best_span() -> None:
    # 1x2x2: a0 takes GPU 0 at 0; at 5, b0's 2-gang gets machine 1 (GPUs 2, 3, 2 it/s: 20 s)
    # rather than the lowest free GPUs 1 and 2 across machines.
    r = run([("a", 0.0, [(1, 100.0)]), ("b", 5.0, [(2, 40.0)])], "1x2x2", lease=600.0)
    assert_intervals(r, [(0.0, 100.0, "a0", (0,)), (5.0, 25.0, "b0", (2, 3))])
