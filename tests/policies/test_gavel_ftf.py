"""Gavel's finish-time-fairness program on one GPU type as it ships (``solve_ftf``): the
denominator is the cumulative isolated time of the work done plus the remaining work on the
isolated share (Gavel's ``IsolatedPolicy``: ``min(1, C / (m g))``), and among the min-max
optima the leximin one is taken. By hand, against random splits, and the cross-solve state
the policy keeps (``IsolatedTime``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.hand import TOY, approx
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec
from themis.policies._gavel_program import FtfJob, ftf_rho, gavel_isolated, solve_ftf
from themis.policies.gavel import IsolatedTime


def test_gavels_isolated_share_is_c_over_m_gpus_capped_at_the_gang() -> None:
    # 4 GPUs, 2 jobs: 2 GPUs each; the 1-GPU job is capped at 1 (its other GPU unused:
    # no water-filling), the 4-GPU job holds its gang half the time.
    assert gavel_isolated([1, 4], 4.0).tolist() == [1.0, 0.5]
    assert gavel_isolated([1, 1, 2, 4], 4.0).tolist() == [1.0, 1.0, 0.5, 0.25]
    assert gavel_isolated([], 4.0).size == 0


def test_a_job_that_waited_gets_more_than_its_isolated_share() -> None:
    # Two 1-GPU jobs on one GPU (isolated share 1/2 each). A waited 1000 s with nothing
    # done and has 10 s left: D_A = 0 + 10 / 0.5 = 20, so even at x = 1 its rho is
    # (1000 + 10) / 20 = 50.5. B just came with 5000 s left (D_B = 10000): B reaches that
    # level with 1% of the GPU. Both at level L: 10 / (20 L - 1000) + 5000 / (10000 L) = 1,
    # L = 50.505: A holds the GPU 99% of the time, B 1%.
    jobs = [FtfJob(1000.0, 0.0, 10.0, 1), FtfJob(0.0, 0.0, 5000.0, 1)]
    result = solve_ftf(jobs, 1.0)
    xa, xb = result.fractions
    assert xa + xb == approx(1.0)
    assert xa == pytest.approx(0.990, abs=1e-3) and xb == pytest.approx(0.0099, abs=1e-4)
    assert result.isolated == (0.5, 0.5)
    assert result.level == pytest.approx(50.505, abs=1e-3)
    assert ftf_rho(jobs[0], xa, 0.5) == pytest.approx(ftf_rho(jobs[1], xb, 0.5), rel=1e-9)
    # The pre-fix formula (e in the denominator too) splits 1/2 : 1/2, blind to the wait.


def test_work_done_counts_in_the_denominator() -> None:
    # Same wait (600 s) and work left (600 s) for two 1-GPU jobs on one GPU; A has done
    # 600 s of isolated work, B none. rho = (600 + 600 / x) / (c + 1200): B's denominator
    # is smaller, so B needs the larger share. Equal rho: (600 + 600/x) / 1800 =
    # (600 + 600/(1-x)) / 1200 -> x_A = 0.634 (solved below by the quadratic).
    jobs = [FtfJob(600.0, 600.0, 600.0, 1), FtfJob(600.0, 0.0, 600.0, 1)]
    result = solve_ftf(jobs, 1.0)
    xa, xb = result.fractions
    assert xa + xb == approx(1.0)
    assert xb > xa
    assert ftf_rho(jobs[0], xa, 0.5) == pytest.approx(ftf_rho(jobs[1], xb, 0.5), rel=1e-9)


def test_everything_fits_means_every_job_all_the_time() -> None:
    jobs = [FtfJob(10.0, 0.0, 100.0, 2), FtfJob(0.0, 0.0, 100.0, 2)]
    assert solve_ftf(jobs, 8.0).fractions == (1.0, 1.0)


_JOB = st.tuples(
    st.sampled_from([0.0, 50.0, 3000.0, 40000.0]),  # waited
    st.sampled_from([0.0, 100.0, 5000.0]),  # cumulative isolated time
    st.sampled_from([20.0, 700.0, 30000.0]),  # remaining seconds
    st.sampled_from([1, 2, 4, 8]),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_JOB, min_size=1, max_size=12), st.sampled_from([4.0, 8.0, 16.0]))
def test_min_max_optimal_leximin_and_no_random_split_beats_it(rows, capacity: float) -> None:
    jobs = [FtfJob(*row) for row in rows]
    result = solve_ftf(jobs, capacity)
    x = np.array(result.fractions)
    g = np.array([j.gang for j in jobs], dtype=float)
    assert ((x >= 0) & (x <= 1)).all()
    assert float(g @ x) <= capacity * (1 + 1e-9)
    rhos = np.array(
        [ftf_rho(j, xi, iso) for j, xi, iso in zip(jobs, x, result.isolated, strict=True)]
    )
    assert float(rhos.max()) == pytest.approx(result.level, rel=1e-9)
    # leximin: every job below its whole gang sits at one common level, the others above
    below = rhos[x < 1 - 1e-9]
    if below.size:
        assert np.ptp(below) <= 1e-6 * below.max()
        assert (rhos[x >= 1 - 1e-9] >= below.max() * (1 - 1e-6)).all()
    # no feasible split does better on the worst rho
    rng = np.random.default_rng(len(rows))
    for _ in range(200):
        y = rng.random(len(jobs))
        y = np.minimum(1.0, y * capacity / float(g @ y))
        worst = max(
            ftf_rho(j, yi, iso) for j, yi, iso in zip(jobs, y, result.isolated, strict=True)
        )
        assert worst >= result.level * (1 - 1e-9)


def test_isolated_time_adds_the_work_done_over_the_last_isolated_speed() -> None:
    # Gavel: c += (steps left at the last solve - steps left now) / isolated throughput
    # then. A job not in the last solve adds nothing; a job gone is forgotten.
    spec = AppSpec("a", 0.0, "toy", (JobSpec("j0", 1, 100.0), JobSpec("j1", 1, 100.0)))
    a, b = AppState(spec, TOY, 1.0).jobs
    book = IsolatedTime()
    assert book.update([a], [100.0]) == [0.0]
    book.solved([a], [100.0], [0.5])  # isolated speed 0.5 iterations/s
    assert book.update([a, b], [80.0, 100.0]) == [approx(40.0), 0.0]
    book.solved([a, b], [80.0, 100.0], [0.25, 0.25])
    assert book.update([a, b], [70.0, 95.0]) == [approx(80.0), approx(20.0)]
    book.solved([b], [95.0], [0.5])
    assert a not in book.done
