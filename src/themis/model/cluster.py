"""Cluster topology: racks contain machines, machines contain GPUs, and optionally every
machine has a GPU type (``v100``, ``k80``...).

GPUs are numbered 0..n-1 so that GPU sets can be tuples of small ints everywhere in the
hot path; human-readable names (``r0-m1-g3``) are kept for output. A cluster is either
untyped (every GPU alike, as in the paper) or typed throughout; a gang never mixes types
(docs/gpu_types.md), so the type is a property of whole machines.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import IntEnum

from themis.errors import ThemisError


class Span(IntEnum):
    """How far a GPU set reaches: ordered so that a larger value is a worse placement."""

    MACHINE = 0
    RACK = 1
    CLUSTER = 2


@dataclass(frozen=True)
class Gpu:
    """One GPU: its id (its index in the cluster), its name for output (``r0-m1-g3``), the
    cluster-wide numbers of its machine and rack, and its type (None when untyped)."""

    id: int
    name: str
    machine: int
    rack: int
    gpu_type: str | None = None


@dataclass(frozen=True)
class SetShape:
    """What placement needs to know about a GPU set: its size, and the most GPUs it has
    in any one machine and in any one rack. Throughput estimates depend only on this.

    On a typed cluster ``parts`` holds the shape of the set's GPUs of each type (in the
    cluster's type order, types the set has only): a gang runs inside one part, at that
    type's speed. Untyped sets have no parts, so their shapes (and every estimate made
    from them) are exactly what they were before types existed."""

    count: int
    machine_max: int
    rack_max: int
    parts: tuple[tuple[str, SetShape], ...] = ()


EMPTY_SHAPE = SetShape(0, 0, 0)

#: How many GPU sets ``Cluster.shape_of`` remembers (and shapes ``untyped_shape`` keeps)
#: before starting afresh.
_SHAPE_CACHE = 1 << 16

_UNTYPED_SHAPES: dict[tuple[int, int, int], SetShape] = {}


def untyped_shape(count: int, machine_max: int, rack_max: int) -> SetShape:
    """``SetShape(count, machine_max, rack_max)``, one object per triple: agents build a
    shape for every prefix of every bid, each round, and a frozen dataclass's
    ``__init__`` is Python even in a compiled core. Equal either way (shapes compare by
    value and never change)."""
    key = (count, machine_max, rack_max)
    shape = _UNTYPED_SHAPES.get(key)
    if shape is None:
        if len(_UNTYPED_SHAPES) >= _SHAPE_CACHE:
            _UNTYPED_SHAPES.clear()
        shape = _UNTYPED_SHAPES[key] = SetShape(count, machine_max, rack_max)
    return shape


_SHAPE_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*(?::\s*([A-Za-z0-9_.-]+)\s*)?$")


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
        self.type_of: tuple[str | None, ...] = tuple(g.gpu_type for g in self.gpus)
        #: The GPU types, in order of first appearance; empty for an untyped cluster.
        self.types: tuple[str, ...] = tuple(dict.fromkeys(t for t in self.type_of if t))
        self.typed = bool(self.types)
        self._check_types()
        machines: dict[int, list[int]] = {}
        for gpu in self.gpus:
            machines.setdefault(gpu.machine, []).append(gpu.id)
        self.machine_gpus: dict[int, tuple[int, ...]] = {m: tuple(v) for m, v in machines.items()}
        #: Each machine's GPU type (None on an untyped cluster).
        self.machine_type: dict[int, str | None] = {
            m: self.type_of[v[0]] for m, v in self.machine_gpus.items()
        }
        self.shape = self._shape(tuple(range(len(self.gpus))))
        # each GPU's position when the cluster is listed rack by rack, machine by machine
        order = sorted(
            range(len(self.gpus)), key=lambda g: (self.rack_of[g], self.machine_of[g], g)
        )
        rank = [0] * len(order)
        for position, g in enumerate(order):
            rank[g] = position
        self.topology_rank: tuple[int, ...] = tuple(rank)
        self._shapes: dict[tuple[int, ...], SetShape] = {}

    def _check_types(self) -> None:
        if not self.typed:
            return
        for gpu in self.gpus:
            if gpu.gpu_type is None:
                raise ThemisError(
                    f"GPU {gpu.name} has no type while others do: type every GPU or none",
                    field="--cluster",
                )
        seen: dict[int, Gpu] = {}
        for gpu in self.gpus:
            first = seen.setdefault(gpu.machine, gpu)
            if first.gpu_type != gpu.gpu_type:
                raise ThemisError(
                    f"machine of {gpu.name} mixes GPU types {first.gpu_type} and {gpu.gpu_type}",
                    field="--cluster",
                )

    @classmethod
    def from_spec(cls, spec: str) -> Cluster:
        """Build ``R x M x G``: R racks of M machines of G GPUs each (e.g. ``2x4x8``).

        A typed cluster is a sum of typed blocks, ``RxMxG:TYPE`` joined by ``+`` (e.g.
        ``1x4x8:v100+1x4x8:k80``): each block brings its own racks, numbered on from
        the previous block's."""
        blocks = spec.split("+")
        parsed: list[tuple[int, int, int, str | None]] = []
        for block in blocks:
            match = _SHAPE_RE.match(block)
            if not match:
                raise ThemisError(
                    f"cluster '{spec}' is not RxMxG (racks x machines per rack x GPUs per "
                    "machine), or typed blocks RxMxG:TYPE joined by '+'",
                    field="--cluster",
                )
            racks, machines, per_machine = (int(x) for x in match.groups()[:3])
            if min(racks, machines, per_machine) < 1:
                raise ThemisError(
                    f"cluster '{spec}' must have at least 1 of each", field="--cluster"
                )
            gpu_type = match.group(4)
            parsed.append((racks, machines, per_machine, gpu_type.lower() if gpu_type else None))
        if len(parsed) > 1 and any(t is None for *_, t in parsed):
            raise ThemisError(
                f"cluster '{spec}': every block of a cluster of several blocks needs a GPU "
                "type (RxMxG:TYPE)",
                field="--cluster",
            )
        gpus: list[Gpu] = []
        rack_base = machine_base = 0
        for racks, machines, per_machine, gpu_type in parsed:
            for r in range(racks):
                for m in range(machines):
                    machine = machine_base + r * machines + m
                    rack = rack_base + r
                    for g in range(per_machine):
                        gpus.append(Gpu(len(gpus), f"r{rack}-m{m}-g{g}", machine, rack, gpu_type))
            rack_base += racks
            machine_base += racks * machines
        return cls(gpus)

    @property
    def size(self) -> int:
        return len(self.gpus)

    def describe(self) -> str:
        racks = len(set(self.rack_of))
        text = f"{self.size} GPUs in {len(self.machine_gpus)} machines, {racks} racks"
        if self.typed:
            counts = Counter(self.type_of)
            text += " (" + ", ".join(f"{counts[t]} {t}" for t in self.types) + ")"
        return text

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
        whole = self._shape_untyped(gpus)
        if not self.typed:
            return whole
        by_type: dict[str, list[int]] = {}
        type_of = self.type_of
        for g in gpus:
            by_type.setdefault(type_of[g] or "", []).append(g)
        parts = tuple(
            (t, self._shape_untyped(tuple(by_type[t]))) for t in self.types if t in by_type
        )
        return replace(whole, parts=parts)

    def _shape_untyped(self, gpus: tuple[int, ...]) -> SetShape:
        counts = ShapeCounter(self)
        counts.add(gpus)
        return counts.shape()

    def gang_type(self, gpus: Iterable[int]) -> str | None:
        """The GPU type a gang runs on (None on an untyped cluster); a gang that mixes
        types is a bug of whoever chose it."""
        types = {self.type_of[g] for g in gpus}
        if len(types) != 1:
            raise AssertionError(f"a gang mixes GPU types {sorted(map(str, types))}")
        return types.pop()

    def span(self, gpus: Iterable[int]) -> Span:
        gpus = tuple(gpus)
        if len(gpus) == 1:
            return Span.MACHINE  # most gangs: no sets to build
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


