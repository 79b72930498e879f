"""What schedulers know (DESIGN §9): estimates instead of the truth, restart costs, and
successive halving decided online at the rungs. Hand-derived where a number is checked.

Model ``toy``: one iteration takes 1 s on one GPU.
"""

from __future__ import annotations

import pytest

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.knowledge import declared, error_factor
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec, LossCurve, Search, Workload
from themis.policies import PolicyOptions, make_policy
from themis.policies.base import Policy, Schedule, SchedulingView
from themis.reports.metrics import summarize
from themis.simulator.engine import Conditions, simulate

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def toy(*apps: AppSpec, curves: dict | None = None) -> Workload:
    return Workload(tuple(apps), {"toy": TOY}, "hand", curves=curves or {})


# -- estimates -----------------------------------------------------------------------------


def test_error_factors_are_seeded_per_job_and_bounded() -> None:
    a = [error_factor(0.2, 7, "app", f"j{k}") for k in range(200)]
    assert a == [error_factor(0.2, 7, "app", f"j{k}") for k in range(200)]
    assert a != [error_factor(0.2, 8, "app", f"j{k}") for k in range(200)]
    assert all(0.8 <= f <= 1.2 for f in a) and min(a) < 0.85 and max(a) > 1.15
    spec = AppSpec("a", 0.0, "toy", (JobSpec("j", 1, 100.0),))
    assert declared(spec, 0.0, 7) is spec  # no error: the very same object


def test_policy_sees_declared_work_and_the_job_runs_its_true_work() -> None:
    """FIFO on one GPU, one job of 100 true iterations: it ends at 100 whatever was
    declared; what the policy read was the declared work."""
    seen: list[float] = []

    class Spy(Policy):
        name = "spy"

        def schedule(self, view: SchedulingView) -> Schedule:
            for app in view.apps:
                seen.extend(j.spec.work for j in app.jobs)
                seen.extend(j.remaining_at(view.now) for j in app.jobs)
            return make_policy("fifo", self.options).schedule(view)

    spec = AppSpec("a", 0.0, "toy", (JobSpec("j", 1, 100.0),))
    r = simulate(
        toy(spec),
        Cluster.from_spec("1x1x1"),
        Spy(PolicyOptions(seed=3)),
        conditions=Conditions(0.5, 0.0),
    )
    factor = error_factor(0.5, 3, "a", "j")
    assert factor != 1.0
    assert r.apps[0].finish == approx(100.0)
    assert seen[:2] == [approx(100.0 * factor), approx(100.0 * factor)]
    assert r.apps[0].t_cluster == approx(100.0)  # the report's T_cluster: the truth


def test_bad_conditions_are_user_errors() -> None:
    with pytest.raises(ThemisError, match="estimate-error"):
        Conditions(1.0, 0.0).check()
    with pytest.raises(ThemisError, match="restart-cost"):
        Conditions(0.0, -1.0).check()


# -- restart cost --------------------------------------------------------------------------


def test_restart_cost_is_charged_once_per_start_and_resume() -> None:
    """SRTF on one GPU, restart cost 5 s. A (100 it) arrives at 0; B (10 it) at 20.
    A: starts at 0, restarts until 5, runs 15 it by 20, preempted (85 left).
    B: starts at 20, restarts until 25, ends at 35.
    A: resumes at 35, restarts until 40, ends at 40 + 85 = 125.
    GPU-time held: A 20 + 90, B 15 = 125 s: restarts included, each once."""
    a = AppSpec("A", 0.0, "toy", (JobSpec("a", 1, 100.0),))
    b = AppSpec("B", 20.0, "toy", (JobSpec("b", 1, 10.0),))
    r = simulate(
        toy(a, b),
        Cluster.from_spec("1x1x1"),
        make_policy("srtf", PolicyOptions()),
        conditions=Conditions(0.0, 5.0),
    )
    assert {x.app_id: x.finish for x in r.apps} == {"A": approx(125.0), "B": approx(35.0)}
    assert sorted((i.start, i.end, i.job_id) for i in r.intervals) == [
        (0.0, 20.0, "a"),
        (20.0, 35.0, "b"),
        (35.0, 125.0, "a"),
    ]
    assert summarize(r).gpu_hours == approx(125.0 / 3600)
    # Without the cost: A 0-20 (20 done), B 20-30, A 30-110.
    free = simulate(toy(a, b), Cluster.from_spec("1x1x1"), make_policy("srtf", PolicyOptions()))
    assert {x.app_id: x.finish for x in free.apps} == {"A": approx(110.0), "B": approx(30.0)}


