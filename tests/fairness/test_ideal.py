"""The two ideal times of rho (``fairness/ideal.py``), checked against hand arithmetic and
as properties: the slice's is never longer than the paper's on one GPU type, and equal
where the definitions agree.

``TOY``: one iteration takes 1 s on one GPU, so a 1-GPU job of ``w`` iterations runs ``w``
seconds and a ``g``-GPU gang of ``w`` iterations runs ``w / g`` seconds in one machine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.fairness.ftf import (
    RemainingWork,
    app_ideal_time,
    made_fair_time,
    t_cluster,
    verified_rho,
)
from themis.fairness.ideal import PAPER, SLICE, ideal_time
from themis.model.cluster import Cluster, SetShape
from themis.model.gpu_types import with_type_times
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, GangWork
from themis.model.workload import AppSpec, JobSpec, Workload

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)
C64 = Cluster.from_spec("1x8x8")  # 64 GPUs, 8 a machine


def app(jobs: list[tuple[int, float]], cluster: Cluster = C64) -> AppState:
    """An app of ``jobs`` (gang, iterations) arrived at 0, its ``T_cluster`` as the
    simulator sets it at arrival."""
    spec = AppSpec("a", 0.0, "toy", tuple(JobSpec(f"j{k}", g, w) for k, (g, w) in enumerate(jobs)))
    state = AppState(spec, TOY, 0.0)
    state.t_cluster = t_cluster(TOY, state.remaining_by_gang(0.0), cluster.shape)
    return state


def both(state: AppState, n: float, cluster: Cluster = C64) -> tuple[float, float]:
    return (
        app_ideal_time(PAPER, state, cluster.shape, n),
        app_ideal_time(SLICE, state, cluster.shape, n),
    )


def test_a_one_gpu_app_on_64_gpus_among_ten_apps() -> None:
    # One 1-GPU job of 100 s: T_cluster 100 (its demand is one GPU). Paper: 100 x 10 =
    # 1,000 s. Its slice is 64 / 10 = 6.4 GPUs, of which it uses one: 100 s. Under the
    # paper it may wait 900 s and still read rho 1.
    paper, slice_ = both(app([(1, 100.0)]), 10.0)
    assert paper == 1000.0
    assert slice_ == pytest.approx(100.0, rel=1e-12)


def test_an_app_of_sixteen_one_gpu_jobs_uses_all_of_its_slice() -> None:
    # Sixteen 1-GPU jobs of 100 s: 1,600 GPU-s, demand 16: T_cluster 100, paper 1,000.
    # On 6.4 GPUs: 1,600 / 6.4 = 250 s (more than its longest job, 100 s).
    paper, slice_ = both(app([(1, 100.0)] * 16), 10.0)
    assert paper == pytest.approx(1000.0, rel=1e-12)
    assert slice_ == pytest.approx(250.0, rel=1e-12)


def test_a_demand_between_the_slice_and_the_cluster_still_differs() -> None:
    # Forty 1-GPU jobs of 100 s among 2 apps: T_cluster 4,000 / 40 = 100, paper 200. The
    # slice is 32 GPUs, all used: 4,000 / 32 = 125 s. A demand at or above the slice is
    # not enough for the two to agree: the paper's time share runs 40 GPUs half the time,
    # the slice 32 all the time.
    paper, slice_ = both(app([(1, 100.0)] * 40), 2.0)
    assert paper == pytest.approx(200.0, rel=1e-12)
    assert slice_ == pytest.approx(125.0, rel=1e-12)


def test_a_gang_larger_than_its_slice_runs_in_turns() -> None:
    # One 8-GPU gang of 100 iterations: 100 GPU-s... of 8 GPUs at once, 12.5 s alone in a
    # machine. Among 16 apps its slice is 4 GPUs: half the time on its gang, 25 s. The
    # paper: 12.5 x 16 = 200 s.
    paper, slice_ = both(app([(8, 100.0)]), 16.0)
    assert paper == pytest.approx(200.0, rel=1e-12)
    assert slice_ == pytest.approx(25.0, rel=1e-12)


def test_an_app_that_fills_the_cluster_gets_the_same_ideal_from_both() -> None:
    # Sixty-four 1-GPU jobs of 100 s on 64 GPUs among 4 apps: 6,400 GPU-s over 16 GPUs
    # = 400 s, and 100 s x 4 = 400 s.
    paper, slice_ = both(app([(1, 100.0)] * 64), 4.0)
    assert paper == pytest.approx(400.0, rel=1e-12)
    assert slice_ == pytest.approx(400.0, rel=1e-12)


def test_the_longest_job_is_not_slowed_n_fold_on_a_slice() -> None:
    # Sixty-four 1-GPU jobs, one of 1,000 s and the rest of 10 s: 1,630 GPU-s; alone the
    # long job bounds it at 1,000 s, so the paper among 4 says 4,000 s. Its slice of 16
    # GPUs: max(1,630 / 16, 1,000) = 1,000 s. The demand covers the cluster, yet the two
    # differ: the time share slows the long job four times, the slice does not.
    paper, slice_ = both(app([(1, 1000.0)] + [(1, 10.0)] * 63), 4.0)
    assert paper == pytest.approx(4000.0, rel=1e-12)
    assert slice_ == pytest.approx(1000.0, rel=1e-12)


def test_alone_both_are_exactly_t_cluster() -> None:
    for jobs in ([(1, 100.0)], [(1, 100.0)] * 40, [(8, 100.0), (2, 30.0)], [(16, 50.0)]):
        state = app(jobs)
        paper, slice_ = both(state, 1.0)
        assert paper == slice_ == state.t_cluster


def test_on_a_typed_cluster_the_slice_takes_the_shorter_share() -> None:
    # 2 V100s and 2 K80s; toy runs 4x slower on a K80. One 1-GPU job of 100 iterations:
    # alone on a V100, 100 s. A slice holds the cluster's mix, mean speed (2 x 1 + 2 x
    # 0.25) / 4 = 0.625 V100s a GPU: 160 s on one GPU. Among 2 apps the paper's time
    # share says 200 s, the slice 160 s. Alone, the slice's 160 s would be longer than
    # the cluster's own 100 s: the shorter share, 100 s, keeps rho 1 for an app alone.
    cluster = Cluster.from_spec("1x1x2:v100+1x1x2:k80")
    spec = AppSpec("a", 0.0, "toy", (JobSpec("j", 1, 100.0),))
    workload = Workload(
        (spec,), {"toy": TOY}, "hand", notes={"gpu_types": {"toy": {"v100": 1.0, "k80": 4.0}}}
    )
    typed = with_type_times(workload, cluster)
    state = AppState(typed.apps[0], typed.profiles["toy"], 0.0)
    state.t_cluster = t_cluster(state.profile, state.remaining_by_gang(0.0), cluster.shape)
    assert state.t_cluster == pytest.approx(100.0)
    assert both(state, 2.0, cluster) == (pytest.approx(200.0), pytest.approx(160.0))
    assert both(state, 1.0, cluster) == (pytest.approx(100.0), pytest.approx(100.0))


def test_the_slice_is_of_the_work_declared_at_arrival_not_what_is_left() -> None:
    state = app([(1, 100.0)] * 16)
    before = app_ideal_time(SLICE, state, C64.shape, 10.0)
    state.jobs[0].done = 90.0  # progress does not move the ideal time
    state.touch()
    assert app_ideal_time(SLICE, state, C64.shape, 10.0) == before


def test_verified_rho_divides_by_the_ideal_time_of_the_work_made() -> None:
    # A 1-GPU app that made 100 iterations by t = 500, among 10 apps on 64 GPUs: the
    # paper's fair time of that work is 100 x 10 = 1,000 s (rho 0.5), the slice's 100 s
    # (rho 5).
    done = {1: GangWork(100.0, 100.0, 1)}
    assert made_fair_time(TOY, done, C64.shape, 10.0) == 1000.0
    assert made_fair_time(TOY, done, C64.shape, 10.0, SLICE) == pytest.approx(100.0)
    assert verified_rho(500.0, 0.0, TOY, done, C64.shape, 10.0) == 0.5
    assert verified_rho(500.0, 0.0, TOY, done, C64.shape, 10.0, SLICE) == pytest.approx(5.0)


def test_an_unknown_definition_is_refused() -> None:
    work = RemainingWork(TOY, {1: GangWork(100.0, 100.0, 1)})
    with pytest.raises(ValueError, match="unknown ideal time 'private'"):
        ideal_time("private", 100.0, work, C64.shape, 2.0)


# -- properties ------------------------------------------------------------------------

shapes = st.builds(
    lambda racks, machines, per: (racks, machines, per),
    st.integers(1, 3),
    st.integers(1, 4),
    st.sampled_from([1, 2, 4, 8]),
)


@st.composite
def work_on_a_cluster(draw: st.DrawFn) -> tuple[RemainingWork, SetShape]:
    racks, machines, per = draw(shapes)
    cluster = Cluster.from_spec(f"{racks}x{machines}x{per}")
    gangs = draw(
        st.dictionaries(
            st.sampled_from([g for g in (1, 2, 4, 8, 16) if g <= cluster.size]),
            st.lists(st.floats(1.0, 1e5), min_size=1, max_size=12),
            min_size=1,
            max_size=3,
        )
    )
    remaining = {g: GangWork(sum(ws), max(ws), len(ws)) for g, ws in gangs.items()}
    return RemainingWork(TOY, remaining), cluster.shape


@settings(max_examples=300, deadline=None)
@given(work_on_a_cluster(), st.floats(1.0, 64.0))
def test_on_one_gpu_type_the_slice_is_never_longer_than_the_time_share(
    case: tuple[RemainingWork, SetShape], n: float
) -> None:
    # The raw slice time, not the ideal (which takes the shorter of the two by its
    # definition): the claim is that on one type the minimum never needs the paper's.
    work, shape = case
    paper = work.time_on(shape) * n
    slice_ = work.time_on_share(shape.count / n, shape)
    assert slice_ <= paper * (1 + 1e-12)
    assert ideal_time(SLICE, work.time_on(shape), work, shape, n) == pytest.approx(
        slice_, rel=1e-12
    )


@settings(max_examples=300, deadline=None)
@given(work_on_a_cluster(), st.floats(1.0, 64.0))
def test_the_two_agree_when_the_app_fills_the_cluster_and_its_work_binds(
    case: tuple[RemainingWork, SetShape], n: float
) -> None:
    work, shape = case
    alone = work.time_on(shape)
    paper = ideal_time(PAPER, alone, work, shape, n)
    slice_ = ideal_time(SLICE, alone, work, shape, n)
    assert ideal_time(SLICE, alone, work, shape, 1.0) == alone  # alone: exactly T_cluster
    gpu_seconds = sum(seconds / TOY.best_factor_on(gang, shape) for gang, seconds, _ in work.gangs)
    longest = max(most / (gang * TOY.best_factor_on(gang, shape)) for gang, _, most in work.gangs)
    if work.demand >= shape.count and gpu_seconds / shape.count >= longest:
        assert slice_ == pytest.approx(paper, rel=1e-9)
    elif n > 1.01 and work.demand < shape.count:
        # A demand below the cluster: the slice's GPUs min(D, G/n) beat the time share's
        # D/n, and its longest job is not slowed n-fold, so it is strictly shorter.
        assert slice_ < paper
