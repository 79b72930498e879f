"""Choosing concrete GPUs for a gang: the best span available, then the tightest fit.

Best fit (the machine with the fewest free GPUs that still holds the gang) keeps large
holes open for large gangs, which is what placement-sensitive apps need later.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from themis.model.cluster import Cluster


def group_by_machine(cluster: Cluster, gpus: Iterable[int]) -> dict[int, list[int]]:
    by_machine: dict[int, list[int]] = {}
    for g in sorted(gpus):
        by_machine.setdefault(cluster.machine_of[g], []).append(g)
    return by_machine


def pack_gang(
    cluster: Cluster,
    available: Iterable[int],
    gang: int,
    machine_order: Sequence[int] | None = None,
) -> tuple[int, ...] | None:
    """Pick ``gang`` GPUs from ``available`` on the best span, or None if too few.

    ``machine_order`` breaks ties between equally good machines (the first listed wins);
    by default the lower machine id wins.
    """
    by_machine = group_by_machine(cluster, available)
    total = sum(len(v) for v in by_machine.values())
    if gang <= 0 or total < gang:
        return None
    rank = {m: i for i, m in enumerate(machine_order)} if machine_order is not None else {}

    def tie(m: int) -> int:
        return rank.get(m, len(rank) + m)

    fitting = [m for m, free in by_machine.items() if len(free) >= gang]
    if fitting:
        best = min(fitting, key=lambda m: (len(by_machine[m]), tie(m)))
        return tuple(by_machine[best][:gang])
    by_rack: dict[int, list[int]] = {}
    for m in by_machine:
        by_rack.setdefault(cluster.rack_of[by_machine[m][0]], []).append(m)
    rack_sizes = {r: sum(len(by_machine[m]) for m in ms) for r, ms in by_rack.items()}
    racks = [r for r, size in rack_sizes.items() if size >= gang]
    if racks:
        chosen_racks = [min(racks, key=lambda r: (rack_sizes[r], r))]
    else:
        chosen_racks = sorted(by_rack, key=lambda r: (-rack_sizes[r], r))
    picked: list[int] = []
    for r in chosen_racks:
        # Fewest machines: take the fullest machines first.
        for m in sorted(by_rack[r], key=lambda m: (-len(by_machine[m]), tie(m))):
            need = gang - len(picked)
            picked.extend(by_machine[m][:need])
            if len(picked) == gang:
                return tuple(sorted(picked))
    raise AssertionError("unreachable: enough GPUs were counted")
