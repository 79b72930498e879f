"""The order in which a round offers its free GPUs, kept from one round to the next.

The offer lists the machines with the fewest free GPUs first (best fit: small bundles are
carved from partly used machines before empty ones), ties by topology, each machine's GPUs
ascending. Built anew, that is a pass in Python over every free GPU in every round: on
10,000 GPUs with thousands free, the largest single cost of a round (docs/benchmarks.md).
From one round to the next only the GPUs that started or stopped something change, so
:class:`OfferOrder` keeps the per-machine lists and the sorted machines, finds what changed
with two set differences (in C) and re-sorts only the machines those touch. The offer is
the same list, in the same order, as the one built anew (``offer_order``; a test holds the
two equal on random pools).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import itemgetter

from themis.model.cluster import Cluster
from themis.model.placement import SHARED_LISTS, OfferIndex, OfferPositions

#: Machine keys (free GPUs on it, its first GPU's topology rank, machine): sorted, they
#: give the offer's order of machines. The rank alone is unique; the machine rides along.
MachineKey = tuple[int, int, int]
_machine = itemgetter(2)


def machine_ranks(cluster: Cluster) -> dict[int, int]:
    """Each machine's first GPU in topology order."""
    rank = cluster.topology_rank
    return {m: min(rank[g] for g in gpus) for m, gpus in cluster.machine_gpus.items()}


def offer_order(
    machine_of: Sequence[int], first: Mapping[int, int], pool: set[int]
) -> tuple[list[int], dict[int, list[int]]]:
    """The offer built anew: the pool sorted by (free GPUs on its machine, topology rank),
    and the pool's GPUs per machine (each list ascending). A machine's GPUs are consecutive
    in topology order (rack, machine, id), so that is the machines sorted by (free count,
    first rank), each machine's GPUs by id."""
    on: dict[int, list[int]] = {}
    for g in pool:
        gpus = on.get(machine_of[g])
        if gpus is None:
            on[machine_of[g]] = [g]
        else:
            gpus.append(g)
    offer: list[int] = []
    for m in sorted(on, key=lambda m: (len(on[m]), first[m])):
        gpus = on[m]
        gpus.sort()
        offer.extend(gpus)
    return offer, on


class OfferOrder:
    """``offer_order`` of each round's pool, indexed for its bidders (``OfferIndex``, with
    positions found when asked: ``OfferPositions``), updated from the last round's instead
    of rebuilt. The lists it returns are never changed afterwards (a changed machine gets a
    new list), so last round's offer and its index stay valid for whoever kept them; the
    packers that bid on an offer copy a list before they take from it (``OrderedPacker``).
    """

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._machine_of = cluster.machine_of
        self._first = machine_ranks(cluster)
        self._pool: set[int] = set()
        self._on: dict[int, list[int]] = {}
        self._keys: list[MachineKey] = []

    def __call__(self, pool: set[int]) -> OfferIndex:
        """The offer of ``pool``, indexed for the bidders (``OfferIndex``)."""
        if len(pool) < SHARED_LISTS:
            # A small offer costs less to build anew than to keep: keep nothing (the next
            # large one is built anew too), and store its positions.
            self._pool, self._on, self._keys = set(), {}, []
            offer, on = offer_order(self._machine_of, self._first, pool)
            return OfferIndex(self._cluster, offer, on)
        added = pool - self._pool
        removed = self._pool - pool
        if 2 * (len(added) + len(removed)) >= len(pool):
            # Most of the pool changed (or the first round): building anew costs less.
            offer, on = offer_order(self._machine_of, self._first, pool)
            first = self._first
            self._keys = sorted((len(gpus), first[m], m) for m, gpus in on.items())
            machines = list(map(_machine, self._keys))
        else:
            on = self._update(added, removed)
            machines = list(map(_machine, self._keys))
            offer = list(chain.from_iterable(map(on.__getitem__, machines)))
        self._pool = set(pool)
        self._on = on
        positions = OfferPositions(self._machine_of, on, machines)
        return OfferIndex(self._cluster, offer, on, positions)

    def _update(self, added: set[int], removed: set[int]) -> dict[int, list[int]]:
        machine_of, first, keys = self._machine_of, self._first, self._keys
        changes: dict[int, tuple[list[int], list[int]]] = {}
        for g in added:
            changes.setdefault(machine_of[g], ([], []))[0].append(g)
        for g in removed:
            changes.setdefault(machine_of[g], ([], []))[1].append(g)
        on = dict(self._on)
        for m, (gained, lost) in changes.items():
            old = on.get(m, [])
            if old:
                del keys[bisect_left(keys, (len(old), first[m], m))]
            gone = set(lost)
            gpus = sorted([g for g in old if g not in gone] + gained)
            if gpus:
                on[m] = gpus
                insort(keys, (len(gpus), first[m], m))
            else:
                on.pop(m, None)
        return on
