"""Model profiles: iteration time on one GPU and the slowdown of each placement span."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from themis.errors import ThemisError
from themis.model.cluster import SetShape, Span
from themis.model.frozen import by_fields


@dataclass(frozen=True)
class ModelProfile:
    """How fast a model trains: seconds per iteration on one GPU, and the throughput
    factor (0 < f <= 1) of a job whose GPUs span machines of one rack (``cross_machine``)
    or racks (``cross_rack``). The format of ``model_profiles.json`` is the README's
    "Model profiles"."""

    name: str
    time_per_iteration: float
    cross_machine: float
    cross_rack: float
    #: (GPU type, seconds per iteration on one GPU of it), for typed clusters; see
    #: ``model/gpu_types.py``. ``time_per_iteration`` stays the unit work is counted in.
    type_times: tuple[tuple[str, float], ...] = ()

    def time_on(self, gpu_type: str | None) -> float:
        """Seconds per iteration on one GPU of ``gpu_type`` (None: an untyped GPU).

        A profile that knows no type at all (the runtime's, from one ``step_time``) runs
        alike on every type: gangs still never mix types, but types are not priced."""
        if gpu_type is None or not self.type_times:
            return self.time_per_iteration
        for name, seconds in self.type_times:
            if name == gpu_type:
                return seconds
        raise ThemisError(f"model '{self.name}' has no time per iteration on GPU type '{gpu_type}'")

    def type_speed(self, gpu_type: str | None) -> float:
        """How many times faster than ``time_per_iteration`` one GPU of this type runs."""
        if gpu_type is None:
            return 1.0
        return self.time_per_iteration / self.time_on(gpu_type)

    def factor(self, span: Span) -> float:
        if span is Span.MACHINE:
            return 1.0
        if span is Span.RACK:
            return self.cross_machine
        return self.cross_rack

    def best_factor_on(self, gang: int, shape: SetShape) -> float:
        """The placement factor of the best spot a gang can find in a GPU set of this shape,
        or 0.0 when the set is too small for the gang."""
        if gang <= shape.machine_max:
            return 1.0
        if gang <= shape.rack_max:
            return self.cross_machine
        if gang <= shape.count:
            return self.cross_rack
        return 0.0

    def speed(self, gpus: int, span: Span, gpu_type: str | None = None) -> float:
        """Iterations per second of a job holding ``gpus`` GPUs of this span (and type)."""
        if gpu_type is None:
            return gpus * self.factor(span) / self.time_per_iteration
        return gpus * self.factor(span) / self.time_on(gpu_type)

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return by_fields(self)  # picklable compiled too (model/frozen.py)


_FIELDS = ("time_per_iteration", "cross_machine", "cross_rack")


def load_profiles(path: str | Path | None = None) -> dict[str, ModelProfile]:
    """Read a profiles file (the format of the paper's ``model_profiles.json``); the bundled
    one when ``path`` is None."""
    if path is None:
        source = "model_profiles.json (bundled)"
        text = resources.files("themis.data").joinpath("model_profiles.json").read_text()
    else:
        source = str(path)
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ThemisError(f"cannot read profiles: {exc.strerror}", source=source) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThemisError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    if not isinstance(raw, dict) or not raw:
        raise ThemisError("expected a non-empty object of model name -> profile", source=source)
    profiles = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            raise ThemisError("expected an object", source=source, field=f"{name}")
        values = {}
        for key in _FIELDS:
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ThemisError("missing or not a number", source=source, field=f"{name}.{key}")
            if not math.isfinite(value) or value <= 0:
                raise ThemisError(f"must be > 0, got {value}", source=source, field=f"{name}.{key}")
            values[key] = float(value)
        for key in ("cross_machine", "cross_rack"):
            if values[key] > 1.0:
                raise ThemisError(
                    f"a placement factor is at most 1.0, got {values[key]}",
                    source=source,
                    field=f"{name}.{key}",
                )
        profiles[name] = ModelProfile(
            name, values["time_per_iteration"], values["cross_machine"], values["cross_rack"]
        )
    return profiles
