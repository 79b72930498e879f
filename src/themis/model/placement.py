"""Choosing concrete GPUs for a gang: the best span available, then the tightest fit.

Best fit (the machine with the fewest free GPUs that still holds the gang) keeps large
holes open for large gangs, which is what placement-sensitive apps need later.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, islice
from typing import overload

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile


class Packer:
    """A pool of free GPUs that gangs are carved from one after another.

    Keeping the per-machine lists between takes makes packing a whole app's jobs linear in
    the number of machines per gang instead of re-sorting the pool for every gang.
    """

    def __init__(
        self,
        cluster: Cluster,
        available: Iterable[int] = (),
        shared: Mapping[int, list[int]] | None = None,
        size: int | None = None,
    ) -> None:
        """``shared``: start from these per-machine lists (each ascending, none empty)
        instead of ``available``, sharing each with its owner until this packer first
        changes it (copy on write): a round's packers start from the offer's lists, of
        which each touches a few. ``size``: how many GPUs they hold, when known."""
        self.cluster = cluster
        #: The machines whose lists this packer copied (None: every list is its own).
        self._own: set[int] | None = None
        if shared is not None:
            self.by_machine = dict(shared)
            self._own = set()
            self.size = sum(map(len, shared.values())) if size is None else size
            return
        self.by_machine = {}
        machine_of = cluster.machine_of
        gpus = sorted(available)
        for g in gpus:
            free = self.by_machine.get(machine_of[g])
            if free is None:
                self.by_machine[machine_of[g]] = [g]
            else:
                free.append(g)
        self.size = len(gpus)

    def __len__(self) -> int:
        return self.size

    def _changing(self, machine: int) -> list[int]:
        """``machine``'s free list, about to be changed: copied first if shared."""
        own = self._own
        if own is None or machine in own:
            return self.by_machine[machine]
        own.add(machine)
        free = self.by_machine[machine] = list(self.by_machine[machine])
        return free

    def settle(self, removed: Iterable[int], added: Iterable[int]) -> None:
        """Take ``removed`` (held here) out and put ``added`` (not held here) in, as if the
        packer had been built on the GPUs after the change: machines left empty go."""
        machine_of = self.cluster.machine_of
        for g in removed:
            m = machine_of[g]
            free = self._changing(m)
            free.remove(g)
            self.size -= 1
            if not free:
                del self.by_machine[m]
        for g in added:
            m = machine_of[g]
            if m not in self.by_machine:
                self.by_machine[m] = []
            insort(self._changing(m), g)
            self.size += 1

    def gpus(self) -> set[int]:
        return {g for free in self.by_machine.values() for g in free}

    def take_exact(self, gpus: Sequence[int]) -> bool:
        """Remove exactly these GPUs if all are still in the pool."""
        for g in gpus:
            free = self.by_machine.get(self.cluster.machine_of[g])
            if free is None or g not in free:
                return False
        for g in gpus:
            self._changing(self.cluster.machine_of[g]).remove(g)
        self.size -= len(gpus)
        return True

    def give_back(self, gpus: Sequence[int]) -> None:
        """Return GPUs taken from this pool (``take_exact`` undone)."""
        machine_of = self.cluster.machine_of
        for g in gpus:
            if machine_of[g] not in self.by_machine:
                self.by_machine[machine_of[g]] = []
            free = self._changing(machine_of[g])
            free.append(g)
            free.sort()
        self.size += len(gpus)

    def peek(
        self,
        gang: int,
        machine_order: Sequence[int] | None = None,
        gpu_type: str | None = None,
    ) -> tuple[int, ...] | None:
        """The GPUs ``take`` would return, without removing them.

        On a typed cluster the gang stays inside one GPU type: ``gpu_type`` when given,
        else the type where it gets the best span (then the tightest fit, then the first
        machine): a type-blind choice, which is what the baselines make."""
        if gang <= 0 or self.size < gang:
            return None
        if not self.cluster.typed:
            return self._peek_in(self.by_machine, gang, machine_order)
        machine_type = self.cluster.machine_type
        best: tuple[int, ...] | None = None
        best_key: tuple[int, int, int] | None = None
        for t in self.cluster.types if gpu_type is None else (gpu_type,):
            subset = {m: free for m, free in self.by_machine.items() if machine_type[m] == t}
            if sum(len(free) for free in subset.values()) < gang:
                continue
            gpus = self._peek_in(subset, gang, machine_order)
            machines = {self.cluster.machine_of[g] for g in gpus}
            first = min(machines)
            fit = len(subset[first]) if len(machines) == 1 else 0
            key = (int(self.cluster.span(gpus)), fit, first)
            if best_key is None or key < best_key:
                best, best_key = gpus, key
        return best

    def _peek_in(
        self,
        by_machine: dict[int, list[int]],
        gang: int,
        machine_order: Sequence[int] | None,
    ) -> tuple[int, ...]:
        """``peek`` within ``by_machine``, which holds at least ``gang`` free GPUs."""
        rank = {m: i for i, m in enumerate(machine_order)} if machine_order is not None else None

        def tie(m: int) -> int:
            return rank.get(m, len(rank) + m) if rank is not None else m

        best = None
        best_key = None
        for m, free in by_machine.items():
            n = len(free)
            if n >= gang:
                key = (n, tie(m))
                if best_key is None or key < best_key:
                    best, best_key = m, key
        if best is not None:
            return tuple(by_machine[best][:gang])
        rack_of = self.cluster.rack_of
        by_rack: dict[int, list[int]] = {}
        for m, free in by_machine.items():
            if free:
                by_rack.setdefault(rack_of[free[0]], []).append(m)
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
                picked.extend(by_machine[m][: gang - len(picked)])
                if len(picked) == gang:
                    return tuple(sorted(picked))
        raise AssertionError("unreachable: enough GPUs were counted")

    def take(
        self,
        gang: int,
        machine_order: Sequence[int] | None = None,
        gpu_type: str | None = None,
    ) -> tuple[int, ...] | None:
        """Remove and return ``gang`` GPUs on the best span, or None if too few are left.

        ``machine_order`` breaks ties between equally good machines (the first listed
        wins); by default the lower machine id wins. ``gpu_type``: see ``peek``.
        """
        gpus = self.peek(gang, machine_order, gpu_type)
        if gpus is not None:
            for g in gpus:
                self._changing(self.cluster.machine_of[g]).remove(g)
            self.size -= gang
        return gpus


