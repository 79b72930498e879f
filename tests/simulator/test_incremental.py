"""Regression guard of the books a view carries (the simulator's, kept round to round: the
free pool, ``SchedulingView.changed``, the admission ranks, the grant-end book; and the
runtime's, filled afresh every round by ``mechanism.books.ViewBooks``): a policy makes
exactly the same run, bit for bit, whichever books it reads, and the pool carves exactly
the GPUs ``Packer`` would."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from themis.mechanism.books import ViewBooks
from themis.mechanism.pool import FreePool
from themis.model.cluster import Cluster
from themis.model.placement import Packer
from themis.model.profiles import load_profiles
from themis.policies import PolicyOptions, make_policy
from themis.policies.base import Changes, Policy, Schedule, SchedulingView
from themis.policies.themis import ThemisPolicy
from themis.simulator.engine import Conditions, SimulationResult, simulate
from themis.workload.generator import GeneratorSpec, generate

from .test_invariants import scenarios

INCREMENTAL = ["fifo", "max-min", "las", "srtf", "slaq", "gandiva", "tiresias", "themis"]


def _fingerprint(result: SimulationResult) -> tuple:
    return (
        result.rounds,
        [(i.start, i.end, i.app_id, i.job_id, i.gpus, i.best_span) for i in result.intervals],
        [(a.app_id, a.finish, a.t_cluster) for a in result.apps],
        sorted(result.n_avg.items()),
    )


def _as_the_runtime_asks(policy: str, options: PolicyOptions) -> Policy:
    """``policy`` asked as ``themis serve`` asks it: the full schedule, from views that
    carry none of the simulator's books, filled afresh every round by ``ViewBooks``."""
    cls = type(make_policy(policy, options))

    class AsTheRuntimeAsks(cls):  # type: ignore[valid-type, misc]
        incremental = False

        def __init__(self, options: PolicyOptions) -> None:
            super().__init__(options)
            self.runtime_books = ViewBooks()

        def schedule(self, view: SchedulingView) -> Schedule:
            bare = replace(view, free=None, changed=None, order=None, ending_grants=None)
            return super().schedule(self.runtime_books.fill(bare))

    return AsTheRuntimeAsks(options)


def _both(workload, cluster: Cluster, policy: str, options: PolicyOptions, **kw) -> tuple:
    fast = make_policy(policy, options)
    assert fast.incremental
    full = _as_the_runtime_asks(policy, options)
    return (
        _fingerprint(simulate(workload, cluster, fast, **kw)),
        _fingerprint(simulate(workload, cluster, full, **kw)),
    )


@pytest.mark.pure_only  # subclasses a compiled policy, whose methods refuse an interpreted subclass
@pytest.mark.parametrize("policy", INCREMENTAL)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_simulators_books_make_the_run_the_runtimes_make(policy: str, scenario: tuple) -> None:
    workload, cluster, options, window = scenario
    fast, full = _both(workload, Cluster.from_spec(cluster), policy, options, batch_window=window)
    assert fast == full


@pytest.mark.pure_only  # subclasses a compiled policy, whose methods refuse an interpreted subclass
@pytest.mark.parametrize("policy", INCREMENTAL)
@pytest.mark.parametrize(
    ("spec", "cluster", "conditions"),
    [
        (GeneratorSpec(jobs=600, seed=1, gpus=80), "1x10x8", Conditions()),
        (GeneratorSpec(jobs=500, seed=2, gpus=64, load=1.5), "2x4x8", Conditions(0.3, 30.0)),
        (GeneratorSpec(jobs=400, seed=3, gpus=64), "1x4x8:v100+1x4x8:k80", Conditions()),
    ],
)
def test_changes_on_generated_workloads(
    policy: str, spec: GeneratorSpec, cluster: str, conditions: Conditions
) -> None:
    """Larger runs (a backlog, preemptions, estimate errors, restart costs, GPU types)."""
    workload = generate(spec, load_profiles())
    fast, full = _both(
        workload, Cluster.from_spec(cluster), policy, PolicyOptions(), conditions=conditions
    )
    assert fast[0] > 100
    assert fast == full


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["1x1x8", "1x4x8", "2x4x8", "3x2x4", "4x3x2", "2x5x8"]),
    st.integers(0, 2**32 - 1),
)
def test_the_pool_carves_what_a_packer_would(spec: str, seed: int) -> None:
    """Random free sets changing over random rounds: each round's takes from the pool are
    a Packer's on the same free GPUs, and ``restore`` gives them back."""
    rng = random.Random(seed)
    cluster = Cluster.from_spec(spec)
    free = {g for g in range(cluster.size) if rng.random() < 0.5}
    pool = FreePool(cluster, free)
    for _ in range(8):
        assert set(pool) == free and len(pool) == len(free)
        packer = Packer(cluster, sorted(free))
        for _ in range(rng.randint(1, 6)):
            gang = rng.choice((1, 1, 2, 3, 4, 8, 12, 16))
            assert pool.take(gang) == packer.take(gang)
            assert len(pool) == len(packer)
        # drafted additions and removals: peeks as a Packer of the drafted set
        drafted = set(pool)
        for _ in range(rng.randint(0, 4)):
            some = rng.sample(range(cluster.size), rng.randint(0, 6))
            if rng.random() < 0.5:
                pool.draft_add(some)
                drafted.update(some)
            else:
                pool.draft_remove(some)
                drafted.difference_update(some)
            gang = rng.choice((1, 2, 4, 8))
            assert set(pool) == drafted
            assert pool.peek(gang) == Packer(cluster, drafted).peek(gang)
        pool.restore()
        assert set(pool) == free
        for g in rng.sample(range(cluster.size), rng.randint(0, cluster.size)):
            if g in free:
                free.discard(g)
                pool.remove(g)
            else:
                free.add(g)
                pool.add(g)


