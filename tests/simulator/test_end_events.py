"""A job's end event is queued only once it can happen (``Simulator._later_ends``).

An end that falls after the job's grant ends waits for the round that ends the grant; a
job stopped before its end leaves only the time (``_ghosts``), which still counts in the
batching of one instant. The schedule is the one made with every end queued at its start
(``_LATER`` infinite: the simulator before this book), to the last bit.
"""

from __future__ import annotations

import math

import pytest

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile, load_profiles
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions, make_policy
from themis.policies.base import Assignment, Changes, Policy, Schedule, SchedulingView
from themis.simulator import engine
from themis.simulator.engine import Conditions, SimulationResult, simulate
from themis.workload.generator import GeneratorSpec, generate

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)


def _outcome(result: SimulationResult) -> tuple[object, ...]:
    return (
        result.rounds,
        [(i.start, i.end, i.app_id, i.job_id, i.gpus, i.best_span) for i in result.intervals],
        [(a.app_id, a.finish) for a in result.apps],
    )


def _both(
    monkeypatch: pytest.MonkeyPatch, run: object
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    kept = _outcome(run())  # type: ignore[operator]
    monkeypatch.setattr(engine, "_LATER", math.inf)  # every end queued at its start
    queued = _outcome(run())  # type: ignore[operator]
    return kept, queued


@pytest.mark.parametrize(
    ("policy", "spec", "cluster", "conditions"),
    [
        # Time slices: nearly every start is stopped a slice later (the dead ends).
        ("gandiva", GeneratorSpec(jobs=300, seed=3, gpus=16, load=2.0), "1x2x8", Conditions()),
        # Leases renewed in place and handed on, with restart costs.
        (
            "themis",
            GeneratorSpec(jobs=300, seed=3, gpus=16, load=2.0),
            "1x2x8",
            Conditions(0.2, 30.0),
        ),
        ("tiresias", GeneratorSpec(jobs=300, seed=5, gpus=32, load=1.5), "1x4x8", Conditions()),
        # Searches decided online: a run ends at a rung, not at the job's end.
        (
            "themis",
            GeneratorSpec(jobs=200, seed=7, gpus=32, online_halving=1),
            "1x4x8",
            Conditions(),
        ),
    ],
)
def test_the_schedule_is_the_one_with_every_end_queued(
    monkeypatch: pytest.MonkeyPatch,
    policy: str,
    spec: GeneratorSpec,
    cluster: str,
    conditions: Conditions,
) -> None:
    workload = generate(spec, load_profiles())

    def run() -> SimulationResult:
        return simulate(
            workload,
            Cluster.from_spec(cluster),
            make_policy(policy, PolicyOptions()),
            conditions=conditions,
        )

    kept, queued = _both(monkeypatch, run)
    assert kept[0] > 100  # type: ignore[operator]
    assert kept == queued


#: After this, the hand policies grant nothing: a simulator that lost a job's end fails
#: its run ("every GPU idle with work waiting") instead of renewing grants forever.
_GIVE_UP = 1_000.0


def _first_grants(view: SchedulingView, grant: float) -> Schedule:
    """A ``grant`` s grant for each waiting job, on the lowest free GPUs."""
    if view.now >= _GIVE_UP:
        return {}
    held = {g for app in view.apps for job in app.jobs for g in job.gpus}
    free = iter(g for g in range(view.cluster.size) if g not in held)
    return {
        job: Assignment(tuple(next(free) for _ in range(job.gang)), view.now + grant)
        for app in view.apps
        for job in app.jobs
        if job.finished_at is None and not job.gpus
    }


class _Renewing(Policy):
    """Grants 60 s (longer than the 30 s batching window, so that a renewed grant does
    not end within the round's window) and renews every running job's grant at each
    round."""

    name = "renewing"
    grant = 60.0

    def schedule(self, view: SchedulingView) -> Schedule:
        out = {
            job: Assignment(job.gpus, view.now + self.grant)
            for app in view.apps
            for job in app.jobs
            if job.gpus and view.now < _GIVE_UP
        }
        out.update(_first_grants(view, self.grant))
        return out


class _Silent(Policy):
    """Grants each waiting job 10 s and afterwards changes nothing: a job whose grant
    ended runs on (an incremental policy's round that neither stops nor renews it)."""

    name = "silent"
    incremental = True

    def schedule(self, view: SchedulingView) -> Schedule:  # pragma: no cover - unused
        raise AssertionError("the simulator asks for changes")

    def changes(self, view: SchedulingView) -> Changes:
        return Changes(start=_first_grants(view, 10.0))


@pytest.mark.parametrize("policy", [_Silent, _Renewing])
def test_a_job_running_past_its_grant_still_ends_on_time(
    policy: type[Policy],
) -> None:
    """Hand schedule (``toy``: 1 s per iteration on one GPU): a 200 s job and a 35 s job on
    two GPUs. Whether the policy renews the grants or lets them lapse with the jobs
    running, each job runs once, to its end: 200 s and 35 s."""
    apps = (
        AppSpec("a", 0.0, "toy", (JobSpec("a0", 1, 200.0),)),
        AppSpec("b", 0.0, "toy", (JobSpec("b0", 1, 35.0),)),
    )
    result = simulate(
        Workload(apps, {"toy": TOY}, "hand"),
        Cluster.from_spec("1x1x2"),
        policy(PolicyOptions()),
    )
    finishes = {a.app_id: a.finish for a in result.apps}
    assert finishes == {"a": pytest.approx(200.0), "b": pytest.approx(35.0)}
    assert sorted((i.job_id, i.start, i.end) for i in result.intervals) == [
        ("a0", 0.0, pytest.approx(200.0)),
        ("b0", 0.0, pytest.approx(35.0)),
    ]
