"""The agent of one app: rho now, and a bounded bid menu for an offer.

A menu lists, for a thinned set of useful sizes, bundles the app scheduler would really
use: it walks the app's jobs (those whose leases end now first, on their own GPUs, then
waiting ones longest remaining first), packs each gang into the offer on the best span,
and offers prefixes of that chain. The arbiter hands each bidder the offer in its own
order (see ``OrderedPacker``), so that different bidders' small bundles are disjoint and
several of them can win in one auction.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from themis.agent.app_scheduler import order_measure, waiting_order
from themis.auction.bids import Bid, MenuEntry
from themis.fairness.ftf import RHO_MAX, RemainingWork, app_ideal_time, rho_over, starving_rho
from themis.fairness.ideal import PAPER
from themis.model.cluster import Cluster, SetShape, ShapeCounter
from themis.model.placement import OfferIndex, OrderedPacker, move_target
from themis.model.state import AppState, GangWork, JobState

#: How much worse than its worst useful outcome a starving app values winning nothing
#: (see ``Agent._nothing``): its smallest bundle is then worth log 2 in the auction's
#: objective, as much as doubling the GPUs of an app that runs. Measured: 2 and the old
#: RHO_MAX cap give the same max rho within 0.01 on contended and gang-heavy workloads
#: (docs/gangs.md); 2 keeps the auction's valuations finite and comparable.
NOTHING_FACTOR = 2.0

#: The prefix lengths (in gangs) a chain is sampled at: dense for small sizes, where each
#: GPU matters, then roughly geometric.
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Agent:
    """The agent of one app, through which the arbiter asks it everything: its rho and
    whether it is starving (``standing``), its rho with a GPU set (``rho_with``), its bid
    for an offer (``bid``: at most ``max_menu`` bundles), and which GPUs of a partly
    granted bundle it keeps (``units``, ``trim``: whole gangs)."""

    def __init__(
        self,
        app: AppState,
        cluster: Cluster,
        max_menu: int = 32,
        valuation: str = "paper",
        ideal: str = PAPER,
    ) -> None:
        self.app = app
        self.cluster = cluster
        self.max_menu = max_menu
        #: "paper": bids carry rho (elapsed time plus remaining time, over the fair time);
        #: "remaining": bids carry the remaining time alone over the fair time, so that the
        #: auction's valuation rho_none / rho of a bundle is the ratio of remaining times,
        #: which declaring F times the work (every job alike) leaves unchanged
        #: (``_bid_value``; docs/knowledge.md, "Valuations by remaining time").
        self.remaining_only = valuation == "remaining"
        #: The definition of the ideal time every rho of this agent divides by
        #: (``fairness/ideal.py``).
        self.ideal = ideal
        self._cuts: dict[tuple[Hashable, ...], list[int]] = {}
        # The last remaining work built (``_work``): from which dict, and for which
        # version of the app when it ran nothing (-1: it ran something).
        self._work_source: dict[int, GangWork] | None = None
        self._work_version = -1
        self._work_cache: RemainingWork | None = None

    def rho_with(
        self,
        now: float,
        n_avg: float,
        gpus: Sequence[int],
        remaining: dict[int, GangWork] | None = None,
    ) -> float:
        """rho(i, G): the app's estimated finish-time fairness if it held ``gpus`` from now.

        ``remaining`` is the app's ``remaining_by_gang(now)`` when the caller has it."""
        work = self._work(now, remaining)
        return self._rho(now, self._ideal(n_avg), work, self.cluster.shape_of(gpus))

    def standing(
        self,
        now: float,
        n_avg: float,
        gpus: Sequence[int],
        active_apps: int,
        remaining: dict[int, GangWork] | None = None,
    ) -> tuple[float, bool]:
        """The app's rho for ranking, and whether it is starving: rho with ``gpus`` when the
        app can run on them, else (rho at the RHO_MAX cap) its starving rho
        (``starving_rho``: a fair 1/N time share from now on), which is finite and grows
        with the wait."""
        work = self._work(now, remaining)
        ideal = self._ideal(n_avg)
        value = self._rho(now, ideal, work, self.cluster.shape_of(gpus))
        if value < RHO_MAX:
            return value, False
        shape = self.cluster.shape
        return starving_rho(now, self.app.arrival, work, shape, active_apps, ideal), True

    def rho_on(
        self,
        now: float,
        n: float,
        gpus: float,
        remaining: dict[int, GangWork] | None = None,
    ) -> float:
        """The app's rho if it held ``gpus`` GPUs of the cluster from now on until it
        finishes, its ideal time taken among ``n`` apps: the time since arrival plus its
        remaining work on ``gpus`` GPUs (``RemainingWork.time_on_share``: capped by its
        demand, each gang at its best placement, a gang larger than ``gpus`` in turns),
        over its ideal time. RHO_MAX when ``gpus`` is 0."""
        work = self._work(now, remaining)
        t_rest = work.time_on_share(gpus, self.cluster.shape)
        return rho_over(now, self.app.arrival, t_rest, self._ideal(n))

    def _ideal(self, n_avg: float) -> float:
        """The app's ideal time ``T_id`` among ``n_avg`` apps (``app_ideal_time``)."""
        return app_ideal_time(self.ideal, self.app, self.cluster.shape, n_avg)

    def _work(self, now: float, remaining: dict[int, GangWork] | None) -> RemainingWork:
        """The app's remaining work, ready to time (``remaining``: its
        ``remaining_by_gang(now)``, or None to ask the app).

        Built once where it cannot have changed: a round hands the standing and the bid
        the same ``remaining``; and an app that runs nothing makes no progress, so its
        remaining work is the same at every round until a job starts, stops or finishes
        (a new ``AppState.version``). The arbiter asks every wanting app every round, and
        most of them run nothing."""
        app = self.app
        idle = not app.held()
        if idle and self._work_version == app.version and self._work_cache is not None:
            return self._work_cache
        if remaining is None:
            remaining = app.remaining_by_gang(now)
        elif remaining is self._work_source and self._work_cache is not None:
            return self._work_cache
        work = RemainingWork(app.profile, remaining)
        self._work_source, self._work_cache = remaining, work
        self._work_version = app.version if idle else -1
        return work

    def _rho(self, now: float, ideal: float, work: RemainingWork, shape: SetShape) -> float:
        return rho_over(now, self.app.arrival, work.time_on(shape), ideal)

    def bid(
        self,
        now: float,
        n_avg: float,
        kept: Sequence[int],
        offer: Sequence[int],
        renewable: Sequence[JobState] = (),
        remaining: dict[int, GangWork] | None = None,
        active_apps: int | None = None,
        offer_index: tuple[OfferIndex, int] | None = None,
    ) -> Bid:
        """The app's bid for ``offer`` while it keeps ``kept``.

        ``offer`` is in the order the arbiter prefers this bidder to take GPUs in (each
        bidder's starts elsewhere); the chain walks it in that order. ``renewable`` are the
        app's jobs whose leases end now: bundles list their current GPUs first, so winning
        them back continues those jobs without a restart. ``remaining`` is the app's
        ``remaining_by_gang(now)`` when the caller has it. With ``active_apps`` (the apps
        active now), an app that cannot run on ``kept`` values winning nothing at its
        starving rho instead of the RHO_MAX cap (see ``_nothing``). ``offer_index``: the
        round's offer indexed once and where this bidder's ``offer`` starts in it (the same
        bid, built faster)."""
        work = self._work(now, remaining)
        ideal = self._ideal(n_avg)
        kept_shape = self.cluster.shape_of(kept)
        rho_none = self._bid_value(now, ideal, work, kept_shape)
        starving = active_apps is not None and rho_none >= RHO_MAX
        entries: list[MenuEntry] = []
        self._cuts = {}
        if self.cluster.typed:
            offer = self._fastest_first(offer)
            offer_index = None  # the order is this app's own
        chain = self._chain(now, kept, offer, renewable, offer_index)
        for bundle, cuts, shape in _prefixes(self.cluster, kept, chain):  # distinct: nested
            self._cuts[bundle] = cuts
            entries.append(MenuEntry(bundle, self._bid_value(now, ideal, work, shape)))
        if len(entries) > self.max_menu:
            # Thin evenly over sizes, always keeping the largest bundle.
            entries.sort(key=lambda e: (len(e.gpus), e.rho))
            step = len(entries) / self.max_menu
            picked = {int(i * step) for i in range(self.max_menu - 1)} | {len(entries) - 1}
            entries = [entries[i] for i in sorted(picked)]
        if starving and active_apps is not None:
            rho_none = self._nothing(now, ideal, work, active_apps, entries)
        return Bid(self.app.app_id, rho_none, tuple(entries))

    def _valued_since(self, now: float) -> float:
        """Where the time a bid counts starts: the app's arrival (its rho), or ``now`` with
        ``remaining_only`` (the remaining time alone, the elapsed time left out)."""
        return now if self.remaining_only else self.app.arrival

    def _bid_value(self, now: float, ideal: float, work: RemainingWork, shape: SetShape) -> float:
        """What the bid says the app's rho would be on ``shape`` (``_valued_since``)."""
        since = self._valued_since(now)
        return rho_over(now, since, work.time_on(shape), ideal)

    def _fastest_first(self, offer: Sequence[int]) -> list[int]:
        """The offer with the GPU types this app's model runs fastest on first (the
        arbiter's order within each type): the chain fills fast GPUs before slow ones, so
        the menu prices types through the rho each bundle really gives."""
        type_of = self.cluster.type_of
        speed = {t: self.app.profile.type_speed(t) for t in self.cluster.types}
        return sorted(offer, key=lambda g: -speed[type_of[g] or ""])

    def _nothing(
        self,
        now: float,
        ideal: float,
        work: RemainingWork,
        active_apps: int,
        entries: Sequence[MenuEntry],
    ) -> float:
        """What winning nothing is worth to an app that cannot run on what it keeps.

        Its rho is infinite in truth; the RHO_MAX cap made every starving app's every win
        worth the same huge gain, so two 1-GPU winners always outvoted one gang. Instead,
        nothing is valued ``NOTHING_FACTOR`` times worse than the worse of its starving rho
        and its worst bundle: every bundle it bids is worth more than nothing, and bundles
        are compared by the rho they really give (a gang's one useful bundle against a
        small app's several)."""
        fair = starving_rho(
            now,
            self._valued_since(now),
            work,
            self.cluster.shape,
            active_apps,
            ideal,
        )
        worst = max((e.rho for e in entries), default=fair)
        return min(max(fair, worst) * NOTHING_FACTOR, RHO_MAX)

    def _chain(
        self,
        now: float,
        kept: Sequence[int],
        preference: Sequence[int],
        renewable: Sequence[JobState],
        offer_index: tuple[OfferIndex, int] | None = None,
    ) -> list[tuple[int, ...]]:
        if offer_index is None:
            pool = OrderedPacker(self.cluster, preference)
        else:
            pool = OrderedPacker(self.cluster, preference, *offer_index)
        gangs: list[tuple[int, ...]] = []
        kept_set = set(kept)
        placed = {id(j) for j in self.app.running_jobs() if kept_set.issuperset(j.gpus)}
        typed = self.cluster.typed
        left = order_measure(self.app)
        for job in sorted(renewable, key=lambda j: -left(j, now)):
            if typed and job.gpus and self._moves(pool, job):
                continue  # placed with the waiting jobs, fastest type first
            if job.gpus and pool.take_exact(job.gpus):
                gangs.append(job.gpus)
                placed.add(id(job))
        for job in waiting_order(self.app, now, placed):
            if not pool.size:
                break
            gpus = pool.take(job.spec.gang)
            if gpus is not None:
                gangs.append(gpus)
        return gangs

    def _moves(self, pool: OrderedPacker, job: JobState) -> bool:
        """Whether a job whose lease ends runs enough faster on another type the offer
        holds to be worth a restart (typed clusters: a job never stays on a K80 while a
        free V100 would run it four times faster)."""
        return move_target(pool, self.app.profile, job.gpus) is not None

    def units(self, bundle: tuple[Hashable, ...]) -> list[int] | None:
        """The GPU counts of ``bundle`` this app can use: its gang boundaries (None: a
        bundle this agent did not bid, any count)."""
        return self._cuts.get(bundle)

    def trim(self, app_id: str, bundle: tuple[Hashable, ...], count: int) -> tuple[Hashable, ...]:
        """Whole gangs only: the longest prefix of the bundle's gangs within ``count`` GPUs."""
        cuts = self._cuts.get(bundle)
        if cuts is None:
            return bundle[:count]
        keep = max((c for c in cuts if c <= count), default=0)
        return bundle[:keep]


