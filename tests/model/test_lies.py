"""Lies as data (``model/lies.py``): parsing, the workload a liar submits, and the truth the
simulator keeps while policies read the lie."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.lies import (
    Lie,
    apply_lies,
    by_submitted_app,
    claimed_profile,
    declarations,
    parse_lie,
    parse_lies,
    split_app,
)
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec, LossCurve, Search, Workload
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import Conditions, simulate

#: 1 iteration/s per GPU; loses half its speed across machines.
VGG = ModelProfile("vgg", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)
RESNET = ModelProfile("resnet", time_per_iteration=1.0, cross_machine=0.9, cross_rack=0.8)


def app(app_id: str, gangs: list[int], work: float = 100.0, arrival: float = 0.0) -> AppSpec:
    jobs = tuple(JobSpec(f"{app_id}{k}", g, work) for k, g in enumerate(gangs))
    return AppSpec(app_id, arrival, "vgg", jobs)


def test_parse_reads_every_kind_and_the_old_form() -> None:
    assert parse_lie("a=2") == Lie("a", "work", 2.0)
    assert parse_lie(" a = work:0.5") == Lie("a", "work", 0.5)
    assert parse_lie("a=placement:flat") == Lie("a", "placement", "flat")
    assert parse_lie("a=split:3").text == "split:3"
    assert parse_lie("a=order:0.5") == Lie("a", "order", 0.5)
    assert parse_lie("a=weight:0") == Lie("a", "weight", 0.0)
    assert [x.kind for x in parse_lies(["a=2", "a=gang:0.5", "b=ask:2"])] == [
        "work",
        "gang",
        "ask",
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a", "is not APP=KIND:VALUE"),
        ("=2", "is not APP=KIND:VALUE"),
        ("a=nope:2", "unknown kind"),
        ("a=work:-1", "> 0"),
        ("a=work:inf", "> 0"),
        ("a=gang:1", "the truth"),
        ("a=order:1", "the truth"),
        ("a=order:0", "> 0"),
        ("a=weight:-1", ">= 0"),
        ("a=weight:nan", ">= 0"),
        ("a=weight:inf", ">= 0"),
        ("a=weight:1", "default order"),
        ("a=weight:flat", "not a number"),
        ("a=split:1", "integer >= 2"),
        ("a=placement:2", "flat or sensitive"),
    ],
)
def test_bad_lies_are_clear_errors(text: str, fragment: str) -> None:
    with pytest.raises(ThemisError, match="--misreport") as error:
        parse_lie(text)
    assert fragment in str(error.value)


def test_two_lies_of_one_kind_by_one_app_are_refused() -> None:
    with pytest.raises(ThemisError, match="two lies of kind 'work'"):
        parse_lies(["a=2", "a=work:0.5"])


def test_split_deals_trials_round_robin_into_parts_arriving_together() -> None:
    parts = split_app(app("a", [1, 2, 4, 1, 2], arrival=7.0), 2)
    assert [p.app_id for p in parts] == ["a~1", "a~2"]
    assert [[j.job_id for j in p.jobs] for p in parts] == [["a0", "a2", "a4"], ["a1", "a3"]]
    assert {p.arrival for p in parts} == {7.0}
    # never more parts than trials
    assert [p.app_id for p in split_app(app("b", [1, 1]), 5)] == ["b~1", "b~2"]
    assert split_app(app("c", [1]), 3) == [app("c", [1])]


def test_stagger_splits_in_two_with_the_second_part_later() -> None:
    """``stagger:S`` is ``split:2`` with part 2 arriving S seconds after part 1; with
    ``split:K`` too, part k arrives (k - 1) S after the first."""
    w = Workload((app("a", [1, 2, 4, 1], arrival=7.0),), {"vgg": VGG})
    two = apply_lies(w, [Lie("a", "stagger", 1.5)], max_gang=8)
    assert [(p.app_id, p.arrival) for p in two.workload.apps] == [("a~1", 7.0), ("a~2", 8.5)]
    assert two.parts == {"a": ("a~1", "a~2")}
    three = apply_lies(w, [Lie("a", "split", 3), Lie("a", "stagger", 2.0)], max_gang=8)
    assert [p.arrival for p in three.workload.apps] == [7.0, 9.0, 11.0]
    with pytest.raises(ThemisError, match="stagger: the value must be a number > 0"):
        parse_lie("a=stagger:0")


@given(
    gangs=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=6),
    factor=st.sampled_from([0.25, 0.5, 2.0, 3.0]),
)
def test_gang_keeps_iterations_and_ask_keeps_duration(gangs: list[int], factor: float) -> None:
    """``gang:F`` keeps each trial's iterations (its GPU-time on one machine); ``ask:F``
    keeps its duration (iterations / gang), whatever rounding and the cap do."""
    w = Workload((app("a", gangs),), {"vgg": VGG})
    same_work = apply_lies(w, [Lie("a", "gang", factor)], max_gang=8).workload.apps[0]
    same_time = apply_lies(w, [Lie("a", "ask", factor)], max_gang=8).workload.apps[0]
    for before, work, time in zip(w.apps[0].jobs, same_work.jobs, same_time.jobs, strict=True):
        assert 1 <= work.gang <= 8 and work.gang == time.gang
        assert work.work == before.work
        assert time.work / time.gang == pytest.approx(before.work / before.gang)


def test_a_split_search_keeps_each_trials_loss_curve() -> None:
    search = AppSpec("s", 0.0, "vgg", (JobSpec("t0", 1, 90.0), JobSpec("t1", 1, 90.0)),
                     Search(eta=3, min_work=10.0))  # fmt: skip
    curves = {("s", "t0"): LossCurve(1.0, 1.0, 0.5), ("s", "t1"): LossCurve(2.0, 1.0, 0.5)}
    w = Workload((search,), {"vgg": VGG}, curves=curves)
    submitted = apply_lies(w, [Lie("s", "split", 2)], max_gang=8)
    assert submitted.parts == {"s": ("s~1", "s~2")}
    assert submitted.workload.curves[("s~2", "t1")] == curves[("s", "t1")]


def test_lies_about_unknown_apps_are_errors() -> None:
    w = Workload((app("a", [1]),), {"vgg": VGG})
    with pytest.raises(ThemisError, match="no app 'z'"):
        apply_lies(w, [Lie("z", "gang", 2.0)], max_gang=8)
    with pytest.raises(ThemisError, match="no app 'z'"):
        by_submitted_app([("z", 2.0)], ["a"])
    assert by_submitted_app([("a", 2.0)], ["a~1", "a~2", "b"]) == {"a~1": 2.0, "a~2": 2.0}


def test_claimed_profiles_keep_speed_and_change_only_placement() -> None:
    flat = claimed_profile(VGG, "flat", [VGG, RESNET])
    assert (flat.time_per_iteration, flat.cross_machine, flat.cross_rack) == (1.0, 1.0, 1.0)
    sensitive = claimed_profile(RESNET, "sensitive", [VGG, RESNET])
    assert (sensitive.cross_machine, sensitive.cross_rack) == (0.5, 0.25)


def test_a_placement_claim_moves_what_policies_see_never_the_truth() -> None:
    """One 2-GPU VGG trial on two 1-GPU machines: it must span machines and runs at half
    speed (2 x 0.5 iterations/s: 100 s for 100 iterations) whatever it claims. Claiming
    "flat" makes its declared T_cluster 50 s, but the report keeps the truth, 100 s."""
    w = Workload((app("a", [2]),), {"vgg": VGG})
    cluster = Cluster.from_spec("1x2x1")
    honest = simulate(w, cluster, make_policy("fifo", PolicyOptions()))
    claim = Conditions(claims=(("a", "flat"),))
    lying = simulate(w, cluster, make_policy("fifo", PolicyOptions()), conditions=claim)
    assert [(i.start, i.end) for i in lying.intervals] == [(0.0, 100.0)]
    assert [(i.start, i.end) for i in honest.intervals] == [(0.0, 100.0)]
    assert lying.apps[0].t_cluster == honest.apps[0].t_cluster == 100.0
    assert lying.apps[0].profile.cross_machine == 1.0  # what the policy read


def test_an_order_strategy_changes_the_liars_trial_order_and_no_declaration() -> None:
    """``order:0.5`` reaches the simulator as the app's own trial order (its parts too,
    when it also splits), while every policy reads its honest declaration: the same
    declared spec and T_cluster as the honest run, and a lone FIFO app's schedule equal to
    a ``work:0.5`` liar's (FIFO reads no declared work but through the app's own order)."""
    w = Workload((app("a", [1, 1, 1], 100.0), app("b", [1], 50.0, arrival=5.0)), {"vgg": VGG})
    cluster = Cluster.from_spec("1x1x2")
    told = declarations(parse_lies(["a=order:0.5"]))
    assert (told.misreport, told.claims, told.orders) == ((), (), (("a", 0.5),))
    fifo = PolicyOptions()
    honest = simulate(w, cluster, make_policy("fifo", fifo))
    ordered = simulate(
        w, cluster, make_policy("fifo", fifo), conditions=Conditions(orders=told.orders)
    )
    lying = simulate(
        w, cluster, make_policy("fifo", fifo), conditions=Conditions(misreport=(("a", 0.5),))
    )
    by_id = {a.app_id: a for a in ordered.apps}
    assert by_id["a"].order_factor == 0.5 and by_id["b"].order_factor == 1.0
    assert [j.spec.work for j in by_id["a"].jobs] == [100.0, 100.0, 100.0]
    assert by_id["a"].t_cluster == {a.app_id: a for a in honest.apps}["a"].t_cluster
    assert [(i.start, i.end, i.job_id) for i in ordered.intervals] == [
        (i.start, i.end, i.job_id) for i in lying.intervals
    ]
    split = apply_lies(w, parse_lies(["a=split:2"]), 8)
    parts = simulate(
        split.workload,
        cluster,
        make_policy("fifo", fifo),
        conditions=Conditions(orders=told.orders),
    )
    assert {a.app_id: a.order_factor for a in parts.apps} == {"a~1": 0.5, "a~2": 0.5, "b": 1.0}


def test_a_weight_strategy_is_written_into_the_submission_and_matches_order() -> None:
    """``weight:W`` declares ``progress_weight`` ``W`` in the submitted app (nothing else
    changes, no other app is touched); ``weight:2`` schedules exactly as ``order:0.5``
    (the same order, told to the app's scheduler), and ``weight:0`` runs the first trial
    to its end before the next starts."""
    w = Workload((app("a", [1, 1, 1], 100.0), app("b", [1], 50.0, arrival=5.0)), {"vgg": VGG})
    submitted = apply_lies(w, parse_lies(["a=weight:2"]), 8).workload
    a, b = submitted.apps
    assert a.progress_weight == 2.0 and b is w.apps[1]
    assert a.jobs == w.apps[0].jobs and a.arrival == w.apps[0].arrival
    assert declarations(parse_lies(["a=weight:2"])) == declarations(())
    cluster = Cluster.from_spec("1x1x2")
    options = PolicyOptions(lease=40.0)

    def schedule(workload: Workload, conditions: Conditions | None = None) -> list:
        result = simulate(
            workload, cluster, make_policy("themis", options), conditions=conditions or Conditions()
        )
        return [(i.start, i.end, i.job_id, i.gpus) for i in result.intervals]

    ordered = schedule(w, Conditions(orders=(("a", 0.5),)))
    assert schedule(submitted) == ordered
    # Trials of 100, 90 and 80 s beside b on 2 GPUs, 40 s leases: by default the fresh
    # 80 s trial (most left) takes a GPU at the first lease end; depth first, it waits for
    # a trial to end (a0 at 100 s), and a1, paused for b, resumes before it.
    sweep = AppSpec(
        "a", 0.0, "vgg", tuple(JobSpec(f"a{k}", 1, t) for k, t in enumerate((100.0, 90.0, 80.0)))
    )
    alone = Workload((sweep, w.apps[1]), {"vgg": VGG})
    depth = apply_lies(alone, parse_lies(["a=weight:0"]), 8).workload
    assert depth.apps[0].progress_weight == 0.0

    def first_start(runs: list, job_id: str) -> float:
        return min(start for start, _, job, _ in runs if job == job_id)

    assert first_start(schedule(alone), "a2") == 40.0
    runs = schedule(depth)
    assert first_start(runs, "a2") == 100.0
    assert (90.0, 140.0, "a1", (0,)) in runs
