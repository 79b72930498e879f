"""Controlled changes to a workload, one factor at a time, for sensitivity sweeps.

Each variant keeps everything it does not mean to change: compressing arrivals keeps every
job's work, changing models keeps every job's GPU-time, resizing gangs keeps every job's
GPU-time at its best placement. So a sweep's points differ in one factor only, and their
offered loads stay comparable. All draws are seeded and independent of the order of runs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from themis.errors import ThemisError
from themis.model.workload import AppSpec, Workload

#: Placement-sensitive models: the VGG family loses 25-50% of its speed across machines
#: (``model_profiles.json``); the others lose 2-4%, AlexNet sits between.
VGG_FAMILY = ("vgg11", "vgg16", "vgg19")

#: Trial sizes in Philly (the issue's and Tiresias's reading of the trace): share of jobs
#: asking for 1, 2, 4 and 8 GPUs.
PHILLY_GANG_MIX: tuple[tuple[int, float], ...] = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))


def compress_arrivals(workload: Workload, factor: float) -> Workload:
    """Arrivals ``factor`` times closer together (contention ``factor``x), same work."""
    if not factor > 0:
        raise ThemisError(f"must be > 0, got {factor}", field="contention")
    if not workload.apps:
        return workload
    first = min(a.arrival for a in workload.apps)
    apps = tuple(replace(a, arrival=first + (a.arrival - first) / factor) for a in workload.apps)
    return replace(workload, apps=apps, notes={**workload.notes, "contention": factor})


def with_model_share(
    workload: Workload, share: float, family: Sequence[str] = VGG_FAMILY, seed: int = 0
) -> Workload:
    """A ``share`` of the apps (rounded, chosen by a seeded shuffle) train a model of
    ``family``, the others one of the remaining models; each job keeps its GPU-time on one
    GPU (its iterations are rescaled by the ratio of iteration times)."""
    if not 0.0 <= share <= 1.0:
        raise ThemisError(f"must be in [0, 1], got {share}", field="share")
    inside = [m for m in family if m in workload.profiles]
    outside = sorted(m for m in workload.profiles if m not in family)
    if (share > 0 and not inside) or (share < 1 and not outside):
        raise ThemisError("the profiles lack models on one side of the split", field="family")
    rng = random.Random(seed)
    order = list(range(len(workload.apps)))
    rng.shuffle(order)
    chosen = set(order[: round(share * len(workload.apps))])
    apps = []
    for k, app in enumerate(workload.apps):
        model = rng.choice(inside if k in chosen else outside)
        apps.append(_retrain(workload, app, model))
    return replace(workload, apps=tuple(apps), notes={**workload.notes, "model_share": share})


def _retrain(workload: Workload, app: AppSpec, model: str) -> AppSpec:
    scale = (
        workload.profiles[app.model].time_per_iteration
        / workload.profiles[model].time_per_iteration
    )
    jobs = tuple(replace(j, work=j.work * scale) for j in app.jobs)
    search = app.search
    if search is not None:  # rungs at the same fractions of the budget
        search = replace(search, min_work=search.min_work * scale)
    return replace(app, model=model, jobs=jobs, search=search)


def with_gang_mix(
    workload: Workload,
    mix: Sequence[tuple[int, float]] = PHILLY_GANG_MIX,
    seed: int = 0,
    max_gang: int | None = None,
) -> Workload:
    """Every app's trials get one gang size drawn from ``mix`` (a hyperparameter sweep's
    trials share a size), keeping each job's iterations, hence its GPU-time at the best
    placement. Sizes above ``max_gang`` (e.g. the cluster's machine count x GPUs) are
    not drawn."""
    sizes = [g for g, _ in mix if max_gang is None or g <= max_gang]
    weights = [w for g, w in mix if max_gang is None or g <= max_gang]
    if not sizes or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ThemisError("needs at least one size with a positive weight", field="mix")
    rng = random.Random(seed)
    apps = []
    for app in workload.apps:
        gang = rng.choices(sizes, weights)[0]
        apps.append(replace(app, jobs=tuple(replace(j, gang=gang) for j in app.jobs)))
    return replace(workload, apps=tuple(apps), notes={**workload.notes, "gang_mix": list(mix)})
