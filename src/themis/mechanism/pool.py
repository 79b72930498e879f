"""The free GPUs as the simulator keeps them from round to round, indexed the way
``Packer`` searches them, so that carving a gang costs the few machines it looks at,
not the whole free pool.

``Packer(cluster, free).take(gang)`` (untyped clusters, no machine order) picks the
machine with the fewest free GPUs that still holds the gang (ties: the lowest machine id),
else spreads the gang over the rack with the fewest free GPUs that holds it, else over
the racks with the most free GPUs first; within a rack, the fullest machines first. Each
of those choices is a function of the free set alone. ``FreePool`` keeps per machine its
free GPUs (ascending), per count of free GPUs the machines with that count (ascending)
and per rack its free count, updated as GPUs are freed and taken, and answers ``take``
with exactly the GPUs ``Packer`` would return on the same free set
(``tests/simulator/test_incremental.py`` checks it against ``Packer`` on random pools).

A policy may ``take`` from the pool during its round (as from a ``Packer`` built on the
free GPUs), or draft other changes (``draft_add``, ``draft_remove``); the simulator then
``settle``s the pool on the round's outcome (or ``restore``s it, if the round is refused).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet

from themis.model.cluster import Cluster


class FreePool(AbstractSet[int]):
    def __init__(self, cluster: Cluster, free: Iterable[int] = ()) -> None:
        self.cluster = cluster
        self.machine_of = cluster.machine_of
        self.rack_of = cluster.rack_of
        self.free: set[int] = set()
        self.by_machine: dict[int, list[int]] = {}  # machine -> its free GPUs, ascending
        per_machine: dict[int, int] = {}
        self.rack_of_machine: dict[int, int] = {}
        self.machines_of_rack: dict[int, list[int]] = {}
        for g in range(cluster.size):
            m = self.machine_of[g]
            per_machine[m] = per_machine.get(m, 0) + 1
            if m not in self.rack_of_machine:
                r = self.rack_of[g]
                self.rack_of_machine[m] = r
                self.machines_of_rack.setdefault(r, []).append(m)
        for machines in self.machines_of_rack.values():
            machines.sort()
        widest = max(per_machine.values(), default=0)
        # count -> machines with exactly that many free GPUs, ascending (count >= 1)
        self.buckets: list[list[int]] = [[] for _ in range(widest + 1)]
        self.rack_free: dict[int, int] = dict.fromkeys(self.machines_of_rack, 0)
        self.taken: list[int] = []  # a policy's draft changes this round (``restore``)
        for g in free:
            self.add(g)

    # -- the set of free GPU ids ---------------------------------------------------------

    def __contains__(self, g: object) -> bool:
        return g in self.free

    def __iter__(self) -> Iterator[int]:
        return iter(self.free)

    def __len__(self) -> int:
        return len(self.free)

    def add(self, g: int) -> None:
        if g in self.free:
            return
        self.free.add(g)
        m = self.machine_of[g]
        gpus = self.by_machine.get(m)
        if gpus is None:
            gpus = self.by_machine[m] = []
        n = len(gpus)
        if n:
            bucket = self.buckets[n]
            del bucket[bisect_left(bucket, m)]
        insort(gpus, g)
        insort(self.buckets[n + 1], m)
        self.rack_free[self.rack_of_machine[m]] += 1

    def remove(self, g: int) -> None:
        if g not in self.free:
            return
        self.free.remove(g)
        m = self.machine_of[g]
        gpus = self.by_machine[m]
        n = len(gpus)
        bucket = self.buckets[n]
        del bucket[bisect_left(bucket, m)]
        del gpus[bisect_left(gpus, g)]
        if n > 1:
            insort(self.buckets[n - 1], m)
        self.rack_free[self.rack_of_machine[m]] -= 1

    # -- Packer's take ---------------------------------------------------------------------

    def take(self, gang: int) -> tuple[int, ...] | None:
        """Remove and return the GPUs ``Packer(cluster, free).take(gang)`` would (untyped
        clusters), or None if fewer than ``gang`` are free. Undone by ``restore``."""
        gpus = self.peek(gang)
        if gpus is not None:
            self.draft_remove(gpus)
        return gpus

    def draft_remove(self, gpus: Iterable[int]) -> None:
        """Remove these (free) GPUs for this round only: undone by ``restore``."""
        for g in gpus:
            if g in self.free:
                self.remove(g)
                self.taken.append(g)

    def draft_add(self, gpus: Iterable[int]) -> None:
        """Add these GPUs for this round only: undone by ``restore``."""
        for g in gpus:
            if g not in self.free:
                self.add(g)
                self.taken.append(~g)  # ~g: an addition to undo

    def restore(self) -> None:
        """Undo every draft change since the last ``restore``, last first."""
        for g in reversed(self.taken):
            if g >= 0:
                self.add(g)
            else:
                self.remove(~g)
        self.taken.clear()

    def settle(self, freed: Iterable[int], taken: Iterable[int]) -> None:
        """Become the free set as it was before this round's drafts, plus ``freed``, minus
        ``taken`` (a round's outcome: the GPUs of the jobs that stopped, those of the jobs
        that started), touching only the GPUs that differ from the drafted pool.

        What ``restore`` and then a ``remove``/``add`` per GPU would leave, without undoing
        the drafts only to redo them: a policy that carved the round from the pool (as
        Gandiva does with every GPU it rotates) has usually drafted the outcome already.
        The pool's structures are a function of the free set alone, so the result is the
        same whatever the order of the changes.
        """
        target: dict[int, bool] = {}  # GPU -> whether it must end up free
        for g in self.taken:  # oldest first: a GPU's first draft tells how it was before
            if g >= 0:
                target.setdefault(g, True)  # drafted out: it was free
            else:
                target.setdefault(~g, False)  # drafted in: it was not
        self.taken.clear()
        for g in freed:
            target[g] = True
        for g in taken:
            target[g] = False
        free = self.free
        for g, want in target.items():
            if want:
                if g not in free:
                    self.add(g)
            elif g in free:
                self.remove(g)

    def peek(self, gang: int) -> tuple[int, ...] | None:
        if gang <= 0 or len(self.free) < gang:
            return None
        buckets = self.buckets
        for n in range(gang, len(buckets)):
            if buckets[n]:
                return tuple(self.by_machine[buckets[n][0]][:gang])
        by_machine = self.by_machine
        rack_free = self.rack_free
        racks = [r for r, size in rack_free.items() if size >= gang]
        if racks:
            chosen = [min(racks, key=lambda r: (rack_free[r], r))]
        else:
            chosen = sorted(
                (r for r, size in rack_free.items() if size), key=lambda r: (-rack_free[r], r)
            )
        picked: list[int] = []
        for r in chosen:
            machines = [m for m in self.machines_of_rack[r] if by_machine.get(m)]
            for m in sorted(machines, key=lambda m: (-len(by_machine[m]), m)):
                picked.extend(by_machine[m][: gang - len(picked)])
                if len(picked) == gang:
                    return tuple(sorted(picked))
        raise AssertionError("unreachable: enough GPUs were counted")
