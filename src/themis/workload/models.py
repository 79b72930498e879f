"""Which model each app trains, for traces that say it, half-say it, or do not say it.

Rules (docs/traces.md, "Model assignment"), with P the profiles in effect (``--profiles``,
else the bundled ``model_profiles.json``; plus a themis file's own ``profiles``):

1. A trace in themis's vocabulary (HyperDrive's ``model`` column, the own format) must
   name a model of P; anything else is an error on that row.
2. A trace in a foreign vocabulary (Gavel job types, Tiresias model names) is matched by
   normalized name: lower case, a trailing ``(...)`` dropped, only letters and digits
   kept, and a ``v`` between letters and a version number dropped, so that
   ``ResNet-50 (batch size 64)`` is ``resnet50`` and ``Inception-v3`` is ``inception3``.
   A name that matches no model of P gets one drawn uniformly with a generator seeded
   by ``(seed, name)``: the same name always gets the same model, whatever else the
   trace holds.
3. An app whose trace names no model gets one drawn uniformly from P, in app order, from
   one generator seeded by ``seed`` (what the Themis authors did for HyperDrive).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from themis.model.profiles import ModelProfile

_SUFFIX = re.compile(r"\s*\([^)]*\)\s*$")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_VERSION_V = re.compile(r"(?<=[a-z])v(?=[0-9])")


def normalize(name: str) -> str:
    """The comparable form of a model name (see rule 2 of the module docstring)."""
    text = _SUFFIX.sub("", name.strip().lower())
    return _VERSION_V.sub("", _NON_ALNUM.sub("", text))


@dataclass
class ModelResolver:
    """Resolves trace names to profile names and draws models for unnamed apps; records
    what it did for ``inspect`` and the workload notes."""

    profiles: dict[str, ModelProfile]
    seed: int
    names: list[str] = field(init=False)
    by_normal: dict[str, str] = field(init=False)
    mapping: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (model, how)
    drawn: int = 0
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.names = sorted(self.profiles)
        normal: dict[str, list[str]] = {}
        for name in self.names:
            normal.setdefault(normalize(name), []).append(name)
        # A normalized form shared by two profiles matches neither: no silent pick.
        self.by_normal = {key: found[0] for key, found in normal.items() if len(found) == 1}
        self._rng = random.Random(self.seed)

    def known(self, name: str) -> bool:
        return name in self.profiles

    def foreign(self, name: str) -> str:
        """Rule 2: the profile a foreign name stands for (matched, else assigned)."""
        if name in self.mapping:
            return self.mapping[name][0]
        if name in self.profiles:
            model, how = name, "named"
        elif normalize(name) in self.by_normal:
            model, how = self.by_normal[normalize(name)], "matched"
        else:
            model, how = random.Random(f"{self.seed}:{name}").choice(self.names), "assigned"
        self.mapping[name] = (model, how)
        return model

    def draw(self) -> str:
        """Rule 3: the next seeded draw for an app without a model."""
        self.drawn += 1
        return self._rng.choice(self.names)

    def notes(self) -> dict[str, object]:
        out: dict[str, object] = {"drawn_for_apps_without_model": self.drawn}
        if self.mapping:
            out["trace_names"] = {name: f"{m} ({how})" for name, (m, how) in self.mapping.items()}
        return out
