"""AppState keeps its caches up to date job by job: after any sequence of starts, stops
and finishes they must equal a rebuild from scratch, float for float."""

from __future__ import annotations

import heapq
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis.agent.app_scheduler import _merge, waiting_order
from themis.model.knowledge import OVERRUN_SHARE
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, JobSpec

PROFILE = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)


def _app(rng: random.Random, jobs: int, order_factor: float = 1.0) -> AppState:
    specs = tuple(
        JobSpec(f"j{k}", rng.choice((1, 1, 2, 4)), float(rng.choice((100, 100, 250, 777))))
        for k in range(jobs)
    )
    return AppState(AppSpec("a", 0.0, "toy", specs), PROFILE, 1.0, order_factor)


def _view(app: AppState, now: float) -> tuple:
    return (
        [j.job_id for j in app.idle_jobs()],
        [j.job_id for j in app.running_jobs()],
        app.demand(),
        app.held(),
        app.remaining_by_gang(now),
    )


def _rebuilt(app: AppState, now: float) -> tuple:
    app.touch()  # forces the full rebuild
    return _view(app, now)


def test_incremental_caches_equal_a_rebuild() -> None:
    rng = random.Random(3)
    for case in range(30):
        # every third app orders its own trials by half its declared work (``order``)
        app = _app(rng, rng.randint(1, 25), 0.5 if case % 3 == 0 else 1.0)
        now = 0.0
        next_gpu = 0
        for _ in range(60):
            now += rng.uniform(0.0, 20.0)
            job: JobState = rng.choice(app.jobs)
            if job.finished_at is not None:
                continue
            action = rng.random()
            if job.gpus and action < 0.5:
                job.stop(now, best=True)
            elif job.gpus and action < 0.6:
                job.stop(now, best=False)
                job.finish(now)
            elif not job.gpus and action < 0.9:
                gpus = tuple(range(next_gpu, next_gpu + job.gang))
                next_gpu += job.gang
                job.start(gpus, rate=rng.choice((0.5, 1.0, 2.0)), now=now)
            elif not job.gpus:
                job.finish(now)
            if rng.random() < 0.5:  # caches read now and then, not after every change
                assert _view(app, now) == _rebuilt(app, now)
        assert _view(app, now) == _rebuilt(app, now)


def test_idle_order_is_longest_remaining_first_then_submission_order() -> None:
    specs = tuple(JobSpec(f"j{k}", 1, w) for k, w in enumerate((50.0, 80.0, 50.0, 80.0)))
    app = AppState(AppSpec("a", 0.0, "toy", specs), PROFILE, 1.0)
    assert [j.job_id for j in app.idle_jobs()] == ["j1", "j3", "j0", "j2"]
    j1 = app.jobs[1]
    j1.start((0,), rate=1.0, now=0.0)
    j1.stop(30.0, best=True)  # 50 left, as j0 and j2: between them, in submission order
    assert [j.job_id for j in app.idle_jobs()] == ["j3", "j0", "j1", "j2"]
    work = app.remaining_by_gang(30.0)[1]
    assert (work.total, work.longest, work.jobs) == (230.0, 80.0, 4)


def test_an_order_strategy_reorders_the_trials_and_reports_the_truth() -> None:
    """``order_factor`` 0.5: the app orders its trials as a liar declaring half its work
    would. j0 (100 declared) has made 30: honestly 70 left, ahead of j1's 60; to the liar
    50 - 30 = 20, behind j1's 30. Idle or running, the order follows the factor; what the
    arbiter reads (``remaining_by_gang``) is the honest declaration either way."""
    specs = (JobSpec("j0", 1, 100.0), JobSpec("j1", 1, 60.0))
    honest = AppState(AppSpec("a", 0.0, "toy", specs), PROFILE, 1.0)
    strategic = AppState(AppSpec("a", 0.0, "toy", specs), PROFILE, 1.0, order_factor=0.5)
    for app in (honest, strategic):
        app.jobs[0].start((0,), rate=1.0, now=0.0)
        assert [j.job_id for j in waiting_order(app, 30.0)] == (
            ["j0", "j1"] if app is honest else ["j1", "j0"]
        )
        app.jobs[0].stop(30.0, best=True)
    assert [j.job_id for j in honest.idle_jobs()] == ["j0", "j1"]
    assert [j.job_id for j in strategic.idle_jobs()] == ["j1", "j0"]
    assert honest.remaining_by_gang(30.0) == strategic.remaining_by_gang(30.0)
    assert honest.remaining_by_gang(30.0)[1] == (130.0, 70.0, 2)
    # Past the liar's half, a live trial is believed to have OVERRUN_SHARE of it left.
    j0 = strategic.jobs[0]
    j0.start((0,), rate=1.0, now=30.0)
    assert j0.order_remaining_at(60.0) == OVERRUN_SHARE * 50.0  # made 60 > 50
    assert j0.remaining_at(60.0) == 40.0


