"""The agent of one app: rho now, and a bounded bid menu for an offer.

A menu lists, for a thinned set of useful sizes, bundles the app scheduler would really
use: it walks the app's jobs (those it may keep running first, then waiting ones longest
remaining first), packs each gang into the offer on the best span, and offers prefixes of
that chain. Two chains that prefer opposite ends of the cluster give the auction disjoint
alternatives when several apps want the same best machines.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from themis.auction.bids import Bid, MenuEntry
from themis.fairness.ftf import estimate_time, rho
from themis.model.cluster import Cluster
from themis.model.placement import pack_gang
from themis.model.state import AppState, JobState

#: The prefix lengths (in gangs) a chain is sampled at: dense for small sizes, where each
#: GPU matters, then roughly geometric.
_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 192, 256, 384, 512)


class Agent:
    def __init__(self, app: AppState, cluster: Cluster, max_menu: int = 32) -> None:
        self.app = app
        self.cluster = cluster
        self.max_menu = max_menu
        self._cuts: dict[tuple[Hashable, ...], list[int]] = {}

    def rho_with(self, now: float, n_avg: float, gpus: Sequence[int]) -> float:
        """rho(i, G): the app's estimated finish-time fairness if it held ``gpus`` from now."""
        remaining = self.app.remaining_by_gang(now)
        return self._rho(now, n_avg, remaining, gpus)

    def _rho(self, now: float, n_avg: float, remaining: dict, gpus: Sequence[int]) -> float:
        t_rem = estimate_time(self.app.profile, remaining, self.cluster.shape_of(gpus))
        return rho(now, self.app.arrival, t_rem, self.app.t_cluster, n_avg)

    def bid(
        self,
        now: float,
        n_avg: float,
        kept: Sequence[int],
        offer: Sequence[int],
        renewable: Sequence[JobState] = (),
    ) -> Bid:
        """The app's bid for ``offer`` while it keeps ``kept``. ``renewable`` are its jobs
        whose leases end now: bundles list their current GPUs first, so winning them back
        continues those jobs without a restart."""
        remaining = self.app.remaining_by_gang(now)
        rho_none = self._rho(now, n_avg, remaining, kept)
        kept_jobs = {id(j) for j in self.app.jobs if j.gpus and set(j.gpus) <= set(kept)}
        order = sorted(self.cluster.machine_gpus)
        chains = [self._chain(now, offer, renewable, kept_jobs, order)]
        chains.append(self._chain(now, offer, renewable, kept_jobs, order[::-1]))
        entries: list[MenuEntry] = []
        seen: set[frozenset[int]] = set()
        self._cuts = {}
        for chain in chains:
            for bundle, cuts in _prefixes(chain):
                key = frozenset(bundle)
                if key in seen:
                    continue
                seen.add(key)
                self._cuts[bundle] = cuts
                entries.append(MenuEntry(bundle, self._rho(now, n_avg, remaining, [*kept, *bundle])))
        if len(entries) > self.max_menu:
            # Keep the largest bundle of each chain and the best value per size.
            entries.sort(key=lambda e: (len(e.gpus), e.rho))
            step = len(entries) / self.max_menu
            picked = {int(i * step) for i in range(self.max_menu - 1)} | {len(entries) - 1}
            entries = [entries[i] for i in sorted(picked)]
        return Bid(self.app.app_id, rho_none, tuple(entries))

    def _chain(
        self,
        now: float,
        offer: Sequence[int],
        renewable: Sequence[JobState],
        kept_jobs: set[int],
        machine_order: list[int],
    ) -> list[tuple[int, ...]]:
        available = set(offer)
        gangs: list[tuple[int, ...]] = []
        placed: set[int] = set(kept_jobs)
        for job in sorted(renewable, key=lambda j: -j.remaining_at(now)):
            if job.gpus and available.issuperset(job.gpus):
                gangs.append(job.gpus)
                available.difference_update(job.gpus)
                placed.add(id(job))
        waiting = [j for j in self.app.jobs if j.finished_at is None and id(j) not in placed]
        waiting.sort(key=lambda j: -j.remaining_at(now))
        smallest = min((j.gang for j in waiting), default=0)
        for job in waiting:
            if len(available) < smallest:
                break
            if job.gang > len(available):
                continue
            gpus = pack_gang(self.cluster, available, job.gang, machine_order)
            if gpus is not None:
                gangs.append(gpus)
                available.difference_update(gpus)
        return gangs

    def trim(self, app_id: str, bundle: tuple[Hashable, ...], count: int) -> tuple[Hashable, ...]:
        """Whole gangs only: the longest prefix of the bundle's gangs within ``count`` GPUs."""
        cuts = self._cuts.get(bundle)
        if cuts is None:
            return bundle[:count]
        keep = max((c for c in cuts if c <= count), default=0)
        return bundle[:keep]


def _prefixes(chain: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], list[int]]]:
    out = []
    sizes = [s for s in _SIZES if s < len(chain)] + ([len(chain)] if chain else [])
    flat: list[int] = []
    cuts: list[int] = [0]
    for gang in chain:
        flat.extend(gang)
        cuts.append(len(flat))
    for s in sizes:
        out.append((tuple(flat[: cuts[s]]), cuts[: s + 1]))
    return out