def test_a_job_that_keeps_its_gpus_pays_no_restart() -> None:
    """Themis renews a lone app's lease on the same GPUs: one start, one restart."""
    a = AppSpec("A", 0.0, "toy", (JobSpec("a", 1, 1000.0),))
    r = simulate(
        toy(a),
        Cluster.from_spec("1x1x1"),
        make_policy("themis", PolicyOptions(lease=100.0)),
        conditions=Conditions(0.0, 7.0),
    )
    assert r.apps[0].finish == approx(1007.0)


# -- online successive halving -------------------------------------------------------------

SEARCH = Search(eta=2, min_work=10.0)


def search_app(curves: list[LossCurve]) -> tuple[AppSpec, dict]:
    """4 one-GPU trials of 40 iterations; rungs at 10 and 20."""
    jobs = tuple(JobSpec(f"t{k}", 1, 40.0) for k in range(len(curves)))
    spec = AppSpec("S", 0.0, "toy", jobs, SEARCH)
    return spec, {("S", f"t{k}"): c for k, c in enumerate(curves)}


def flat(loss: float) -> LossCurve:
    return LossCurve(loss, 0.0, 0.5)


def test_trials_stop_at_their_rung_and_never_run_past_it() -> None:
    """4 GPUs, 4 trials: all reach rung 10 at t=10; t1, t3 (worst) stop there; t0, t2
    pause, resume and reach rung 20 at t=20 where t2 stops; t0 runs to 40."""
    spec, curves = search_app([flat(0.1), flat(0.4), flat(0.2), flat(0.3)])
    r = simulate(
        toy(spec, curves=curves), Cluster.from_spec("1x1x4"), make_policy("fifo", PolicyOptions())
    )
    ran: dict[str, float] = {}
    for i in r.intervals:
        ran[i.job_id] = ran.get(i.job_id, 0.0) + (i.end - i.start)
    assert ran == {"t0": approx(40.0), "t1": approx(10.0), "t2": approx(20.0), "t3": approx(10.0)}
    assert r.apps[0].finish == approx(40.0)
    # The report's T_cluster is that of the work done: 80 iterations on 4 GPUs, longest 40.
    assert r.apps[0].t_cluster == approx(40.0)


def test_a_paused_trial_waits_for_its_rung_without_gpus() -> None:
    """2 GPUs, 4 trials: t0, t1 reach rung 10 at t=10 and pause (no demand), t2, t3 run
    10-20; the rung is decided at 20 (best two: t3, t1)."""
    spec, curves = search_app([flat(0.4), flat(0.2), flat(0.3), flat(0.1)])
    r = simulate(
        toy(spec, curves=curves), Cluster.from_spec("1x1x2"), make_policy("fifo", PolicyOptions())
    )
    first = sorted((i.start, i.end, i.job_id) for i in r.intervals)[:4]
    assert first == [(0.0, 10.0, "t0"), (0.0, 10.0, "t1"), (10.0, 20.0, "t2"), (10.0, 20.0, "t3")]
    later = {i.job_id for i in r.intervals if i.start >= 20.0}
    assert later == {"t1", "t3"}


def _reachable(root: object) -> list[object]:
    """Every object reachable from ``root`` through attributes, slots, containers and the
    objects behind bound methods and closures."""
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None), type)):
            continue
        seen[id(obj)] = obj
        if isinstance(obj, dict):
            stack += list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack += list(obj)
        if hasattr(obj, "__self__"):
            stack.append(obj.__self__)
        closure = getattr(obj, "__closure__", None)
        if closure:
            stack += [c.cell_contents for c in closure]
        if hasattr(obj, "__dict__"):
            stack += list(vars(obj).values())
        for cls in type(obj).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(obj, slot):
                    stack.append(getattr(obj, slot))
    return list(seen.values())