class ShapeCounter:
    """The untyped shape of a GPU set that grows: per-machine and per-rack counts, each
    GPU counted as it joins, with their running maxima (counts only grow, so a running
    maximum is the maximum at every step). Agents read the shape of every sampled prefix
    of a chain of gangs without a pass over the counters; ``Cluster.shape_of`` counts a
    set once. A loop, not ``collections.Counter``, whose ``__init__`` and ``update`` are
    Python even in a compiled core."""

    def __init__(self, cluster: Cluster) -> None:
        self.machine_of = cluster.machine_of
        self.rack_of = cluster.rack_of
        self.machines: dict[int, int] = {}
        self.racks: dict[int, int] = {}
        self.count = self.machine_max = self.rack_max = 0

    def add(self, gpus: Iterable[int]) -> None:
        machine_of, rack_of = self.machine_of, self.rack_of
        machines, racks = self.machines, self.racks
        machine_max, rack_max, count = self.machine_max, self.rack_max, self.count
        for g in gpus:
            count += 1
            m = machines[machine_of[g]] = machines.get(machine_of[g], 0) + 1
            if m > machine_max:
                machine_max = m
            r = racks[rack_of[g]] = racks.get(rack_of[g], 0) + 1
            if r > rack_max:
                rack_max = r
        self.machine_max, self.rack_max, self.count = machine_max, rack_max, count

    def shape(self) -> SetShape:
        return untyped_shape(self.count, self.machine_max, self.rack_max)
