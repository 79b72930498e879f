"""Cluster topology: racks contain machines, machines contain GPUs.

GPUs are numbered 0..n-1 so that GPU sets can be tuples of small ints everywhere in the
hot path; human-readable names (``r0-m1-g3``) are kept for output.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from themis.errors import ThemisError


class Span(IntEnum):
    """How far a GPU set reaches: ordered so that a larger value is a worse placement."""

    MACHINE = 0
    RACK = 1
    CLUSTER = 2


@dataclass(frozen=True)
class Gpu:
    id: int
    name: str
    machine: int
    rack: int
    gpu_type: str | None = None


@dataclass(frozen=True)
class SetShape:
    """What placement needs to know about a GPU set: its size, and the most GPUs it has
    in any one machine and in any one rack. Throughput estimates depend only on this."""

    count: int
    machine_max: int
    rack_max: int


EMPTY_SHAPE = SetShape(0, 0, 0)

#: How many GPU sets ``Cluster.shape_of`` remembers before starting afresh.
_SHAPE_CACHE = 1 << 16

_SHAPE_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*$")


class Cluster:
    """An immutable GPU inventory with its topology."""

    def __init__(self, gpus: Iterable[Gpu]) -> None:
        self.gpus: tuple[Gpu, ...] = tuple(gpus)
        if not self.gpus:
            raise ThemisError("a cluster needs at least one GPU")
        for index, gpu in enumerate(self.gpus):
            if gpu.id != index:
                raise ValueError("GPU ids must be 0..n-1 in order")
        self.machine_of: tuple[int, ...] = tuple(g.machine for g in self.gpus)
        self.rack_of: tuple[int, ...] = tuple(g.rack for g in self.gpus)
        machines: dict[int, list[int]] = {}
        for gpu in self.gpus:
            machines.setdefault(gpu.machine, []).append(gpu.id)
        self.machine_gpus: dict[int, tuple[int, ...]] = {m: tuple(v) for m, v in machines.items()}
        racks = Counter(g.rack for g in self.gpus)
        self.shape = SetShape(
            len(self.gpus),
            max(len(v) for v in machines.values()),
            max(racks.values()),
        )
        # each GPU's position when the cluster is listed rack by rack, machine by machine
        order = sorted(
            range(len(self.gpus)), key=lambda g: (self.rack_of[g], self.machine_of[g], g)
        )
        rank = [0] * len(order)
        for position, g in enumerate(order):
            rank[g] = position
        self.topology_rank: tuple[int, ...] = tuple(rank)
        self._shapes: dict[tuple[int, ...], SetShape] = {}

    @classmethod
    def from_spec(cls, spec: str) -> Cluster:
        """Build ``R x M x G``: R racks of M machines of G GPUs each (e.g. ``2x4x8``)."""
        match = _SHAPE_RE.match(spec)
        if not match:
            raise ThemisError(
                f"cluster '{spec}' is not RxMxG (racks x machines per rack x GPUs per machine)",
                field="--cluster",
            )
        racks, machines, per_machine = (int(x) for x in match.groups())
        if min(racks, machines, per_machine) < 1:
            raise ThemisError(f"cluster '{spec}' must have at least 1 of each", field="--cluster")
        gpus: list[Gpu] = []
        for r in range(racks):
            for m in range(machines):
                machine = r * machines + m
                for g in range(per_machine):
                    gpus.append(Gpu(len(gpus), f"r{r}-m{m}-g{g}", machine, r))
        return cls(gpus)

    @property
    def size(self) -> int:
        return len(self.gpus)

    def describe(self) -> str:
        racks = len(set(self.rack_of))
        return f"{self.size} GPUs in {len(self.machine_gpus)} machines, {racks} racks"

    def shape_of(self, gpus: Iterable[int]) -> SetShape:
        key = gpus if type(gpus) is tuple else tuple(gpus)
        shape = self._shapes.get(key)
        if shape is None:
            # Apps keep their GPU sets for many rounds: remember recent answers.
            if len(self._shapes) >= _SHAPE_CACHE:
                self._shapes.clear()
            shape = self._shapes[key] = self._shape(key)
        return shape

    def _shape(self, gpus: tuple[int, ...]) -> SetShape:
        if not gpus:
            return EMPTY_SHAPE
        per_machine = Counter(map(self.machine_of.__getitem__, gpus))
        per_rack = Counter(map(self.rack_of.__getitem__, gpus))
        return SetShape(len(gpus), max(per_machine.values()), max(per_rack.values()))

    def span(self, gpus: Iterable[int]) -> Span:
        gpus = tuple(gpus)
        if not gpus:
            raise ValueError("the span of an empty GPU set is undefined")
        if len({self.machine_of[g] for g in gpus}) == 1:
            return Span.MACHINE
        if len({self.rack_of[g] for g in gpus}) == 1:
            return Span.RACK
        return Span.CLUSTER

    def best_span(self, gang: int) -> Span:
        """The best span a gang of this size can get on an empty cluster."""
        if gang <= self.shape.machine_max:
            return Span.MACHINE
        if gang <= self.shape.rack_max:
            return Span.RACK
        return Span.CLUSTER