@pytest.mark.parametrize(
    ("weight", "order"),
    [(1.0, ["j2", "j0", "j1"]), (0.0, ["j0", "j2", "j1"]), (2.0, ["j2", "j1", "j0"])],
)
def test_a_progress_weight_orders_the_trials_as_declared(weight: float, order: list) -> None:
    """j0 (100 declared) has made 45, j1 (60) has made 15, j2 (70) nothing. By declared
    work minus ``weight`` times work made: weight 1 gives 55, 45, 70 (longest remaining
    first); 0 gives 100, 60, 70 (longest trial first, progress ignored); 2 gives 10, 30,
    70 (fresh before partly run, least made first). Idle or running the order is the
    same, and the arbiter reads the same declared work whatever the weight."""
    specs = (JobSpec("j0", 1, 100.0), JobSpec("j1", 1, 60.0), JobSpec("j2", 1, 70.0))
    app = AppState(AppSpec("a", 0.0, "toy", specs, progress_weight=weight), PROFILE, 1.0)
    plain = AppState(AppSpec("a", 0.0, "toy", specs), PROFILE, 1.0)
    for state in (app, plain):
        state.jobs[0].start((0,), rate=1.0, now=0.0)
        state.jobs[1].start((1,), rate=1.0, now=30.0)
    assert [j.job_id for j in waiting_order(app, 45.0)] == order
    for state in (app, plain):
        state.jobs[0].stop(45.0, best=True)
        state.jobs[1].stop(45.0, best=True)
    assert [j.job_id for j in app.idle_jobs()] == order
    assert app.remaining_by_gang(45.0) == plain.remaining_by_gang(45.0)


def test_a_progress_weight_of_two_is_the_order_of_a_liar_declaring_half() -> None:
    """Declared work minus twice the work made is half of (half the work minus the work
    made): the order ``order:0.5`` (a ``work:0.5`` liar's scheduler) gives, so an honest
    app can choose it. Under Themis the whole schedule is the same to the last bit (a
    power of two scales without rounding)."""
    import dataclasses

    from themis.experiments.workloads import generated_workload
    from themis.model.cluster import Cluster
    from themis.model.workload import Workload
    from themis.policies import make_policy
    from themis.simulator.engine import Conditions, simulate
    from themis.workload import load_workload

    cluster = Cluster.from_spec("1x2x4")
    profiles = load_workload().profiles
    w = generated_workload("generate:jobs=120,load=1.5", cluster, profiles, 5)
    target = "app6"
    weighted = Workload(
        tuple(
            dataclasses.replace(a, progress_weight=2.0) if a.app_id == target else a for a in w.apps
        ),
        w.profiles,
    )
    honest = simulate(w, cluster, make_policy("themis"))
    ordered = simulate(
        w, cluster, make_policy("themis"), conditions=Conditions(orders=((target, 0.5),))
    )
    chosen = simulate(weighted, cluster, make_policy("themis"))

    def schedule(result):
        return [(i.start, i.end, i.app_id, i.job_id, i.gpus) for i in result.intervals]

    assert schedule(chosen) == schedule(ordered)
    assert schedule(chosen) != schedule(honest)  # the order matters on this workload


def test_done_by_gang_counts_observed_progress_not_declarations() -> None:
    """A trial declared at 100 iterations that ran 150 before it ended counts 150 (what
    the arbiter saw); a running 2-GPU trial counts what it made by the time asked."""
    from themis.model.profiles import ModelProfile
    from themis.model.state import AppState, GangWork
    from themis.model.workload import AppSpec, JobSpec

    spec = AppSpec("a", 0.0, "toy", (JobSpec("j0", 1, 100.0), JobSpec("j1", 2, 500.0)))
    app = AppState(spec, ModelProfile("toy", 1.0, 1.0, 1.0), 1.0)
    short, long = app.jobs
    short.start((0,), 1.0, 0.0)
    long.start((1, 2), 2.0, 0.0)
    short.stop(150.0, True)
    short.finish(150.0)
    assert short.done == 100.0 and short.observed == 150.0
    assert app.done_by_gang(200.0) == {1: GangWork(150.0, 150.0, 1), 2: GangWork(400.0, 400.0, 1)}
    assert app.done_by_gang(0.0) == {1: GangWork(150.0, 150.0, 1)}  # nothing made yet: left out


@pytest.mark.pure_only  # plain objects for JobState: the compiled merge checks the type
@given(
    st.lists(st.integers(0, 6), max_size=12),
    st.lists(st.integers(0, 6), max_size=12),
)
def test_the_waiting_merge_is_heapq_merge_ties_to_idle_jobs(idle: list, running: list) -> None:
    """``waiting_order``'s two-way merge yields what ``heapq.merge`` did, the idle job
    first on equal remaining work (many trials of a sweep tie)."""
    idle_jobs = [object() for _ in idle]
    running_jobs = [object() for _ in running]
    work = dict(zip(idle_jobs, sorted(idle, reverse=True), strict=True))
    work.update(zip(running_jobs, sorted(running, reverse=True), strict=True))

    def left(job: object, now: float) -> float:
        return float(work[job])

    expected = list(heapq.merge(idle_jobs, running_jobs, key=lambda j: -left(j, 0.0)))
    keyed = [(-left(j, 0.0), j) for j in running_jobs]
    got = list(_merge(iter(idle_jobs), keyed, left, 0.0))  # type: ignore[arg-type]
    assert got == expected
