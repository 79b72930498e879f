"""A user's profiles file: the fields of ``model_profiles.json`` plus optional GPU types.

``themis.model.profiles.load_profiles`` reads and checks the three fields the simulator
uses. A profile may also carry ``"gpu_types": {"v100": 0.21, "k80": 0.9}``: seconds per
iteration on one GPU of each type, for clusters that mix GPU types. They are checked here
and carried in the workload (``Workload.notes["gpu_types"]``, and into converted files);
the simulator's clusters are of one GPU type today and do not read them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile, load_profiles

GpuTypes = dict[str, dict[str, float]]


def load_profiles_file(path: str | Path | None) -> tuple[dict[str, ModelProfile], GpuTypes]:
    """Profiles and GPU types of ``path`` (the bundled profiles, without GPU types, when
    ``path`` is None)."""
    profiles = load_profiles(path)
    if path is None:
        return profiles, {}
    source = str(path)
    raw = json.loads(Path(path).read_text())  # load_profiles has checked it is JSON
    gpu_types: GpuTypes = {}
    for name, entry in raw.items():
        table = entry.get("gpu_types")
        if table is None:
            continue
        if not isinstance(table, dict):
            raise ThemisError(
                "must be an object of GPU type -> seconds per iteration",
                source=source,
                field=f"{name}.gpu_types",
            )
        for gpu_type, value in table.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ThemisError(
                    "not a number", source=source, field=f"{name}.gpu_types.{gpu_type}"
                )
            if not math.isfinite(value) or value <= 0:
                raise ThemisError(
                    f"must be > 0, got {value}", source=source, field=f"{name}.gpu_types.{gpu_type}"
                )
        gpu_types[name] = {k: float(v) for k, v in table.items()}
    return profiles, gpu_types