@pytest.mark.parametrize("policy", INCREMENTAL)
def test_a_policy_reused_for_another_run_starts_its_books_afresh(policy: str) -> None:
    profiles = load_profiles()
    first = generate(GeneratorSpec(jobs=300, seed=4, gpus=32), profiles)
    second = generate(GeneratorSpec(jobs=300, seed=5, gpus=32), profiles)
    cluster = Cluster.from_spec("1x4x8")
    reused = make_policy(policy, PolicyOptions())
    simulate(first, cluster, reused)
    again = _fingerprint(simulate(second, cluster, reused))
    fresh = _fingerprint(simulate(second, cluster, make_policy(policy, PolicyOptions())))
    assert again == fresh


class _BooklessThemis(ThemisPolicy):
    """Themis asked for the full schedule with views that carry none of the simulator's
    books (no grant-end book, no changed apps, no ranks): every round then scans every
    app and running job, as the Ray runtime's rounds do."""

    incremental = False

    def schedule(self, view: SchedulingView) -> Schedule:
        return super().schedule(replace(view, changed=None, order=None, ending_grants=None))

    def changes(self, view: SchedulingView) -> Changes:  # pragma: no cover - not incremental
        raise AssertionError("asked for changes")


def _themis_books_and_scans(workload, cluster: Cluster, options: PolicyOptions, **kw) -> tuple:
    booked = make_policy("themis", options)
    return (
        _fingerprint(simulate(workload, cluster, booked, **kw)),
        _fingerprint(simulate(workload, cluster, _BooklessThemis(options), **kw)),
    )


@pytest.mark.pure_only  # subclasses a compiled policy, whose methods refuse an interpreted subclass
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_themis_books_make_the_run_the_scans_make(scenario: tuple) -> None:
    """The arbiter's books (the grant ends the simulator reads from its heap, the hungry
    apps kept from the changed ones) stand for the scans of every app and running job."""
    workload, cluster, options, window = scenario
    booked, scanned = _themis_books_and_scans(
        workload, Cluster.from_spec(cluster), options, batch_window=window
    )
    assert booked == scanned


@pytest.mark.pure_only  # subclasses a compiled policy, whose methods refuse an interpreted subclass
@pytest.mark.parametrize(
    ("spec", "cluster", "conditions"),
    [
        (GeneratorSpec(jobs=600, seed=1, gpus=80), "1x10x8", Conditions()),
        (GeneratorSpec(jobs=500, seed=2, gpus=64, load=1.5), "2x4x8", Conditions(0.3, 30.0)),
        (GeneratorSpec(jobs=400, seed=3, gpus=64), "1x4x8:v100+1x4x8:k80", Conditions()),
        (GeneratorSpec(jobs=300, seed=5, gpus=32, online_halving=1), "1x4x8", Conditions()),
    ],
)
def test_themis_books_on_generated_workloads(
    spec: GeneratorSpec, cluster: str, conditions: Conditions
) -> None:
    workload = generate(spec, load_profiles())
    booked, scanned = _themis_books_and_scans(
        workload, Cluster.from_spec(cluster), PolicyOptions(), conditions=conditions
    )
    assert booked[0] > 100
    assert booked == scanned
