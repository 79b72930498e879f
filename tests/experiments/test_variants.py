"""Workload variants change one factor and keep what they promise to keep."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from themis.errors import ThemisError
from themis.experiments.variants import (
    PHILLY_GANG_MIX,
    VGG_FAMILY,
    compress_arrivals,
    with_gang_mix,
    with_model_share,
)
from themis.model.profiles import load_profiles
from themis.model.workload import AppSpec, JobSpec, Workload

PROFILES = load_profiles()


def workload(n_apps: int = 20) -> Workload:
    models = sorted(PROFILES)
    apps = tuple(
        AppSpec(
            f"a{i}",
            100.0 + 50.0 * i,
            models[i % len(models)],
            tuple(JobSpec(f"a{i}j{k}", 1, 1000.0 * (k + 1)) for k in range(3)),
        )
        for i in range(n_apps)
    )
    return Workload(apps, PROFILES, "hand")


def test_compress_arrivals_scales_gaps_from_the_first_arrival() -> None:
    w = compress_arrivals(workload(3), 4.0)
    # 100, 150, 200 -> 100, 112.5, 125: gaps of 50 become 12.5, work untouched.
    assert [a.arrival for a in w.apps] == [100.0, 112.5, 125.0]
    assert [a.jobs for a in w.apps] == [a.jobs for a in workload(3).apps]
    assert w.notes["contention"] == 4.0
    with pytest.raises(ThemisError, match="> 0"):
        compress_arrivals(workload(3), 0.0)


@given(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.integers(0, 5))
def test_model_share_picks_the_share_and_keeps_gpu_time(share: float, seed: int) -> None:
    base = workload(20)
    w = with_model_share(base, share, seed=seed)
    vgg = [a for a in w.apps if a.model in VGG_FAMILY]
    assert len(vgg) == round(share * 20)
    assert w.gpu_seconds() == pytest.approx(base.gpu_seconds())
    for before, after in zip(base.apps, w.apps, strict=True):
        t_before = PROFILES[before.model].time_per_iteration
        t_after = PROFILES[after.model].time_per_iteration
        for jb, ja in zip(before.jobs, after.jobs, strict=True):
            assert ja.work * t_after == pytest.approx(jb.work * t_before)
    assert with_model_share(base, share, seed=seed) == w  # seeded: the same draw again


def test_model_share_rejects_out_of_range() -> None:
    with pytest.raises(ThemisError, match=r"\[0, 1\]"):
        with_model_share(workload(), 1.5)


def test_gang_mix_one_size_per_app_and_the_same_iterations() -> None:
    base = workload(400)
    w = with_gang_mix(base, seed=3)
    sizes = Counter()
    for before, after in zip(base.apps, w.apps, strict=True):
        gangs = {j.gang for j in after.jobs}
        assert len(gangs) == 1  # a sweep's trials share a size
        sizes[gangs.pop()] += 1
        assert [j.work for j in after.jobs] == [j.work for j in before.jobs]
    # 400 draws from 70/10/15/5%: each share within a loose binomial band.
    for gang, share in PHILLY_GANG_MIX:
        assert abs(sizes[gang] / 400 - share) < 0.08, sizes
    assert w.gpu_seconds() == base.gpu_seconds()


def test_gang_mix_respects_the_largest_gang() -> None:
    w = with_gang_mix(workload(100), max_gang=2)
    assert {j.gang for a in w.apps for j in a.jobs} <= {1, 2}
    with pytest.raises(ThemisError, match="positive weight"):
        with_gang_mix(workload(), mix=[(8, 1.0)], max_gang=4)
