"""Renewal in place (``--renewal-share``): the worst-off apps keep the GPUs whose leases end,
so only better-off apps' ending leases change hands (less churn)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.policies.hand import hold, make_app, view
from tests.simulator.test_invariants import check_result, scenarios
from themis.arbiter.options import ArbiterOptions
from themis.arbiter.round import Arbiter, renewed_count
from themis.fairness.ftf import t_cluster
from themis.model.cluster import Cluster
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import simulate


def _sweep(app_id: str, arrival: float, cluster: Cluster):
    """Six 2-GPU trials of 2,000 iterations: always wants more than one trial's GPUs."""
    app = make_app(app_id, arrival, [(2, 2000.0)] * 6)
    app.t_cluster = t_cluster(app.profile, app.remaining_by_gang(arrival), cluster.shape)
    return app


def _four_running_sweeps(cluster: Cluster):
    """Sweeps a, b, c, d, arrived at 0, each running one trial on GPUs (2k, 2k + 1) since
    30 k, leases ending at 100."""
    apps = [_sweep(name, 0.0, cluster) for name in "abcd"]
    for k, app in enumerate(apps):
        hold(app.jobs[0], (2 * k, 2 * k + 1), 30.0 * k, 100.0)
    return apps


def _round(share: float):
    # 1x1x8. Four sweeps a, b, c, d arrived at 0 and each ran one trial on two GPUs of the
    # machine, since 0 (a), 30 (b), 60 (c) and 90 (d): at 100 they have made 200, 140, 80
    # and 20 iterations, so by verified rho (elapsed over the fair time of the work done)
    # d is the worst off, then c, b, a. All four leases end at 100. A fifth sweep w
    # arrived at 50 and holds nothing: it cannot run, so it ranks first. n = 5 apps want
    # GPUs; f = 0.8 offers ceil(0.2 * 5) = 1: w.
    cluster = Cluster.from_spec("1x1x8")
    apps = _four_running_sweeps(cluster)
    waiting = _sweep("w", 50.0, cluster)
    # (the tiered ranking, which these cases were computed under: an app that cannot run
    # ranks first; the verified ranking's order of fresh apps: test_fresh_rank.py)
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(
            fairness_knob=0.8,
            lease=100.0,
            reservation_bound=0.0,
            ranking="verified-tiered",
            renewal_share=share,
        ),
        random.Random(0),
    )
    changes = arbiter.run_changes(view(cluster, [*apps, waiting], 100.0))
    return arbiter, changes, {a.app_id: a for a in [*apps, waiting]}


def test_the_worst_off_share_keeps_its_gpus_and_the_rest_is_auctioned() -> None:
    # share 0.6: ceil(0.6 * 5) = 3 keepers: w (holds nothing), d and c. d's and c's
    # trials go on on (6, 7) and (4, 5) without a restart; a's and b's GPUs (0-3) are
    # the pool, and w, the one bidder, gets GPUs from it.
    arbiter, changes, apps = _round(0.6)
    record = arbiter.last_round
    assert record is not None and record.offered == ["w"]
    assert sorted(record.pool) == [0, 1, 2, 3]
    for name, gpus in (("d", (6, 7)), ("c", (4, 5))):
        job = apps[name].jobs[0]
        assert job not in changes.stop
        assert changes.start[job].gpus == gpus
        assert changes.start[job].until == pytest.approx(200.0)
    w_gpus = {g for job, grant in changes.start.items() if job.app is apps["w"] for g in grant.gpus}
    assert w_gpus and w_gpus <= {0, 1, 2, 3}


def test_without_renewal_every_ending_lease_is_auctioned() -> None:
    # share 0 (the paper): all eight GPUs are offered to w, and the worst-off sweeps c
    # and d, which share 0.6 lets keep theirs, see a trial stop or move.
    arbiter, changes, apps = _round(0.0)
    record = arbiter.last_round
    assert record is not None and sorted(record.pool) == list(range(8))
    moved = [
        name
        for name in "cd"
        if apps[name].jobs[0] in changes.stop
        or changes.start[apps[name].jobs[0]].gpus != apps[name].jobs[0].gpus
    ]
    assert moved  # someone's trial stops or moves: what renewal in place avoids


