"""The arbiter's gang rules (docs/gangs.md): starving rho, reservations, best-fit offers,
aligned lease ends. Schedules are derived by hand in the comments."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings

from tests.policies.hand import TOY, hold, make_app, view, workload
from tests.simulator.test_invariants import check_result, idle_while_waiting, scenarios
from themis.arbiter.offer import first_gpu_wait
from themis.arbiter.options import ArbiterOptions
from themis.arbiter.reservation import choose_target
from themis.arbiter.round import Arbiter
from themis.fairness.ftf import RemainingWork, starving_rho, t_cluster
from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.policies.themis import ThemisPolicy
from themis.simulator.engine import simulate


def _first_start(result, app_id: str) -> float:
    return min(i.start for i in result.intervals if i.app_id == app_id)


# Eight 1-GPU apps x0..x7 arrive 10 s apart and fill the 8-GPU machine, so their leases
# (100 s) end one at a time, at 100, 110, ..., 170. At 80 the gang app g (one 8-GPU job,
# 800 iterations = 100 s on the machine) arrives, at 81 two 1-GPU sweeps a and b (ten
# jobs of 100 s each).
STAGGERED = (
    [(f"x{k}", 10.0 * k, [(1, 1000.0)]) for k in range(8)]
    + [("g", 80.0, [(8, 800.0)])]
    + [(name, 81.0, [(1, 100.0)] * 10) for name in ("a", "b")]
)


def _run_staggered(reservation_bound: float | None):
    policy = make_policy("themis", PolicyOptions(lease=100.0, reservation_bound=reservation_bound))
    result = simulate(workload(STAGGERED), Cluster.from_spec("1x1x8"), policy, batch_window=0.0)
    return policy, result


def test_gang_gets_its_machine_within_one_lease_of_becoming_worst_off() -> None:
    # At 100 x0's lease ends. a, b and g hold nothing: they rank first (starving), told
    # apart by their starving rho, the rho of a 1/11 time share of the 8 GPUs from now:
    #   g: T_cluster 100, share 8/11 -> 1100 s; N_avg since 80 = (10 * 1 + 11 * 19) / 20
    #      = 10.95; rho = (20 + 1100) / (100 * 10.95) = 1.0228
    #   a: T_cluster max(1000 / 8, 100) = 125, share -> 1375 s; N_avg 11;
    #      rho = (19 + 1375) / (125 * 11) = 1.0138
    # so g is the worst off and its gang fits nowhere: the machine is reserved. Every
    # lease on it ends by 170 and none is renewed, so g starts at 170, on all 8 GPUs.
    policy, result = _run_staggered(None)
    assert _first_start(result, "g") == pytest.approx(170.0)
    g_runs = [i for i in result.intervals if i.app_id == "g"]
    assert [i.gpus for i in g_runs] == [tuple(range(8))]
    # The bound: within one lease (100 s) of the round that reserved.
    assert _first_start(result, "g") <= 100.0 + 100.0
    # Idle cost: x0..x6's GPUs waited 70, 60, ..., 10 s for x7's: 280 GPU-seconds.
    assert isinstance(policy, ThemisPolicy)
    assert policy.report()["reserved_idle_gpu_hours"] == pytest.approx(280.0 / 3600.0)
    assert policy.report()["reservations_fulfilled"] == 1.0
    assert idle_while_waiting(result) == []  # nothing else idles


def test_without_reservations_the_gang_waits_for_the_sweeps() -> None:
    # The same run with reservations off: freed GPUs go one at a time to the 1-GPU apps
    # (the gang never sees 8 free GPUs at once), so g starts only when the sweeps and the
    # x apps leave room: far later than 170.
    _, result = _run_staggered(0.0)
    assert _first_start(result, "g") > 170.0 + 100.0


def test_starving_rho_grows_with_the_wait_and_tells_apps_apart() -> None:
    cluster = Cluster.from_spec("1x2x4")
    small = make_app("s", 0.0, [(1, 100.0)] * 4)
    gang = make_app("g", 0.0, [(4, 400.0)])
    values = {}
    for app in (small, gang):
        work = RemainingWork(TOY, app.remaining_by_gang(0.0))
        app.t_cluster = work.time_on(cluster.shape)
        values[app.app_id] = [
            starving_rho(t, 0.0, work, cluster.shape, 4, app.t_cluster * 2.0)
            for t in (0.0, 100.0, 1000.0)
        ]
    for series in values.values():
        assert all(math.isfinite(v) for v in series)
        assert series[0] < series[1] < series[2]
    # s: T_cluster 100 (4 jobs on 8 GPUs), share 8/4 = 2 GPUs -> 200 s: rho(0) = 200/200;
    # g: T_cluster 400/4 = 100, share 2 GPUs -> 200 s: the same at 0, apart with the wait
    # only through T_id (equal here), so equal... both 1.0 at t=0.
    assert values["s"][0] == pytest.approx(1.0)
    assert values["g"][0] == pytest.approx(1.0)
    # The same wait costs a larger app (more work, so a larger T_id) less rho: 100 s
    # raise s's rho by 100 / 200 = 0.5, that of an app of eight 1,000 s jobs (T_cluster
    # 1,000, T_id 2,000) by 100 / 2,000 = 0.05.
    big = make_app("b", 0.0, [(1, 1000.0)] * 8)
    work = RemainingWork(TOY, big.remaining_by_gang(0.0))
    t_cl = work.time_on(cluster.shape)
    rise = starving_rho(100.0, 0.0, work, cluster.shape, 4, t_cl * 2.0) - starving_rho(
        0.0, 0.0, work, cluster.shape, 4, t_cl * 2.0
    )
    assert rise == pytest.approx(0.05)
    assert values["s"][1] - values["s"][0] == pytest.approx(0.5)


def test_small_bundles_are_carved_from_the_most_fragmented_machine() -> None:
    # 1x2x4: machine 0 (GPUs 0-3) has three GPUs busy and GPU 3 free; machine 1 (4-7) is
    # empty. A new 1-GPU app must get GPU 3, keeping machine 1 whole for a 4-GPU gang.
    cluster = Cluster.from_spec("1x2x4")
    busy = make_app("busy", 0.0, [(1, 1000.0)] * 3)
    for k, job in enumerate(busy.jobs):
        hold(job, (k,), 0.0, 1000.0)
    busy.touch()
    small = make_app("small", 10.0, [(1, 100.0)])
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(fairness_knob=0.8, lease=100.0, reservation_bound=0.0),
        random.Random(0),
    )
    schedule = arbiter.run_round(view(cluster, [busy, small], 10.0))
    placed = {job.job_id: a.gpus for job, a in schedule.items() if job.app is small}
    assert placed == {"small0": (3,)}


def test_choose_target_prefers_the_machine_ready_soonest() -> None:
    cluster = Cluster.from_spec("1x2x4")
    ready = {g: 50.0 for g in range(8)}
    ready.update({4: 0.0, 5: 0.0, 6: 30.0, 7: 90.0})  # machine 1: ready at 90
    ready.update({0: 0.0, 1: 40.0, 2: 40.0, 3: 60.0})  # machine 0: ready at 60
    assert choose_target(cluster, 4, ready, 0.0) == (0, 1, 2, 3)
    # A 2-GPU gang: machine 1 has two GPUs ready now.
    assert choose_target(cluster, 2, ready, 0.0) == (4, 5)
    # A gang larger than a machine: the rack (here the cluster), soonest-ready GPUs.
    assert choose_target(cluster, 6, ready, 0.0) == (0, 1, 2, 4, 5, 6)


def test_aligned_lease_ends_fall_on_the_grid() -> None:
    arbiter = Arbiter(
        Cluster.from_spec("1x1x2"),
        ArbiterOptions(fairness_knob=0.8, lease=600.0, lease_align=600.0),
        random.Random(0),
    )
    assert arbiter.lease_end(0.0) == 600.0
    assert arbiter.lease_end(250.0) == 600.0  # 850 -> nearest grid point 600
    assert arbiter.lease_end(350.0) == 1200.0  # 950 -> 1200
    assert arbiter.lease_end(10.0) == 600.0
    tiny = Arbiter(
        Cluster.from_spec("1x1x2"),
        ArbiterOptions(fairness_knob=0.8, lease=10.0, lease_align=600.0),
        random.Random(0),
    )
    assert tiny.lease_end(0.0) == 600.0  # never at or before now


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenario=scenarios())
def test_a_reservation_never_holds_gpus_idle_longer_than_its_bound(scenario) -> None:
    workload_, cluster, options, window = scenario
    policy = make_policy("themis", options)
    result = simulate(workload_, Cluster.from_spec(cluster), policy, window)
    check_result(result, "themis")
    assert isinstance(policy, ThemisPolicy)
    if policy.arbiter is None:  # no round was needed
        return
    book = policy.arbiter.reservations
    bound = options.lease if options.reservation_bound is None else options.reservation_bound
    for _app, _gang, since, closed, _done in book.history:
        assert closed - since <= bound + 1e-9
    spans = [(s, c) for _, _, s, c, _ in book.history]
    if book.current is not None:
        spans.append((book.current.since, book.current.since + bound))
    for lo, hi, gpus in book.withheld:
        assert hi - lo <= bound + 1e-9
        assert any(s - 1e-9 <= lo and hi <= c + 1e-9 for s, c in spans), (lo, hi, gpus)
    assert (
        book.idle_gpu_seconds
        <= sum(g * (c - s) for _, g, s, c, _ in book.history)
        + (book.current.gang * bound if book.current else 0.0)
        + 1e-6
    )


def test_the_app_waiting_longest_for_its_first_gpu_is_offered_too() -> None:
    # 1x1x8, all free, f = 0.8. A 1-GPU app "early" (arrived at 0) and four 8-GPU apps
    # (arrived at 1-4) have never held a GPU. Rank alone offers ceil(0.2 * 5) = 1 app:
    # an 8-GPU one, whose starving rho (a 1/5 time share of 8 GPUs, 8 GPU-seconds per
    # second of its run: about 5) is far above early's (1/5 of 8 GPUs is more than the one
    # GPU it can use: about 1). The slot offers early beside it.
    #   early: T_cluster 1000, share min(8/5, 1) -> 1000 s; rho = (10 + 1000) / 1000
    #   g1: T_cluster 8000 / 8 = 1000, share 8/5 -> 8000 / 1.6 = 5000 s; rho = 5.009
    cluster = Cluster.from_spec("1x1x8")
    early = _timed(make_app("early", 0.0, [(1, 1000.0)]), cluster)
    gangs = [_timed(make_app(f"g{k}", float(k), [(8, 8000.0)]), cluster) for k in range(1, 5)]
    # (ranked by declared rho, and by verified progress, where an app that has made
    # nothing ranks by this standing; under the tiered ranking no app has made anything
    # yet, so they rank by arrival: early first, and the slot goes to the next newcomer, g1)
    for ranking, offered in (
        ("declared", ["g", "early"]),
        ("verified", ["g", "early"]),
        ("verified-tiered", ["early", "g1"]),
    ):
        arbiter = Arbiter(
            cluster,
            ArbiterOptions(fairness_knob=0.8, lease=100.0, reservation_bound=0.0, ranking=ranking),
            random.Random(0),
        )
        arbiter.run_round(view(cluster, [early, *gangs], 10.0))
        record = arbiter.last_round
        assert record is not None
        assert len(record.offered) == 2
        assert record.offered[0].startswith(offered[0]) and record.offered[1] == offered[1]
        assert record.rhos["early"] == pytest.approx(1.01)
        assert record.rhos["g1"] == pytest.approx(5.009)


def _timed(app, cluster: Cluster):
    """``app`` with its T_cluster, as the simulator sets it at arrival."""
    app.t_cluster = t_cluster(app.profile, app.remaining_by_gang(app.arrival), cluster.shape)
    return app


def test_an_app_once_granted_a_gpu_leaves_the_first_gpu_slot() -> None:
    # "old" was granted a GPU in an earlier round and lost it: holding nothing again, it
    # is no newcomer; "new" (later arrival, never granted) takes the slot instead.
    cluster = Cluster.from_spec("1x1x8")
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(fairness_knob=0.8, lease=100.0, reservation_bound=0.0, ranking="declared"),
        random.Random(0),
    )
    old = _timed(make_app("old", 0.0, [(1, 1000.0)]), cluster)
    arbiter.run_round(view(cluster, [old], 0.0))
    new = _timed(make_app("new", 5.0, [(1, 1000.0)]), cluster)
    gangs = [_timed(make_app(f"g{k}", 5.0 + k, [(8, 8000.0)]), cluster) for k in range(1, 5)]
    arbiter.run_round(view(cluster, [old, new, *gangs], 10.0))  # old holds nothing here
    record = arbiter.last_round
    assert record is not None
    # rank (declared rho): g1-g4 (about 5), then old and new (about 1): ceil(0.2 * 6) = 2,
    # then the slot: old arrived first but was granted a GPU at 0, so new.
    assert record.offered == ["g1", "g2", "new"]
    assert first_gpu_wait([old], arbiter._started) is None


# f's 4-GPU job (200 iterations on 4 GPUs: 50 s) and h's four long 1-GPU jobs fill the
# 8-GPU machine at 0. At 10 the gang app g arrives (one 4-GPU job, 100 s), at 11-13 three
# sweeps s0-s2 (four 1-GPU jobs of 100 s each). At 50 f finishes and frees GPUs 0-3.
FREED_HALF_MACHINE = [
    ("f", 0.0, [(4, 200.0)]),
    ("h", 0.0, [(1, 200.0)] * 4),
    ("g", 10.0, [(4, 400.0)]),
] + [(f"s{k}", 11.0 + k, [(1, 100.0)] * 4) for k in range(3)]


def _run_freed(gang_at_once: bool):
    policy = make_policy("themis", PolicyOptions(lease=100.0, gang_at_once=gang_at_once))
    result = simulate(workload(FREED_HALF_MACHINE), Cluster.from_spec("1x1x8"), policy, 0.0)
    assert isinstance(policy, ThemisPolicy)
    return policy, result


def test_a_worst_off_app_holding_nothing_starts_a_fitting_gang_before_the_auction() -> None:
    # At 50, g and the sweeps hold nothing; g has waited longest, for the same T_cluster
    # (100 s) and the same work, so its starving rho is the highest: it is the worst off,
    # and its gang fits the free half machine. With --gang-at-once it starts there at once,
    # outside the auction, as a reservation made and fulfilled in one round would start it.
    policy, result = _run_freed(True)
    g_runs = [(i.start, i.gpus) for i in result.intervals if i.app_id == "g"]
    assert g_runs[0] == (50.0, (0, 1, 2, 3))
    assert policy.report()["gangs_started_at_once"] >= 1.0
    # Without it (the default) the auction decides at 50: g bids beside s0 (the newcomer)
    # and f's GPUs go to the sweeps (its proportional-fair choice, the hidden payment and
    # the leftover); no reservation is made, since the gang fits; g starts on h's GPUs when
    # their leases end at 100.
    policy, result = _run_freed(False)
    g_runs = [(i.start, i.gpus) for i in result.intervals if i.app_id == "g"]
    assert g_runs[0] == (100.0, (4, 5, 6, 7))
    assert policy.report()["gangs_started_at_once"] == 0.0
