"""The books a mechanism that tracks no changes hands its views (``mechanism/books.py``),
and the policy contract that reads them: a policy defines ``changes`` or ``schedule`` and
the base class derives the other (``mechanism/diff.py``, ``as_schedule``)."""

from __future__ import annotations

import pytest

from themis.mechanism.books import ViewBooks, has_books
from themis.mechanism.diff import as_schedule
from themis.mechanism.pool import FreePool
from themis.mechanism.view import Assignment, Changes, SchedulingView
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec
from themis.policies import PolicyOptions, make_policy
from themis.policies.base import Policy

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
CLUSTER = Cluster.from_spec("1x2x4")  # 8 GPUs


def _app(app_id: str, arrival: float, gangs: tuple[int, ...] = (2, 1)) -> AppState:
    jobs = tuple(JobSpec(f"{app_id}{k}", g, 100.0) for k, g in enumerate(gangs))
    return AppState(AppSpec(app_id, arrival, "toy", jobs), TOY, 100.0)


def _view(apps: list[AppState], cluster: Cluster = CLUSTER, now: float = 0.0) -> SchedulingView:
    return SchedulingView(now, cluster, apps, lambda app: float(len(apps)))


def test_ranks_stay_put_and_new_apps_rank_after_the_others() -> None:
    books = ViewBooks()
    a, b, c = _app("a", 0.0), _app("b", 1.0), _app("c", 2.0)
    first = books.fill(_view([a, b]))
    assert has_books(first) and first.order == {a: 0, b: 1}
    second = books.fill(_view([b, c]))
    assert second.order is first.order  # one dict: a policy's own books carry on
    assert second.order[b] == 1 and second.order[c] == 2


def test_every_app_is_changed_and_one_that_left_is_named_once() -> None:
    books = ViewBooks()
    a, b = _app("a", 0.0), _app("b", 1.0)
    assert books.fill(_view([a, b])).changed == {a, b}
    a.finish = 5.0
    assert books.fill(_view([b])).changed == {a, b}  # a left: a policy must hear it
    assert books.fill(_view([b])).changed == {b}


def test_the_pool_is_the_free_gpus_and_fresh_each_round() -> None:
    books = ViewBooks()
    a = _app("a", 0.0)
    a.jobs[0].start((0, 1), 1.0, 0.0)
    view = books.fill(_view([a]))
    assert isinstance(view.free, FreePool) and set(view.free) == set(range(2, 8))
    view.free.take(4)  # a policy carves from it
    assert set(books.fill(_view([a])).free or ()) == set(range(2, 8))


def test_another_cluster_or_an_order_it_cannot_keep_starts_afresh() -> None:
    books = ViewBooks()
    a, b = _app("a", 0.0), _app("b", 1.0)
    first = books.fill(_view([a, b]))
    small = Cluster.from_spec("1x1x4")
    other = books.fill(_view([a, b], small))
    assert other.order is not first.order and other.order == {a: 0, b: 1}
    swapped = books.fill(_view([b, a], small))  # b before a: ranks that cannot be kept
    assert swapped.order is not other.order and swapped.order == {b: 0, a: 1}


def test_a_view_with_books_is_left_alone() -> None:
    view = ViewBooks().fill(_view([_app("a", 0.0)]))
    assert ViewBooks().fill(view) is view


def test_changes_read_as_the_full_schedule() -> None:
    a = _app("a", 0.0, (2, 1, 1))
    run, stop, wait = a.jobs
    run.start((0, 1), 1.0, 0.0)
    stop.start((2,), 1.0, 0.0)
    changes = Changes([stop], {wait: Assignment((3,), 60.0)})
    assert as_schedule([run, stop], changes) == {
        run: Assignment((0, 1), None),
        wait: Assignment((3,), 60.0),
    }
    moved = Changes([], {run: Assignment((4, 5), 30.0)})  # a running job restarted elsewhere
    assert list(as_schedule([run, stop], moved)) == [stop, run]


def test_a_policy_written_as_changes_answers_the_full_schedule_the_same() -> None:
    """LAS defines only ``changes``: its ``schedule`` of a bare view is the same round."""
    apps = [_app("a", 0.0, (4, 2)), _app("b", 1.0, (2, 2, 4))]
    las = make_policy("las", PolicyOptions())
    assert las.incremental and type(las).schedule is Policy.schedule
    schedule = las.schedule(_view(apps))
    changes = make_policy("las", PolicyOptions()).changes(_view(apps))
    assert schedule == changes.start and not changes.stop
    assert sorted(g for a in schedule.values() for g in a.gpus) == list(range(8))


def test_a_policy_must_define_one_of_the_two() -> None:
    class Neither(Policy):
        name = "neither"

    with pytest.raises(TypeError, match="must define schedule or changes"):
        Neither(PolicyOptions())
    assert not Neither.incremental


def test_incremental_is_which_of_the_two_a_policy_defines() -> None:
    assert make_policy("fifo", PolicyOptions()).incremental
    assert not make_policy("optimus", PolicyOptions()).incremental


def test_an_app_that_left_is_forgotten_after_the_round_that_names_it() -> None:
    """A long-lived runtime must not keep every app it ever ran."""
    books = ViewBooks()
    a, b, c = _app("a", 0.0), _app("b", 1.0), _app("c", 2.0)
    books.fill(_view([a, b]))
    a.finish = 5.0
    assert a in books.fill(_view([b])).order
    view = books.fill(_view([b, c]))
    assert a not in view.order and view.order[c] > view.order[b]
