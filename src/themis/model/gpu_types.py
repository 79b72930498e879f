"""Per-type speeds for typed clusters: what a model's iteration costs on a V100 or a K80.

A profile's ``time_per_iteration`` is the unit work is counted in (a trace's run time
times its gang over it), taken as the time on the reference type, ``v100``. On a typed
cluster every model needs its time on every type there: from the user's profiles file
(``gpu_types``: model -> type -> seconds per iteration), else from the bundled table
(``data/gpu_types.json``: multiples of ``time_per_iteration``, proxies from Gavel's
measured throughputs, stated as such there and in docs/gpu_types.md). A model and type
found in neither is refused before any run, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from importlib import resources

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.workload import Workload


@cache
def bundled_relative_times() -> dict[str, dict[str, float]]:
    """GPU type -> model (or ``*``) -> multiple of ``time_per_iteration``."""
    text = resources.files("themis.data").joinpath("gpu_types.json").read_text()
    table: dict[str, dict[str, float]] = json.loads(text)["relative_time"]
    return table


def type_time(profile: ModelProfile, gpu_type: str, given: dict[str, dict[str, float]]) -> float:
    """Seconds per iteration of ``profile``'s model on one GPU of ``gpu_type``."""
    own = given.get(profile.name, {})
    if gpu_type in own:
        return own[gpu_type]
    table = bundled_relative_times().get(gpu_type)
    if table is None:
        known = ", ".join(sorted(bundled_relative_times()))
        raise ThemisError(
            f"no speed for model '{profile.name}' on GPU type '{gpu_type}': give its seconds "
            f"per iteration in a profiles file (--profiles, gpu_types); built-in types: {known}",
            field="--cluster",
        )
    return profile.time_per_iteration * table.get(profile.name, table["*"])


def with_type_times(workload: Workload, cluster: Cluster) -> Workload:
    """``workload`` whose profiles know their time on each of the cluster's GPU types
    (unchanged on an untyped cluster)."""
    if not cluster.typed:
        return workload
    given = workload.notes.get("gpu_types")
    user: dict[str, dict[str, float]] = given if isinstance(given, dict) else {}
    profiles = {
        name: replace(
            profile,
            type_times=tuple((t, type_time(profile, t, user)) for t in cluster.types),
        )
        for name, profile in workload.profiles.items()
    }
    return replace(workload, profiles=profiles)
