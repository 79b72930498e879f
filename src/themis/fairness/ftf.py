"""Finish-time fairness estimates.

One estimator serves everything (T_cluster at arrival, T_sh for bids, the post-hoc
report) so that an app alone on the whole cluster has rho exactly 1 at arrival.

The estimator is the classic lower bound of a list schedule: an app's remaining time on a
GPU set is the larger of (its remaining GPU-seconds spread over the GPUs it can use) and
(its longest job's remaining time on its gang). Each job is charged the placement factor
of the best spot its gang can find in the set, which is what the app scheduler does.
"""

from __future__ import annotations

import math

from themis.fairness.ideal import PAPER, ideal_time
from themis.model.cluster import SetShape
from themis.model.profiles import ModelProfile
from themis.model.state import AppState, GangWork

#: rho of an app that cannot run at all on the GPUs considered. Finite so that the auction's
#: proportional-fair objective stays defined: an app that gets nothing scores log(RHO_MAX).
RHO_MAX = 1e6


def estimate_time(
    profile: ModelProfile,
    remaining_by_gang: dict[int, GangWork],
    shape: SetShape,
) -> float:
    """Seconds to finish the given remaining work on a GPU set of this shape (inf if some
    job cannot run on it at all; 0 if nothing remains)."""
    return RemainingWork(profile, remaining_by_gang).time_on(shape)


class RemainingWork:
    """One app's remaining work, ready to be timed on many GPU set shapes.

    A bid times the same work on a dozen bundles: what does not depend on the shape (the
    work in seconds, the demand) is computed once. ``time_on`` does the same float
    operations in the same order as the estimate always did, so results are unchanged.
    """

    __slots__ = ("gangs", "demand", "cross_machine", "cross_rack", "empty", "speeds", "profile")

    def __init__(self, profile: ModelProfile, remaining_by_gang: dict[int, GangWork]) -> None:
        # Built for every rho the arbiter asks (about a million times a run): one pass.
        tpi = profile.time_per_iteration
        self.empty = not remaining_by_gang
        gangs: list[tuple[int, float, float]] = []
        demand = 0
        for gang, (total, most, jobs) in remaining_by_gang.items():
            if total > 0:
                gangs.append((gang, total * tpi, most * tpi))
                demand += gang * jobs
        #: (gang, total seconds on one GPU, longest job's seconds on one GPU)
        self.gangs = gangs
        self.demand = demand
        self.cross_machine = profile.cross_machine
        self.cross_rack = profile.cross_rack
        self.profile = profile
        #: GPU type -> how many times faster than ``time_per_iteration`` (typed clusters)
        self.speeds = {t: tpi / s for t, s in profile.type_times} if profile.type_times else {}

    def time_on(self, shape: SetShape) -> float:
        """Seconds to finish on a GPU set of this shape (see ``estimate_time``)."""
        if self.empty:
            return 0.0
        if shape.parts:
            return self._typed_time(shape.parts, None)
        gpu_seconds = 0.0
        longest = 0.0
        machine_max, rack_max, count = shape.machine_max, shape.rack_max, shape.count
        for gang, seconds, most in self.gangs:
            # the placement factor of the best spot for this gang (ModelProfile.best_factor_on)
            if gang <= machine_max:
                factor = 1.0
            elif gang <= rack_max:
                factor = self.cross_machine
            elif gang <= count:
                factor = self.cross_rack
            else:
                factor = 0.0
            if factor == 0.0:
                return math.inf
            gpu_seconds += seconds / factor
            value = most / (gang * factor)
            if value > longest:
                longest = value
        if gpu_seconds == 0.0:
            return 0.0
        usable = min(count, self.demand)
        return max(gpu_seconds / usable, longest)

    def time_on_share(self, share: float, cluster: SetShape) -> float:
        """Seconds to finish holding a time share of ``share`` GPUs of ``cluster`` from now.

        A share is GPU-time, not a GPU set: a gang larger than the share still runs, in
        turns, at its best placement in the cluster. This is the fluid 1/N share a starving
        app is promised (see ``starving_rho``); it is inf only if some gang cannot run on the
        cluster at all or the share is 0."""
        if self.empty:
            return 0.0
        if share <= 0:
            return math.inf
        if cluster.parts:
            return self._typed_time(cluster.parts, share)
        gpu_seconds = 0.0
        longest = 0.0
        for gang, seconds, most in self.gangs:
            if gang <= cluster.machine_max:
                factor = 1.0
            elif gang <= cluster.rack_max:
                factor = self.cross_machine
            elif gang <= cluster.count:
                factor = self.cross_rack
            else:
                return math.inf
            gpu_seconds += seconds / factor
            longest = max(longest, most / (gang * factor))
        if gpu_seconds == 0.0:
            return 0.0
        return max(gpu_seconds / min(share, self.demand), longest)

    def _typed_time(self, parts: tuple[tuple[str, SetShape], ...], share: float | None) -> float:
        """``time_on`` (``share`` None) or ``time_on_share`` on a typed set.

        Each gang runs inside one type, the one where it runs fastest (type speed times
        placement factor); the work is spread over the app's usable GPUs weighted by
        speed: its fastest ``demand`` GPUs of the set, or, for a time share, ``share``
        GPUs of the set's mean speed. The same list-schedule bound as the untyped
        estimate, in GPU-seconds of the reference type."""
        speeds = self.speeds
        gpu_seconds = 0.0
        longest = 0.0
        for gang, seconds, most in self.gangs:
            best = 0.0
            best_factor = 0.0
            for gpu_type, part in parts:
                factor = self.profile.best_factor_on(gang, part)
                effective = speeds.get(gpu_type, 1.0) * factor  # no types known: alike
                if effective > best:
                    best, best_factor = effective, factor
            if best == 0.0:
                return math.inf
            gpu_seconds += seconds / best_factor
            longest = max(longest, most / (gang * best))
        if gpu_seconds == 0.0:
            return 0.0
        if share is None:
            capacity = 0.0
            left = self.demand
            for gpu_type, part in sorted(parts, key=lambda p: -speeds.get(p[0], 1.0)):
                used = min(part.count, left)
                capacity += used * speeds.get(gpu_type, 1.0)
                left -= used
                if not left:
                    break
        else:
            total = sum(part.count for _, part in parts)
            mean = sum(part.count * speeds.get(t, 1.0) for t, part in parts) / total
            capacity = min(share, self.demand) * mean
        return max(gpu_seconds / capacity, longest)