#: Offers of at least this many GPUs are shared by the bidders' packers until each changes
#: a machine's list (``OrderedPacker``), and the arbiter finds their positions when asked
#: (``OfferPositions``); smaller ones are copied whole and their positions stored.
SHARED_LISTS = 256


class OrderedPacker(Packer):
    """A pool that hands out GPUs in a preference order, whole gangs inside one machine
    when any machine can hold them (else on the best span, as :class:`Packer`).

    The arbiter gives each bidder the offer starting at a different point: walking its own
    order, each bidder's small bundles come from its own stretch of the offer, so that
    several bidders can win at once instead of all asking for the same first GPUs.
    """

    def __init__(
        self,
        cluster: Cluster,
        preference: Sequence[int],
        index: OfferIndex | None = None,
        start: int = 0,
    ) -> None:
        """``index``: the round's offer indexed once, when ``preference`` is that offer
        rotated to begin at position ``start`` (each bidder's: ``OfferIndex.rotated``): the
        pool is then copied from the index instead of sorted anew, and positions are read
        from it. A large (``shared``) index's lists are shared and its offer walked in
        place, ``preference`` not read; a small one is copied, ``preference`` with it."""
        #: What ``take`` walks: a walk position p is ``pref[offset + p]``, around the end.
        self._walk: tuple[Sequence[int], int]
        if index is not None and index.shared:
            # The index's lists, shared until this packer first changes one (copy on
            # write): a bid touches a few machines of an offer that may span thousands.
            super().__init__(cluster, shared=index.by_machine, size=index.size)
            self.preference: Sequence[int] = preference
            self._walk = (index.offer, start)
        else:
            if index is None:
                super().__init__(cluster, preference)
            else:  # a small offer: copying it costs less than tracking what was copied
                self.cluster = cluster
                self.by_machine = {m: list(f) for m, f in index.by_machine.items()}
                self.size = index.size
                self._own = None
            self.preference = list(preference)
            self._walk = (self.preference, 0)
        self._index = index
        self._start = start
        self._rank: dict[int, int] | None = None  # built when a gang of several needs it
        self._cursor = 0

    @property
    def rank(self) -> dict[int, int]:
        """Each GPU's position in the preference order."""
        if self._rank is None:
            self._rank = {g: i for i, g in enumerate(self.preference)}
        return self._rank

    def _position(self, gpu: int) -> int:
        index = self._index
        if index is None:
            return self.rank[gpu]
        return (index.position[gpu] - self._start) % index.size

    def take(
        self,
        gang: int,
        machine_order: Sequence[int] | None = None,
        gpu_type: str | None = None,
    ) -> tuple[int, ...] | None:
        if gpu_type is not None:
            return super().take(gang, machine_order, gpu_type)
        if gang <= 0 or self.size < gang:
            return None
        machine_of = self.cluster.machine_of
        by_machine = self.by_machine
        # The preference: a large index's offer from ``_start`` on, walked in place (never
        # copied: it may hold thousands of GPUs, a bid takes a few), else our own list.
        pref, offset = self._walk
        n = len(pref)
        split = n - offset  # walk position p is pref[p + offset], or pref[p - split] past it
        cursor = self._cursor
        # Every GPU before the cursor is taken (GPUs never come back to the pool).
        while cursor < n:
            g = pref[cursor + offset if cursor < split else cursor - split]
            if g in by_machine.get(machine_of[g], ()):
                break
            cursor += 1
        self._cursor = cursor
        if gang == 1:
            # The first free GPU in preference order is its machine's first free one.
            g = pref[cursor + offset if cursor < split else cursor - split]
            self._changing(machine_of[g]).remove(g)
            self.size -= 1
            return (g,)
        for i in range(cursor, n):
            g = pref[i + offset if i < split else i - split]
            free = by_machine[machine_of[g]]
            if g in free and len(free) >= gang:
                picked = sorted(free, key=self._position)[:gang]
                free = self._changing(machine_of[g])
                for g in picked:
                    free.remove(g)
                self.size -= gang
                return tuple(picked)
        return super().take(gang, machine_order)


