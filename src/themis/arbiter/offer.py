"""The round's offer step: who is offered the free GPUs, and in which order the GPUs
are offered, kept from one round to the next.

The worst ``ceil((1 - f) n)`` wanting apps (at least one; ``n`` counting tenants) are
offered the pool, and with them the app that has waited longest for its first GPU
(docs/gangs.md §6). The offer lists the machines with the fewest free GPUs first (best
fit: small bundles are carved from partly used machines before empty ones), ties by
topology, each machine's GPUs ascending. Built anew, that is a pass in Python over every
free GPU in every round: on 10,000 GPUs with thousands free, the largest single cost of a
round (docs/benchmarks.md). From one round to the next only the GPUs that started or
stopped something change, so :class:`OfferOrder` keeps the per-machine lists and the
sorted machines, finds what changed with two set differences (in C) and re-sorts only
the machines those touch. The offer is the same list, in the same order, as the one
built anew (``offer_order``; a test holds the two equal on random pools).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import itemgetter

from themis.arbiter.round_state import RoundState
from themis.model.cluster import Cluster
from themis.model.placement import SHARED_LISTS, OfferIndex, OfferPositions
from themis.model.state import AppState

#: Machine keys (free GPUs on it, its first GPU's topology rank, machine): sorted, they
#: give the offer's order of machines. The rank alone is unique; the machine rides along.
MachineKey = tuple[int, int, int]
_machine = itemgetter(2)


def offer(state: RoundState, started: set[str]) -> None:
    """Fill ``offered`` (the worst-off tenants' apps of ``wanting``, ranked, and the
    longest-waiting newcomer) and ``planned``. ``started``: the owners (an app without
    one: the app) this arbiter ever granted a GPU, kept from round to round."""
    wanting = state.wanting
    offered = offered_tenants(wanting, state.knobs.fairness_knob)
    # Beside them, the app that has waited longest for its first GPU (docs/gangs.md §6):
    # it bids like the others, so that an app the rank has not reached yet still has a
    # chance in every auction.
    newcomer = first_gpu_wait(wanting[len(offered) :], started)
    if newcomer is not None:
        offered = [*offered, newcomer]
    state.offered = offered
    ended = state.ended
    state.planned = {id(j) for a in wanting for j in a.running_jobs() if id(j) not in ended}


def offered_count(wanting: int, fairness_knob: float) -> int:
    """How many of the worst-off apps are offered GPUs: ceil((1 - f) n), at least one."""
    if wanting == 0:
        return 0
    return max(1, math.ceil((1.0 - fairness_knob) * wanting - 1e-9))


def offered_tenants(ranked: Sequence[AppState], fairness_knob: float) -> list[AppState]:
    """The offered apps: those of ``ranked`` (worst-off first) that come before the first
    app of the ``offered_count(n, f) + 1``-th tenant, ``n`` counting tenants, not apps.

    The knob offers a share of the contenders; counted by app, a tenant that splits its
    sweep into k apps holds k places in the count and, ranked together, k of the offers
    (the lie ``split:2``). Counted by tenant, it holds one place however many apps it
    runs, and its apps that rank inside that place all bid (their bids then share one
    weight: ``tenant_weights``). Without owners every app is its own tenant: the worst
    ``offered_count(len(ranked), f)`` apps, as in the paper."""
    count = offered_count(len({a.spec.tenant for a in ranked}), fairness_knob)
    seen: set[str] = set()
    for k, app in enumerate(ranked):
        if app.spec.tenant not in seen:
            if len(seen) == count:
                return list(ranked[:k])
            seen.add(app.spec.tenant)
    return list(ranked)


def first_gpu_wait(candidates: Sequence[AppState], started: set[str]) -> AppState | None:
    """Of ``candidates`` (apps not offered this round), the one that has waited longest
    for its first GPU: the earliest arrival among the apps this arbiter never granted
    a GPU (``started``: their owners) and that hold none (after a restart of the
    arbiter, an app that holds GPUs is not new), counted per owner (an owner whose other
    app got GPUs is not new: a split buys no second slot). What a real scheduler knows:
    arrivals and its own grants."""
    first: AppState | None = None
    for app in candidates:
        if (
            app.spec.tenant not in started
            and not app.held()
            and (first is None or (app.arrival, app.app_id) < (first.arrival, first.app_id))
        ):
            first = app
    return first


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