def test_renewed_count_is_the_ceiling_of_the_share() -> None:
    assert renewed_count(5, 0.6) == 3
    assert renewed_count(5, 0.5) == 3
    assert renewed_count(4, 0.5) == 2
    assert renewed_count(7, 0.0) == 0
    assert renewed_count(7, 1.0) == 7


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'--renewal-share': must be in \[0, 1\], got 1.5"):
        PolicyOptions(renewal_share=1.5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from([0.5, 1.0]))
def test_renewal_keeps_every_schedule_rule(scenario, share) -> None:
    # No GPU granted twice, gangs whole, work conserved as the checker defines it, every
    # app finishes: with renewal in place as without.
    workload, cluster, options, window = scenario
    policy = make_policy("themis", replace(options, renewal_share=share))
    result = simulate(workload, Cluster.from_spec(cluster), policy, batch_window=window)
    check_result(result, "themis")


def test_a_reservation_is_judged_without_the_renewals_and_takes_their_gpus() -> None:
    # The round of the first test, but the waiting app g runs one 8-GPU trial. The
    # keepers (ceil(0.6 * 5) = 3: g, d, c) would renew (4-7) and leave a and b's four
    # GPUs: g's gang would fit nowhere for another lease. The reservation is judged on the
    # pool without the renewals (g's gang does not fit: reserve), and its target (the
    # whole machine, every lease on it ends now) is free now: g starts on all 8 GPUs, and
    # no keeper is renewed on a GPU of it.
    cluster = Cluster.from_spec("1x1x8")
    apps = _four_running_sweeps(cluster)
    gang = make_app("g", 50.0, [(8, 8000.0)])
    gang.t_cluster = t_cluster(gang.profile, gang.remaining_by_gang(50.0), cluster.shape)
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(
            fairness_knob=0.8, lease=100.0, ranking="verified-tiered", renewal_share=0.6
        ),
        random.Random(0),
    )
    changes = arbiter.run_changes(view(cluster, [*apps, gang], 100.0))
    assert changes.start[gang.jobs[0]].gpus == tuple(range(8))
    assert all(app.jobs[0] in changes.stop for app in apps)
    assert arbiter.reservations.fulfilled == 1


def _within_share_round(within: bool):
    # 1x2x8, six apps, so a fair share is 16 / 6 = 2.67 GPUs. Sweeps a, b, c, d each run
    # one 2-GPU trial (GPUs 0-7), within their share; sweep e runs three (GPUs 8-13), over
    # it; w holds nothing. Every lease ends at 100; GPUs 14 and 15 are free.
    cluster = Cluster.from_spec("1x2x8")
    apps = _four_running_sweeps(cluster)
    over = _sweep("e", 0.0, cluster)
    for k in range(3):
        hold(over.jobs[k], (8 + 2 * k, 9 + 2 * k), 0.0, 100.0)
    waiting = _sweep("w", 50.0, cluster)
    arbiter = Arbiter(
        cluster,
        ArbiterOptions(
            fairness_knob=0.8, lease=100.0, reservation_bound=0.0, renew_within_share=within
        ),
        random.Random(0),
    )
    changes = arbiter.run_changes(view(cluster, [*apps, over, waiting], 100.0))
    return arbiter, changes, {a.app_id: a for a in [*apps, over, waiting]}


def test_apps_within_their_fair_share_keep_their_ending_leases() -> None:
    # a-d hold 2 <= 16/6 GPUs: renewed in place, not auctioned; the pool is e's six GPUs
    # and the two free ones.
    arbiter, changes, apps = _within_share_round(True)
    record = arbiter.last_round
    assert record is not None and sorted(record.pool) == list(range(8, 16))
    for name in "abcd":
        job = apps[name].jobs[0]
        assert job not in changes.stop
        assert changes.start[job].gpus == job.gpus
        assert changes.start[job].until == pytest.approx(200.0)