def t_cluster(
    profile: ModelProfile, remaining_by_gang: dict[int, GangWork], cluster_shape: SetShape
) -> float:
    """Running time alone on the whole cluster: every job on its best placement, the GPUs
    used capped by the app's demand (``estimate_time`` caps by demand itself)."""
    return estimate_time(profile, remaining_by_gang, cluster_shape)


def rho(
    now: float, arrival: float, remaining_time: float, t_cluster_s: float, n_avg: float
) -> float:
    """rho = T_sh / T_id with the paper's ``T_id = T_cluster * N``, capped at RHO_MAX."""
    return rho_over(now, arrival, remaining_time, t_cluster_s * n_avg)


def rho_over(now: float, arrival: float, remaining_time: float, t_id: float) -> float:
    """rho = T_sh / T_id for an ideal time ``t_id`` of either definition
    (``app_ideal_time``), capped at RHO_MAX."""
    t_sh = (now - arrival) + remaining_time
    if t_id <= 0:
        return 1.0 if t_sh <= 0 else RHO_MAX
    return min(t_sh / t_id, RHO_MAX)


def app_ideal_time(definition: str, app: AppState, cluster: SetShape, n: float) -> float:
    """The app's ``T_id`` among ``n`` apps by ``definition`` (``fairness/ideal.py``), from
    what it declared at arrival: ``app.t_cluster`` and, for a slice, its declared work,
    built once per app (``AppState.ideal_work``) from the same jobs ``T_cluster`` was."""
    if definition == PAPER:
        return app.t_cluster * n
    work: RemainingWork | None = app.ideal_work
    if work is None:
        fresh = AppState(app.spec, app.profile, 0.0).remaining_by_gang(app.arrival)
        work = app.ideal_work = RemainingWork(app.profile, fresh)
    return ideal_time(definition, app.t_cluster, work, cluster, n)


def starving_rho(
    now: float,
    arrival: float,
    work: RemainingWork,
    cluster: SetShape,
    active_apps: int,
    t_id: float,
) -> float:
    """A finite rho for an app that cannot run on what it holds (T_sh is infinite).

    It is the rho the app would reach if, from now on, it held a fair 1/N time share of the
    cluster (N: the apps active now). The wait so far counts in full, so the value grows
    with the wait: the longer an app has starved, the worse it ranks and the more a win is
    worth to it, and two starving apps are told apart by how long they waited and how much
    they have left, never tied at one constant. ``t_id``: the app's ideal time
    (``app_ideal_time``)."""
    share = cluster.count / max(active_apps, 1)
    return rho_over(now, arrival, work.time_on_share(share, cluster), t_id)


def verified_rho(
    now: float,
    arrival: float,
    profile: ModelProfile,
    done_by_gang: dict[int, GangWork],
    cluster: SetShape,
    n_avg: float,
    definition: str = PAPER,
) -> float:
    """rho of the work done so far: the time since arrival over the fair time of the
    iterations the app has made (their ideal time by ``definition``: alone on the cluster
    times N, the paper's), as Gavel's finish-time-fairness program counts it. Only what
    the arbiter observes goes in (its progress and its model's speed), never what the app
    declares, so a lie about its work cannot move it. RHO_MAX for an app that has made
    nothing yet."""
    fair = made_fair_time(profile, done_by_gang, cluster, n_avg, definition)
    return capped_rho(now - arrival, fair)


def made_fair_time(
    profile: ModelProfile,
    done_by_gang: dict[int, GangWork],
    cluster: SetShape,
    n_avg: float,
    definition: str = PAPER,
) -> float:
    """The fair time of the iterations an app has made: their ideal time among N apps by
    ``definition`` (the paper's: alone on the cluster, times N; ``verified_rho``'s
    denominator; summed over apps, a pooled one)."""
    if definition == PAPER:
        return t_cluster(profile, done_by_gang, cluster) * n_avg
    work = RemainingWork(profile, done_by_gang)
    return ideal_time(definition, work.time_on(cluster), work, cluster, n_avg)


def capped_rho(elapsed: float, fair: float) -> float:
    """``elapsed / fair``, at most RHO_MAX; RHO_MAX when nothing has been made (fair 0)."""
    if fair <= 0:
        return RHO_MAX
    return min(elapsed / fair, RHO_MAX)


def posthoc_rho(arrival: float, finish: float, t_cluster_s: float, n_avg: float) -> float:
    """The report's rho, from real finish times (1 for an app with no work at all)."""
    if t_cluster_s <= 0:
        return 1.0
    return (finish - arrival) / (t_cluster_s * n_avg)


def posthoc_rho_over(arrival: float, finish: float, t_id: float) -> float:
    """The report's rho for an ideal time ``t_id`` of either definition (1 for an app
    with no work at all)."""
    if t_id <= 0:
        return 1.0
    return (finish - arrival) / t_id
