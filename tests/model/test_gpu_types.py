"""Heterogeneous GPU types: the cluster grammar, per-type speeds, gangs that never mix
types, typed estimates, and hand schedules whose times are derived in the comments.

The model ``toy`` takes 1 s per iteration on a V100 and 4 s on a K80 (the profiles file's
``gpu_types``), so a 1-GPU job of ``w`` iterations runs ``w`` s on a V100 and ``4w`` on a K80.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.agent.agent import Agent
from themis.errors import ThemisError
from themis.fairness.ftf import RemainingWork
from themis.model.cluster import Cluster
from themis.model.gpu_types import with_type_times
from themis.model.placement import Packer
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, GangWork
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions, make_policy, policy_names
from themis.reports.metrics import app_rows
from themis.simulator.engine import simulate
from themis.workload.fits import check_fits

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
TYPES = {"toy": {"v100": 1.0, "k80": 4.0}}


def workload(apps: list[tuple[str, float, list[tuple[int, float]]]]) -> Workload:
    specs = tuple(
        AppSpec(a, t, "toy", tuple(JobSpec(f"{a}{k}", g, w) for k, (g, w) in enumerate(jobs)))
        for a, t, jobs in apps
    )
    return Workload(specs, {"toy": TOY}, "hand", notes={"gpu_types": TYPES})


# -- the cluster ------------------------------------------------------------------------


def test_typed_blocks_number_racks_and_machines_on() -> None:
    cluster = Cluster.from_spec("1x2x4:V100+2x1x2:k80")
    assert cluster.types == ("v100", "k80")
    assert cluster.size == 12
    assert [cluster.machine_type[m] for m in sorted(cluster.machine_type)] == [
        "v100", "v100", "k80", "k80"
    ]  # fmt: skip
    assert sorted(set(cluster.rack_of)) == [0, 1, 2]
    assert cluster.describe() == "12 GPUs in 4 machines, 3 racks (8 v100, 4 k80)"
    parts = dict(cluster.shape.parts)
    assert (parts["v100"].count, parts["v100"].machine_max) == (8, 4)
    assert (parts["k80"].count, parts["k80"].rack_max) == (4, 2)


def test_untyped_cluster_has_no_parts() -> None:
    cluster = Cluster.from_spec("2x4x8")
    assert not cluster.typed and cluster.shape.parts == ()
    assert cluster.shape_of(range(10)).parts == ()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("1x1x8:v100+1x1x8", "every block"),
        ("1x1x8+1x1x8", "every block"),
        ("1x1x8:v1 00", "is not RxMxG"),
        ("1x0x8:k80", "at least 1"),
    ],
)
def test_bad_typed_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(ThemisError, match=message):
        Cluster.from_spec(spec)


def test_a_type_nobody_knows_is_refused_naming_model_and_type() -> None:
    wl = workload([("a", 0.0, [(1, 10.0)])])
    with pytest.raises(ThemisError, match="model 'toy' on GPU type 'a100'"):
        check_fits(wl, Cluster.from_spec("1x1x2:a100"))


def test_bundled_types_cover_the_bundled_models() -> None:
    from themis.model.profiles import load_profiles

    profiles = load_profiles()
    wl = Workload((), profiles, "bundled")
    typed = with_type_times(wl, Cluster.from_spec("1x1x8:v100+1x1x8:k80")).profiles
    for name, profile in typed.items():
        assert profile.time_on("v100") == profiles[name].time_per_iteration
        assert profile.time_on("k80") > 4 * profile.time_on("v100")


def test_a_gang_larger_than_every_type_is_refused() -> None:
    wl = workload([("a", 0.0, [(2, 10.0)])])
    with pytest.raises(ThemisError, match="never mixes GPU types and the largest type has 1"):
        check_fits(wl, Cluster.from_spec("1x1x1:v100+1x1x1:k80"))


# -- placement --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.sampled_from("abc")),
        min_size=1,
        max_size=3,
    ),
    data=st.data(),
)
def test_the_packer_never_mixes_types_and_refuses_only_when_no_type_has_room(
    blocks: list[tuple[int, int, int, str]], data: st.DataObject
) -> None:
    spec = "+".join(f"{r}x{m}x{g}:t{t}" for r, m, g, t in blocks)
    cluster = Cluster.from_spec(spec)
    pool = data.draw(st.sets(st.integers(0, cluster.size - 1)))
    packer = Packer(cluster, pool)
    free = set(pool)
    for gang in data.draw(st.lists(st.integers(1, 8), max_size=6)):
        room = max(
            (sum(1 for g in free if cluster.type_of[g] == t) for t in cluster.types), default=0
        )
        gpus = packer.take(gang)
        if gpus is None:
            assert room < gang
            continue
        assert len(gpus) == gang and set(gpus) <= free
        assert len({cluster.type_of[g] for g in gpus}) == 1
        free -= set(gpus)


def test_the_packer_takes_the_asked_type() -> None:
    cluster = Cluster.from_spec("1x1x2:v100+1x1x2:k80")
    packer = Packer(cluster, range(4))
    assert packer.take(2, gpu_type="k80") == (2, 3)
    assert packer.take(1, gpu_type="k80") is None
    assert packer.take(2) == (0, 1)


# -- estimates --------------------------------------------------------------------------


def test_typed_estimate_spreads_work_over_speed_weighted_gpus() -> None:
    profile = with_type_times(workload([]), Cluster.from_spec("1x1x1:v100+1x1x1:k80"))
    toy = profile.profiles["toy"]
    cluster = Cluster.from_spec("1x1x4:v100+1x1x4:k80")
    work = RemainingWork(toy, {1: GangWork(800.0, 100.0, 8)})
    # 800 GPU-seconds of V100; four V100s and four K80s at 1/4 speed: 5 V100-equivalents.
    assert work.time_on(cluster.shape) == pytest.approx(800 / 5)
    assert work.time_on(cluster.shape_of([0, 1, 2, 3])) == pytest.approx(200)
    assert work.time_on(cluster.shape_of([4, 5, 6, 7])) == pytest.approx(800)
    # A time share of 2 GPUs at the cluster's mean speed (1 + 1/4) / 2.
    assert work.time_on_share(2, cluster.shape) == pytest.approx(800 / (2 * 0.625))
    # The longest job bounds it: 100 iterations alone on its fastest GPU.
    long = RemainingWork(toy, {1: GangWork(200.0, 150.0, 2)})
    assert long.time_on(cluster.shape) == pytest.approx(150)
    # A 4-GPU gang fits one machine of either type: it runs on the V100s.
    gang = RemainingWork(toy, {4: GangWork(400.0, 400.0, 1)})
    assert gang.time_on(cluster.shape) == pytest.approx(100)
    assert gang.time_on(cluster.shape_of([0, 1, 4, 5])) == math.inf


def test_agent_fills_fast_gpus_first_and_prices_them() -> None:
    cluster = Cluster.from_spec("1x1x2:v100+1x1x2:k80")
    wl = with_type_times(workload([("a", 0.0, [(1, 100.0), (1, 100.0)])]), cluster)
    app = AppState(wl.apps[0], wl.profiles["toy"], t_cluster=100.0)
    agent = Agent(app, cluster)
    bid = agent.bid(0.0, 1.0, (), [2, 3, 0, 1])  # the arbiter's order starts on K80s
    first = min(bid.menu, key=lambda e: len(e.gpus))
    assert cluster.type_of[first.gpus[0]] == "v100"
    # Two jobs of 100 iterations: on two V100s 100 s (rho 1); on a V100 and a K80, 200 s
    # with the work spread over 1.25 V100-equivalents is 160 s, and the job alone on a
    # K80 bounds it at 400 s: rho 4.
    by_size = {len(e.gpus): e.rho for e in bid.menu}
    assert by_size[2] == pytest.approx(1.0)
    on_k80 = agent.rho_with(0.0, 1.0, (2, 3))
    assert on_k80 == pytest.approx(4.0)


# -- hand schedules ---------------------------------------------------------------------


def test_a_jobs_speed_is_its_types() -> None:
    # fifo: a (arrived first) takes the V100 (first machine), b the K80.
    # a: 100 iterations at 1 s = 100 s; b: 100 iterations at 4 s = 400 s.
    wl = workload([("a", 0.0, [(1, 100.0)]), ("b", 0.0, [(1, 100.0)])])
    cluster = Cluster.from_spec("1x1x1:v100+1x1x1:k80")
    result = simulate(wl, cluster, make_policy("fifo", PolicyOptions()))
    finish = {a.app_id: a.finish for a in result.apps}
    assert finish == {"a": pytest.approx(100.0), "b": pytest.approx(400.0)}
    held = {i.job_id: i.gpus for i in result.intervals}
    assert held == {"a0": (0,), "b0": (1,)}
    # T_cluster is the app alone on the whole typed cluster: 100 s on the V100. a took
    # 100 s with N_avg = 2 over its life: rho = 100 / (100 * 2).
    rows = {r.app_id: r for r in app_rows(result)}
    assert rows["a"].rho == pytest.approx(0.5)


def test_two_jobs_side_by_side_run_at_their_types_speeds() -> None:
    # srtf: a0 (200 iterations) starts alone on the V100 (the first machine). b arrives at
    # 50 s with a shorter job; the K80 is free, so b0 starts there: 30 iterations at 4 s,
    # 120 s, done at 170. a0 keeps the V100: done at 200. A hand case where two jobs of
    # one model run at their types' speeds side by side.
    wl = workload([("a", 0.0, [(1, 200.0)]), ("b", 50.0, [(1, 30.0)])])
    cluster = Cluster.from_spec("1x1x1:v100+1x1x1:k80")
    result = simulate(wl, cluster, make_policy("srtf", PolicyOptions()))
    finish = {a.app_id: a.finish for a in result.apps}
    assert finish["a"] == pytest.approx(200.0)
    assert finish["b"] == pytest.approx(50.0 + 120.0)


@pytest.mark.parametrize("policy", policy_names())
def test_every_policy_runs_gangs_on_one_type(policy: str) -> None:
    # Gangs of 1-4 GPUs on two 4-GPU V100 machines and two 4-GPU K80 machines; the
    # simulator refuses a gang that mixes types, so finishing is the check, plus each
    # interval's GPUs being of one type.
    apps = [
        (f"a{i}", 30.0 * i, [(1 + (i + k) % 4, 50.0 + 10 * k) for k in range(3)]) for i in range(8)
    ]
    wl = workload(apps)
    cluster = Cluster.from_spec("1x2x4:v100+1x2x4:k80")
    result = simulate(wl, cluster, make_policy(policy, PolicyOptions(lease=60.0)))
    assert all(a.finish is not None for a in result.apps)
    for interval in result.intervals:
        assert len({cluster.type_of[g] for g in interval.gpus}) == 1


def test_all_v100_typed_cluster_matches_untyped_finish_times() -> None:
    # Every GPU a V100 at the profile's own speed: the same schedule as the untyped cluster.
    apps = [(f"a{i}", 20.0 * i, [(1 + i % 2, 40.0 + 5 * i)]) for i in range(6)]
    untyped = simulate(
        workload(apps), Cluster.from_spec("1x2x2"), make_policy("fifo", PolicyOptions())
    )
    typed = simulate(
        workload(apps), Cluster.from_spec("1x2x2:v100"), make_policy("fifo", PolicyOptions())
    )
    assert [a.finish for a in typed.apps] == pytest.approx([a.finish for a in untyped.apps])


def test_profiles_file_types_override_the_bundled_table() -> None:
    wl = replace(workload([]), notes={"gpu_types": {"toy": {"k80": 2.5}}})
    typed = with_type_times(wl, Cluster.from_spec("1x1x1:v100+1x1x1:k80")).profiles["toy"]
    assert typed.time_on("k80") == 2.5
    assert typed.time_on("v100") == 1.0  # the bundled table: 1x time_per_iteration


def test_a_profile_that_knows_no_type_runs_alike_on_all() -> None:
    # The runtime's profiles come from one step_time: on a typed Ray cluster its gangs
    # still stay on one type, and the estimates treat the types alike.
    cluster = Cluster.from_spec("1x1x2:v100+1x1x2:k80")
    work = RemainingWork(TOY, {1: GangWork(400.0, 100.0, 4)})
    assert work.time_on(cluster.shape) == pytest.approx(100.0)
    assert TOY.time_on("k80") == TOY.time_per_iteration


def test_themis_moves_a_job_to_a_faster_type_when_its_lease_ends() -> None:
    # c (50 iterations) takes the V100 at 0 and is done at 50. a arrives at 10 while the
    # V100 is busy and starts on the K80 (lease 600 s). Its lease ends at 610; the round
    # at 600 (c's old grant end) batches it (30 s window), and the V100 is free: the agent
    # moves a0 there. a0 ran 590 s on the K80 (147.5 iterations at 4 s) and runs its
    # other 852.5 on the V100: done at 600 + 852.5. Staying on the K80: 10 + 4000.
    wl = workload([("c", 0.0, [(1, 50.0)]), ("a", 10.0, [(1, 1000.0)])])
    cluster = Cluster.from_spec("1x1x1:v100+1x1x1:k80")
    result = simulate(wl, cluster, make_policy("themis", PolicyOptions()))
    assert {a.app_id: a.finish for a in result.apps} == {
        "c": pytest.approx(50.0),
        "a": pytest.approx(1452.5),
    }
    held = sorted((i.start, i.end, i.job_id, i.gpus) for i in result.intervals)
    assert held == [
        (0.0, 50.0, "c0", (0,)),
        (10.0, 600.0, "a0", (1,)),
        (600.0, pytest.approx(1452.5), "a0", (0,)),
    ]