def _prefixes(
    cluster: Cluster, kept: Sequence[int], chain: list[tuple[int, ...]]
) -> list[tuple[tuple[int, ...], list[int], SetShape]]:
    """Sampled prefixes of a chain of gangs: (bundle, gang boundaries, shape of kept+bundle),
    the shapes counted along the chain (``ShapeCounter``)."""
    if not chain:
        return []
    last = len(chain)
    sizes = {s for s in _SIZES if s < last}
    sizes.add(last)
    if cluster.typed:
        return _typed_prefixes(cluster, kept, chain, sizes)
    counts = ShapeCounter(cluster)
    counts.add(kept)
    flat: list[int] = []
    cuts = [0]
    out = []
    for n, gang in enumerate(chain, start=1):
        counts.add(gang)
        flat.extend(gang)
        cuts.append(len(flat))
        if n in sizes:
            out.append((tuple(flat), list(cuts), counts.shape()))
    return out


def _typed_prefixes(
    cluster: Cluster, kept: Sequence[int], chain: list[tuple[int, ...]], sizes: set[int]
) -> list[tuple[tuple[int, ...], list[int], SetShape]]:
    """``_prefixes`` on a typed cluster: each sampled prefix's shape has parts per type."""
    flat: list[int] = []
    cuts = [0]
    out = []
    for n, gang in enumerate(chain, start=1):
        flat.extend(gang)
        cuts.append(len(flat))
        if n in sizes:
            out.append((tuple(flat), list(cuts), cluster.shape_of((*kept, *flat))))
    return out