class RotatedOffer(Sequence[int]):
    """The offer as one bidder walks it, from position ``start`` on and around: a view,
    not a copy (a round has as many bidders as it has, and the offer thousands of GPUs)."""

    def __init__(self, offer: Sequence[int], start: int) -> None:
        self.offer = offer
        self.start = start

    def __len__(self) -> int:
        return len(self.offer)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self.offer)
        if not -n <= i < n:
            raise IndexError("offer position out of range")
        return self.offer[(self.start + i) % n]

    def __iter__(self) -> Iterator[int]:
        return chain(islice(self.offer, self.start, None), islice(self.offer, self.start))


class OfferIndex:
    """One round's offer indexed once for all its bidders: the per-machine free lists
    (never changed: each bidder's packer copies them) and each GPU's position."""

    def __init__(
        self,
        cluster: Cluster,
        offer: Sequence[int],
        by_machine: dict[int, list[int]] | None = None,
        position: Mapping[int, int] | None = None,
    ) -> None:
        """``by_machine``: the offer's GPUs per machine (each list ascending), when the
        caller grouped them already (the arbiter's offer order does); ``position``: each
        GPU's index in ``offer``, when the caller has it (``OfferPositions``)."""
        if by_machine is None:
            by_machine = Packer(cluster, offer).by_machine
        self.by_machine = by_machine
        self.offer = offer
        self.size = len(offer)
        #: A large offer (``SHARED_LISTS``): the bidders' packers and the leftover's share
        #: its lists (copy on write) and walk it in place; a small one costs less copied.
        self.shared = self.size >= SHARED_LISTS
        if position is None:
            position = dict(zip(offer, range(len(offer)), strict=True))
        self.position = position

    def rotated(self, start: int) -> Sequence[int]:
        """The offer as the bidder that starts at position ``start`` walks it: a view of a
        shared offer, a copy of a small one."""
        offer = self.offer
        return RotatedOffer(offer, start) if self.shared else [*offer[start:], *offer[:start]]