def test_no_policy_can_read_a_trials_fate() -> None:
    """Two searches that differ only in their loss curves (so in which trials stop) give
    policies identical views up to the first rung, and no loss curve is reachable from
    what a policy is handed."""
    views: list[list] = []

    class Recorder(Policy):
        name = "recorder"

        def schedule(self, view: SchedulingView) -> Schedule:
            reach = _reachable(view)
            assert not any(isinstance(o, (LossCurve, Workload)) for o in reach)
            snap = [
                (j.job_id, j.spec, j.done, j.gpus, j.finished_at, j.remaining_at(view.now))
                for a in view.apps
                for j in a.jobs
            ]
            views[-1].append((view.now, snap, [a.spec for a in view.apps]))
            return make_policy("fifo", self.options).schedule(view)

    fates = []
    for losses in ([0.1, 0.4, 0.2, 0.3], [0.4, 0.1, 0.3, 0.2]):
        views.append([])
        spec, curves = search_app([flat(x) for x in losses])
        r = simulate(
            toy(spec, curves=curves), Cluster.from_spec("1x1x2"), Recorder(PolicyOptions())
        )
        fates.append({i.job_id for i in r.intervals if i.start >= 20.0})
    assert fates[0] != fates[1]
    before_rung = [[v for v in run if v[0] < 20.0] for run in views]
    assert before_rung[0] == before_rung[1] and before_rung[0]


def test_generated_search_apps_run_under_every_policy_the_same_for_a_seed() -> None:
    from themis.workload.generator import GeneratorSpec, generate
    from themis.workload.profiles_file import load_profiles_file

    profiles, _ = load_profiles_file(None)
    spec = GeneratorSpec(jobs=24, seed=2, load=1.5, gpus=8, max_trials=8, online_halving=1)
    w = generate(spec, profiles)
    assert all(a.search is not None for a in w.apps) and w.curves
    cluster = Cluster.from_spec("1x2x4")
    for name in ("themis", "srtf", "tiresias", "gandiva", "optimus", "slaq", "max-min"):
        runs = [
            simulate(
                w,
                cluster,
                make_policy(name, PolicyOptions(seed=2)),
                conditions=Conditions(0.2, 30.0),
            )
            for _ in range(2)
        ]
        assert [a.finish for a in runs[0].apps] == [a.finish for a in runs[1].apps]
        for app in runs[0].apps:
            budget = app.spec.jobs[0].work  # declared: the truth times its error factor
            assert app.finish is not None and budget > 0


def test_search_work_is_the_same_whichever_trials_stop() -> None:
    """4 trials, budget 40, rungs 10 and 20: 4 x 10, then 2 x 10, then 1 x 20."""
    assert SEARCH.total_work(4, 40.0) == 80.0
    assert SEARCH.total_work(5, 80.0) == 5 * 10 + 3 * 10 + 2 * 20 + 1 * 40
    for losses in ([0.1, 0.4, 0.2, 0.3], [0.4, 0.1, 0.3, 0.2]):
        spec, curves = search_app([flat(x) for x in losses])
        r = simulate(toy(spec, curves=curves), Cluster.from_spec("1x1x2"),
                     make_policy("fifo", PolicyOptions()))  # fmt: skip
        assert sum(i.end - i.start for i in r.intervals) == approx(80.0)


def test_generated_searches_keep_the_draws_and_the_load() -> None:
    from themis.workload.generator import GeneratorSpec, generate
    from themis.workload.profiles_file import load_profiles_file

    profiles, _ = load_profiles_file(None)
    folded, online = (
        generate(GeneratorSpec(jobs=300, seed=4, load=1.5, online_halving=h), profiles)
        for h in (0, 1)
    )
    assert [(a.model, len(a.jobs), a.jobs[0].gang) for a in folded.apps] == [
        (a.model, len(a.jobs), a.jobs[0].gang) for a in online.apps
    ]
    assert online.offered_load(64) == pytest.approx(folded.offered_load(64), rel=1e-9)
    assert all(len({j.work for j in a.jobs}) == 1 for a in online.apps)  # one budget each


def test_a_job_past_its_declared_work_is_believed_to_have_a_tenth_left() -> None:
    """Declared 100 iterations, truly 150: from progress 100 on, policies see 10 left (not
    0, which would make size-aware policies starve it), until it ends at its true 150."""
    from themis.model.state import AppState

    spec = AppSpec("a", 0.0, "toy", (JobSpec("j", 1, 100.0),))
    app = AppState(spec, TOY, 1.0)
    job = app.jobs[0]
    job.start((0,), 1.0, 0.0)
    assert job.remaining_at(60.0) == approx(40.0)
    assert job.remaining_at(120.0) == approx(10.0)
    assert app.remaining_by_gang(120.0)[1].total == approx(10.0)
    job.stop(120.0, True)
    assert job.remaining_at(130.0) == approx(10.0)
    assert app.remaining_by_gang(130.0)[1].total == approx(10.0)
    job.finish(150.0)
    assert job.remaining_at(150.0) == 0.0