def test_without_it_the_same_leases_are_auctioned() -> None:
    # The control: off (the default), all 16 GPUs are the pool, so the test above can fail.
    arbiter, _, _ = _within_share_round(False)
    record = arbiter.last_round
    assert record is not None and sorted(record.pool) == list(range(16))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_renewal_within_the_share_keeps_every_schedule_rule(scenario) -> None:
    workload, cluster, options, window = scenario
    policy = make_policy("themis", replace(options, renew_within_share=True))
    result = simulate(workload, Cluster.from_spec(cluster), policy, batch_window=window)
    check_result(result, "themis")


def test_the_option_reaches_the_arbiter_and_the_run_record() -> None:
    from themis.cli.run_options import make_config

    config = make_config(renew_within_share=True)
    assert config.to_dict()["renew_within_share"] is True
    assert "renew_within_share" not in make_config().to_dict()  # old summaries unchanged
    policy = make_policy("themis", config.options)
    cluster = Cluster.from_spec("1x1x8")
    arbiter = policy._arbiter_for(view(cluster, [_sweep("a", 0.0, cluster)], 0.0))  # type: ignore[attr-defined]
    assert arbiter.renew_within_share is True
    off = make_config(renew_within_share=False, restart_cost=30.0)
    assert off.to_dict()["renew_within_share"] is False  # replays as asked


@pytest.mark.parametrize(
    ("asked", "restart_cost", "renews"),
    [(None, 0.0, False), (None, 30.0, True), (False, 30.0, False), (True, 0.0, True)],
)
def test_by_default_apps_within_their_share_renew_only_when_restarts_cost_time(
    asked: bool | None, restart_cost: float, renews: bool
) -> None:
    """The simulator tells the policy the run's restart cost; by default Themis renews
    within the share exactly when a restart costs something, and an explicit choice
    wins."""
    cluster = Cluster.from_spec("1x1x8")
    policy = make_policy("themis", PolicyOptions(renew_within_share=asked))
    policy.set_restart_cost(restart_cost)
    arbiter = policy._arbiter_for(view(cluster, [_sweep("a", 0.0, cluster)], 0.0))  # type: ignore[attr-defined]
    assert arbiter.renew_within_share is renews


def test_a_restart_cost_turns_the_renewal_on_in_a_whole_run() -> None:
    """The run says so: with a 30 s restart cost the default holds GPU sets as few times
    as the rule turned on, fewer than with it off; without one, it schedules as off (on a
    workload where the two schedules differ)."""
    from themis.experiments.workloads import generated_workload
    from themis.simulator.engine import Conditions
    from themis.workload import load_workload

    cluster = Cluster.from_spec("1x2x4")
    w = generated_workload("generate:jobs=120,load=1.5", cluster, load_workload().profiles, 5)
    costly = Conditions(restart_cost=30.0)

    def holds(asked: bool | None, conditions: Conditions) -> int:
        """How many times a job held a GPU set (one interval per hold)."""
        policy = make_policy("themis", PolicyOptions(renew_within_share=asked))
        return len(simulate(w, cluster, policy, conditions=conditions).intervals)

    assert holds(None, costly) == holds(True, costly) < holds(False, costly)
    assert holds(None, Conditions()) == holds(False, Conditions()) != holds(True, Conditions())


def test_a_lone_app_renewing_in_place_does_not_preempt_itself() -> None:
    # tests/simulator/test_hand_schedule.py's lone app (1x1x2, jobs of 30, 10 and 20 s,
    # leases of 7 s) within its share. Renewing both its trials left no room for its
    # waiting one, so the reservation took GPU 0 from its own longest trial at 12 (a
    # restart each way; it finished at 42). The worst-off app renews only what leaves its
    # next gang room, else its leases go to the auction as in the paper's round: the same
    # schedule as without renewal, finished at 35.
    from tests.simulator.test_hand_schedule import finishes, run

    r = run(
        [("a", 5.0, [(1, 30.0), (1, 10.0), (1, 20.0)])],
        "1x1x2",
        "themis",
        lease=7.0,
        renew_within_share=True,
    )
    assert finishes(r) == {"a": pytest.approx(35.0)}
    assert sorted((i.start, i.end, i.job_id) for i in r.intervals) == [
        (5.0, 25.0, "a2"),
        (5.0, 35.0, "a0"),
        (25.0, 35.0, "a1"),
    ]
