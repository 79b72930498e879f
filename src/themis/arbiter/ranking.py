"""The round's ranking step: the order in which wanting apps are offered GPUs, served by
the leftover step and reserved for (``--ranking``, ``options.RANKINGS``), and the rules
that make the rank.

Worst first, by rank (ties: arrival). Under the declared and the tiered ranking, apps
that cannot run at all come before the others, as with an infinite rho, told apart by
their starving rho. The verified rankings read observed progress only (``verified_rho``);
an app that has made nothing ranks by its siblings' progress (``rank_fresh_by_siblings``),
its owner's cohort (``rank_by_cohort``) and its standing one lease later
(``rank_fresh_by_standing``); ``prospective`` ranks by the rho each app would reach with
the GPUs it would get (``prospective_ranks``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from themis.arbiter.options import PROSPECTIVE
from themis.arbiter.round_state import Knobs, RoundState
from themis.fairness.ftf import (
    RHO_MAX,
    RemainingWork,
    app_ideal_time,
    capped_rho,
    made_fair_time,
    verified_rho,
)
from themis.fairness.ideal import PAPER, ideal_time
from themis.mechanism.view import SchedulingView
from themis.model.cluster import SetShape
from themis.model.state import AppState, GangWork

#: Per app that ran nothing when last ranked: its version then, the time alone on the
#: cluster of what it had made, and that work (``verified_rank``).
MadeAlone = dict[AppState, tuple[int, float, RemainingWork]]


def ranking(state: RoundState, made_alone: MadeAlone) -> None:
    """Fill ``rank`` and sort ``wanting`` worst-off first; ``made_alone``: the cache of
    ``verified_rank``, kept by the arbiter from round to round."""
    knobs, view, now = state.knobs, state.view, state.now
    wanting, n_avg = state.wanting, state.n_avg
    starving = state.starving
    if knobs.ranking == PROSPECTIVE:
        rank = prospective_ranks(
            knobs, view, wanting, state.kept, len(state.pool), n_avg, state.remaining, now
        )
        starving = set()
    elif knobs.ranking != "declared":
        shape = knobs.cluster.shape
        if len(made_alone) > 2 * len(view.apps) + 64:  # forget finished apps
            active = set(view.apps)
            for gone in [a for a in made_alone if a not in active]:
                del made_alone[gone]
        rank = {
            a.app_id: verified_rank(
                made_alone, a, now, rank_n(knobs.ranking, view, a, n_avg[a.app_id]), knobs
            )
            for a in wanting
        }
        if any(a.spec.owner is not None for a in wanting):

            def n_of(app: AppState) -> float:
                return rank_n(knobs.ranking, view, app, view.n_avg(app))

            rank_fresh_by_siblings(view, wanting, rank, now, shape, n_of, knobs.ideal)
            rank_by_cohort(view, wanting, rank, now, shape, knobs.lease, n_of, knobs.ideal)
        if knobs.ranking in ("verified", "verified-avg-n"):

            def ideal_of(app: AppState) -> float:
                return app_ideal_time(knobs.ideal, app, shape, n_avg[app.app_id])

            rank_fresh_by_standing(wanting, rank, state.rhos, ideal_of, knobs.lease)
            starving = set()
    else:
        rank = state.rhos
    wanting.sort(key=lambda a: (a.app_id not in starving, -rank[a.app_id], a.arrival, a.app_id))
    state.rank, state.starving = rank, starving


def rank_n(ranking: str, view: SchedulingView, app: AppState, n_avg: float) -> float:
    """The N of an app's verified rank: the larger of its ``N_avg`` so far and the
    slices the cluster is cut into now (``verified``), or ``N_avg`` alone (the other
    rankings, ``verified-avg-n`` among them: the previous default's decisions).

    An app that ran alone has ``N_avg`` near 1, so its verified rho reads about 1 (it
    ran at its speed alone, which a 1/1 share promises) however much it was given. Once
    others arrive its ideal time grows with N: by ``N_avg`` so far it looks as badly off
    as an app that got a 1/N share, and a newcomer whose whole ideal time is a few
    leases waits behind it (measured on the 16-GPU gang mix at seed 8: a long sweep alone
    for four hours ranked 0.98, a short sweep beside it 0.50; under the oracle the
    long sweep ends at 0.22). With N now the long sweep ranks 0.49. An app whose N fell
    (others finished) keeps its ``N_avg``: it was served among more. Both are observed
    by the arbiter, never declared."""
    if ranking not in ("verified", PROSPECTIVE):
        return n_avg
    return max(n_avg, float(view.slices(app)))


def prospective_ranks(
    knobs: Knobs,
    view: SchedulingView,
    wanting: Sequence[AppState],
    kept: Mapping[str, Sequence[int]],
    free: int,
    n_avg: Mapping[str, float],
    remaining: Mapping[str, dict[int, GangWork] | None],
    now: float,
) -> dict[str, float]:
    """Each wanting app's rank under ``prospective``: the rho it would reach if, from
    now on, it held the GPUs it would get this round, ``min(demand, kept + free)``
    (what it keeps through the round plus every GPU up for grabs, capped by its
    demand: what the first app of a greedy division gets), until it finishes.

    The verified rank reads an app's standing with what it holds: a waiting app and
    an app that has just started both look far behind, so the worst-off by that
    standing win whatever their remaining work, and an app that would finish soon on
    a few GPUs waits behind apps that would not. Measured against PCS's Themis
    (docs/results.md, "Against PCS's Themis"), which ranks this way: 24.8 h of a
    31.0 h mean-JCT gap came from that rank. Here the rank is that rho, while the
    auction, the leases and the leftover step stay as they are.

    Observed by the arbiter: the time since arrival, the GPUs each app keeps, the free
    GPUs, the progress each app made, N (the larger of ``N_avg`` and the slices now,
    as ``verified``). Declared: the app's work (so its remaining work, declared minus
    made, and its ideal time), as under ``declared``; a uniform misstatement of work
    moves the rank only through the time already waited (docs/knowledge.md). The
    owner rules of the verified rank (siblings, cohorts) are not applied."""
    ranks: dict[str, float] = {}
    for a in wanting:
        gets = min(a.demand(), len(kept[a.app_id]) + free)
        n = rank_n(knobs.ranking, view, a, n_avg[a.app_id])
        ranks[a.app_id] = knobs.agent(a).rho_on(now, n, gets, remaining[a.app_id])
    return ranks


def verified_rank(
    made_alone: MadeAlone, app: AppState, now: float, n_avg: float, knobs: Knobs
) -> float:
    """``verified_rho`` of ``app`` on the cluster.

    What an app that runs nothing has made, and its time alone on the cluster, cannot
    change until a job of it starts, stops or finishes (its ``version``): that time is
    kept in ``made_alone`` for such apps, most of the wanting apps of a round; the time
    since arrival and N are new each round. The same floats as ``verified_rho``
    (``made_fair_time`` is that time's ideal time among N)."""
    shape = knobs.cluster.shape
    if app.held():
        done = app.done_by_gang(now)
        return verified_rho(now, app.arrival, app.profile, done, shape, n_avg, knobs.ideal)
    cached = made_alone.get(app)
    if cached is None or cached[0] != app.version:
        made = RemainingWork(app.profile, app.done_by_gang(now))
        cached = made_alone[app] = (app.version, made.time_on(shape), made)
    fair = ideal_time(knobs.ideal, cached[1], cached[2], shape, n_avg)
    return capped_rho(now - app.arrival, fair)


def rank_fresh_by_standing(
    wanting: Sequence[AppState],
    rank: dict[str, float],
    standing: dict[str, float],
    ideal_of: Callable[[AppState], float],
    lease: float,
) -> None:
    """An app that has made nothing yet ranks, in place of ``RHO_MAX``, by its standing
    one lease later: the rho it reaches if it is passed over for one more lease and then
    holds a 1/N slice (its starving rho, the wait counted, plus ``lease / T_id``). With
    it every app is in one order, none ahead for holding nothing.

    Measured: ranked first, every new app jumped the running apps, however little it was
    owed. Under 3x contention small sweeps finished at rho 0.02-0.3 while the large ones
    all ended near 0.62 (the oracle: 0.52). A small sweep's slice-rho is low (its ideal
    time is N times its time alone, far more than it needs), so it now waits its turn; an
    app whose ideal time is short (a few minutes, few apps) loses much by one more lease
    of waiting, and the added lease puts it ahead of running apps that lose little. An
    app that holds nothing after making progress rises by its verified rho as it waits.
    Only apps that have made nothing are ranked from declared work, as the starving
    tier's order was; at arrival a uniform misstatement of work does not move the
    slice-rho (``T_sh`` and ``T_id`` scale alike), the wait term does. ``ideal_of``: an
    app's ideal time ``T_id`` (``app_ideal_time``)."""
    for a in wanting:
        if rank[a.app_id] >= RHO_MAX:
            ideal = ideal_of(a)
            rank[a.app_id] = standing[a.app_id] + (lease / ideal if ideal > 0 else 0.0)


def rank_fresh_by_siblings(
    view: SchedulingView,
    wanting: Sequence[AppState],
    rank: dict[str, float],
    now: float,
    shape: SetShape,
    n_of: Callable[[AppState], float] | None = None,
    ideal: str = PAPER,
) -> None:
    """An app that has made nothing yet ranks ``RHO_MAX`` (first in the offer and the
    leftover), unless its owner runs another app that has made progress: it then ranks
    as the worst-off of those siblings (their verified rho), in place in ``rank``.

    Measured: a sweep split into two apps arriving together has one part running and the
    other, having made nothing, ranked first beside it at every round until it gets a
    GPU; over eight contexts ``split:2`` paid some liars +8% to +17% in every context. An
    honest owner's new app keeps its own claim through its owner's slice (``N_eff``) and
    the auction; only its newcomer's rank is the owner's. Apps without owners are their
    own tenants and rank as before, bit for bit. ``n_of``: the N of a verified rank
    (``rank_n``; default the app's ``N_avg``); ``ideal``: the definition of
    the ideal time (``fairness/ideal.py``)."""
    n_of = view.n_avg if n_of is None else n_of
    fresh = [a for a in wanting if rank[a.app_id] >= RHO_MAX and a.spec.owner is not None]
    active = owners_apps(view, fresh)
    for app in fresh:
        made = [
            value
            for other in active[app.spec.tenant]
            if other is not app
            for value in (
                verified_rho(
                    now,
                    other.arrival,
                    other.profile,
                    other.done_by_gang(now),
                    shape,
                    n_of(other),
                    ideal,
                ),
            )
            if value < RHO_MAX
        ]
        if made:
            rank[app.app_id] = max(made)


def rank_by_cohort(
    view: SchedulingView,
    wanting: Sequence[AppState],
    rank: dict[str, float],
    now: float,
    shape: SetShape,
    window: float,
    n_of: Callable[[AppState], float] | None = None,
    ideal: str = PAPER,
) -> None:
    """An owner's app ranks no worse than its cohort: itself and the owner's active apps
    that arrived no earlier than ``window`` seconds (one lease) before it, ranked as one
    app by their pooled verified rho (the sum of their times since arrival over the sum
    of the fair times of what they made). Lowers ``rank`` in place; never raises it.

    Measured: the parts of a split sweep progress unevenly (the arbiter serves one, then
    the other), and the part that has made least ranks worst-off by its own verified rho,
    outranks other tenants and takes their GPUs (``split:2`` at seed 101: +10.4% in all
    eight contexts). Pooled, the parts rank as the sweep would. The cohort looks forward
    only: an honest owner's app that arrives later is not ranked by an older app's
    progress (pooling every app of an owner cost honest owners a max rho of 1.6-1.9 on
    generated workloads); parts submitted apart (``stagger:S``) stay one cohort while S is
    at most a lease. Apps without owners rank as before, bit for bit. ``n_of`` and
    ``ideal``: as in ``rank_fresh_by_siblings``."""
    n_of = view.n_avg if n_of is None else n_of
    active = owners_apps(view, wanting)
    for app in wanting:
        siblings = active.get(app.spec.tenant, ())
        cohort = [o for o in siblings if o.arrival >= app.arrival - window]
        if len(cohort) < 2:
            continue
        elapsed = sum(now - o.arrival for o in cohort)
        fair = sum(
            made_fair_time(o.profile, o.done_by_gang(now), shape, n_of(o), ideal) for o in cohort
        )
        pooled = capped_rho(elapsed, fair)
        if pooled < rank[app.app_id]:
            rank[app.app_id] = pooled


def owners_apps(view: SchedulingView, apps: Sequence[AppState]) -> dict[str, list[AppState]]:
    """Every active app of each owner among ``apps`` (apps without an owner left out), in
    the view's order: one pass over the view for the owner rules of a round."""
    active: dict[str, list[AppState]] = {
        a.spec.tenant: [] for a in apps if a.spec.owner is not None
    }
    if active:
        for other in view.apps:
            if other.spec.tenant in active:
                active[other.spec.tenant].append(other)
    return active
