"""The rules every schedule keeps (``mechanism/checks.py``), asserted three ways: hand cases
for each rule, and on random schedules the runtime's full check, the simulator's check of
the moves (with its book of which job holds each GPU) and its check of a round given as
changes all agree with a brute-force reading of the rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.mechanism.checks import check_changes, check_moves, check_schedule
from themis.mechanism.view import Assignment, Changes, Schedule
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, JobState
from themis.model.workload import AppSpec, JobSpec

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
CLUSTER = Cluster.from_spec("1x2x4")  # 8 GPUs
#: (gang, GPUs it runs on now, or None; finished?) per job of apps "a" and "b"
JOBS = {
    "a": [(2, (0, 1), False), (2, None, False), (1, None, False), (1, None, True)],
    "b": [(4, (2, 3, 4, 5), False), (1, None, False), (3, None, False)],
}


def _state() -> tuple[list[AppState], list[JobState], dict[int, JobState]]:
    apps, jobs, holder = [], [], {}
    for app_id, rows in JOBS.items():
        spec = AppSpec(
            app_id,
            0.0,
            "toy",
            tuple(JobSpec(f"{app_id}{k}", g, 100.0) for k, (g, _, _) in enumerate(rows)),
        )
        app = AppState(spec, TOY, 100.0)
        for job, (_, gpus, finished) in zip(app.jobs, rows, strict=True):
            if gpus is not None:
                job.start(gpus, 1.0, 0.0)
                holder.update(dict.fromkeys(gpus, job))
            if finished:
                job.finish(0.0)
        apps.append(app)
        jobs += app.jobs
    return apps, jobs, holder


def _changes(schedule: Schedule, jobs: list[JobState]) -> Changes:
    """The round ``schedule`` is, as changes (``Policy.changes``'s default)."""
    stop = [j for j in jobs if j.gpus and j not in schedule]
    start = {
        j: a
        for j, a in schedule.items()
        if not (j.gpus and a.gpus == j.gpus and a.until == j.until)
    }
    return Changes(stop, start)


def _verdicts(schedule: Schedule) -> list[str | None]:
    """What each of the three checks says of ``schedule`` (None: accepted)."""
    apps, jobs, holder = _state()
    by_id = {j.job_id: j for j in jobs}
    mapped = {by_id[j.job_id]: a for j, a in schedule.items()}
    out: list[str | None] = []
    for check in (
        lambda: check_schedule(mapped, apps, CLUSTER),
        lambda: check_moves(mapped, apps, CLUSTER.size, holder),
        lambda: check_changes(_changes(mapped, jobs), CLUSTER.size, holder),
    ):
        try:
            check()
            out.append(None)
        except AssertionError as broken:
            out.append(str(broken))
    return out


def _job(job_id: str) -> JobState:
    return {j.job_id: j for j in _state()[1]}[job_id]


@pytest.mark.parametrize(
    ("grants", "error"),
    [
        ({"a0": (0, 1), "b0": (2, 3, 4, 5), "a1": (6, 7)}, None),
        ({"a1": (6, 7), "b1": (0,)}, None),  # a0 and b0 stop: their GPUs are free
        ({"a1": (6, 6)}, "policy granted GPU 6 twice or out of range"),
        ({"a1": (7, 8)}, "policy granted GPU 8 twice or out of range"),
        ({"a0": (0, 1), "a1": (1, 6)}, "policy granted GPU 1 twice or out of range"),
        ({"a1": (6,)}, "policy gave a1 1 GPUs for a gang of 2"),
        ({"a3": (6,)}, "policy scheduled a3, which cannot run"),
    ],
)
def test_each_rule_by_hand(grants: dict[str, tuple[int, ...]], error: str | None) -> None:
    schedule = {_job(j): Assignment(g) for j, g in grants.items()}
    assert _verdicts(schedule) == [error] * 3


def test_a_stop_of_a_job_that_does_not_run_is_refused() -> None:
    apps, jobs, holder = _state()
    with pytest.raises(AssertionError, match="policy stopped a1, which does not run"):
        check_changes(Changes([jobs[1]]), CLUSTER.size, holder)


def test_a_job_of_an_app_no_longer_active_cannot_run() -> None:
    apps, jobs, holder = _state()
    schedule = {jobs[1]: Assignment((6, 7))}
    with pytest.raises(AssertionError, match="a1, which cannot run"):
        check_schedule(schedule, apps[1:], CLUSTER)
    with pytest.raises(AssertionError, match="a1, which cannot run"):
        check_moves(schedule, apps[1:], CLUSTER.size, holder)


def _brute(grants: dict[str, tuple[int, ...]]) -> bool:
    """The rules read literally: live jobs, exact gangs, every GPU in range and once."""
    gangs = {
        f"{a}{k}": (g, done) for a, rows in JOBS.items() for k, (g, _, done) in enumerate(rows)
    }
    used = [g for gpus in grants.values() for g in gpus]
    return (
        all(not gangs[j][1] and len(gpus) == gangs[j][0] for j, gpus in grants.items())
        and all(0 <= g < CLUSTER.size for g in used)
        and len(used) == len(set(used))
    )


ALL_JOBS = [f"{a}{k}" for a, rows in JOBS.items() for k in range(len(rows))]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(ALL_JOBS),
        st.lists(st.integers(0, 8), min_size=1, max_size=4).map(tuple),
        max_size=5,
    ),
    st.booleans(),
)
def test_the_three_checks_agree_with_the_rules(
    grants: dict[str, tuple[int, ...]], keep_running: bool
) -> None:
    if keep_running:  # the running jobs continue where they run unless moved above
        grants = {"a0": (0, 1), "b0": (2, 3, 4, 5), **grants}
    schedule = {_job(j): Assignment(g) for j, g in grants.items()}
    verdicts = _verdicts(schedule)
    assert [v is None for v in verdicts] == [_brute(grants)] * 3, verdicts