class OfferPositions(Mapping[int, int]):
    """Each GPU's position in an offer whose machines come whole, one after another (the
    arbiter's offer order), each machine's GPUs ascending: the machine's start plus the
    GPU's rank on it, found when asked. A round reads the positions of the few GPUs its
    bids name, so this costs a pass over the machines, not a dict of every offered GPU."""

    def __init__(
        self, machine_of: Sequence[int], by_machine: Mapping[int, list[int]], machines: list[int]
    ) -> None:
        """``machines``: the machines of ``by_machine`` in offer order."""
        self._machine_of = machine_of
        self._by_machine = by_machine
        self._machines = machines
        sizes = map(len, map(by_machine.__getitem__, machines))
        # accumulate yields one more sum than there are machines: the total, not a start.
        self._start = dict(zip(machines, accumulate(sizes, initial=0), strict=False))

    def get(self, gpu: object, default: int | None = None) -> int | None:  # type: ignore[override]
        if not isinstance(gpu, int) or not 0 <= gpu < len(self._machine_of):
            return default
        machine = self._machine_of[gpu]
        gpus = self._by_machine.get(machine)
        if gpus is None:
            return default
        i = bisect_left(gpus, gpu)
        if i == len(gpus) or gpus[i] != gpu:
            return default
        return self._start[machine] + i

    def __getitem__(self, gpu: int) -> int:
        position = self.get(gpu)
        if position is None:
            raise KeyError(gpu)
        return position

    def __contains__(self, gpu: object) -> bool:
        return self.get(gpu) is not None

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(map(self._by_machine.__getitem__, self._machines))

    def __len__(self) -> int:
        return sum(map(len, self._by_machine.values()))


def pack_gang(
    cluster: Cluster,
    available: Iterable[int],
    gang: int,
    machine_order: Sequence[int] | None = None,
) -> tuple[int, ...] | None:
    """Pick ``gang`` GPUs from ``available`` on the best span, or None if too few."""
    return Packer(cluster, available).peek(gang, machine_order)


#: A running gang moves to another GPU type only if it runs at least this many times
#: faster there: a move costs a restart, and equal speeds never justify one.
MOVE_GAIN = 1.1


def fastest_place(pool: Packer, gang: int, profile: ModelProfile) -> tuple[int, ...] | None:
    """On a typed cluster, the GPUs of ``pool`` where a gang of this model runs fastest:
    for each type, the packer's best spot in it, priced at the type's speed times the
    spot's placement factor (None if no type holds the gang)."""
    cluster = pool.cluster
    best: tuple[int, ...] | None = None
    best_rate = 0.0
    for gpu_type in cluster.types:
        gpus = pool.peek(gang, gpu_type=gpu_type)
        if gpus is None:
            continue
        rate = profile.speed(gang, cluster.span(gpus), gpu_type)
        if rate > best_rate:
            best, best_rate = gpus, rate
    return best


def move_target(
    pool: Packer, profile: ModelProfile, current: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Where in ``pool`` a running gang on ``current`` should move (the fastest place, if
    it gains ``MOVE_GAIN``), or None to stay."""
    there = fastest_place(pool, len(current), profile)
    if there is None or not worth_moving(pool.cluster, profile, current, there):
        return None
    return there


def worth_moving(
    cluster: Cluster, profile: ModelProfile, current: Sequence[int], there: Sequence[int]
) -> bool:
    """Whether a running gang on ``current`` gains enough by moving to ``there``."""
    now = profile.speed(len(current), cluster.span(current), cluster.gang_type(current))
    then = profile.speed(len(there), cluster.span(there), cluster.gang_type(there))
    return then >= MOVE_GAIN * now
