"""A lying app's gain, measured on hand cases (2 GPUs, model ``toy``: 1 iteration/s/GPU)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.errors import ThemisError
from themis.experiments import truthfulness as lies
from themis.experiments.runner import RunRequest, run_many
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile, load_profiles
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions, make_policy
from themis.simulator.engine import Conditions, Simulator
from themis.workload.generator import GeneratorSpec, generate

TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.8, cross_rack=0.4)
FACTORS = (2.0, 0.5)


def workload(apps: list[tuple[str, float, list[float]]]) -> Workload:
    specs = tuple(
        AppSpec(a, t, "toy", tuple(JobSpec(f"{a}{k}", 1, x) for k, x in enumerate(jobs)))
        for a, t, jobs in apps
    )
    return Workload(specs, {"toy": TOY}, "hand")


#: Two apps of two 400-iteration trials at t=0; a long app and a short one arriving later.
EQUAL = workload([("A", 0.0, [400.0, 400.0]), ("B", 0.0, [400.0, 400.0])])
LONG_SHORT = workload([("A", 0.0, [1000.0, 1000.0]), ("B", 50.0, [200.0, 200.0])])
STAGGERED = workload(
    [("A", 0.0, [600.0, 600.0]), ("B", 100.0, [300.0, 300.0]), ("C", 200.0, [500.0, 500.0])]
)


def measure(w: Workload, policy: str, liar: str) -> dict[float, lies.LieOutcome]:
    base = [RunRequest(policy, policy, w, "1x1x2", PolicyOptions(lease=100.0))]
    records = run_many(lies.requests(base, liar, FACTORS), workers=1)
    rows = lies.outcomes({r.label: r for r in records}, [policy], liar, FACTORS)
    return {o.factor: o for o in rows}


@pytest.mark.parametrize("w", [EQUAL, LONG_SHORT], ids=["equal", "long-short"])
@pytest.mark.parametrize("liar", ["A", "B"])
def test_lying_about_work_does_not_pay_under_themis_on_hand_cases(w: Workload, liar: str) -> None:
    for outcome in measure(w, "themis", liar).values():
        assert outcome.gain <= 1e-9


def test_srtf_rewards_an_app_that_understates_its_work() -> None:
    """SRTF, two equal apps: honest, ties go to A, whose trials run 0-400; B's run
    400-800. B declaring half its work ranks first: B 0-400, A 400-800. B gains half its
    completion time, A (the only honest app) takes twice as long."""
    b = measure(EQUAL, "srtf", "B")[0.5]
    assert (b.liar_honest_s, b.liar_lying_s) == (800.0, 400.0)
    assert b.gain == 0.5 and b.others_loss == 1.0


def test_declared_ranking_is_not_proof_against_every_misreport_over_a_run() -> None:
    """Partial Allocation is truthful about one auction's bids given the estimates; an app
    that misstates its work changes the estimates themselves (its T_cluster and its
    remaining work), and over a run of several auctions that can pay when the arbiter
    ranks by declared rho (the paper's): here B, arriving second, finishes in 700 s
    instead of 800 s by declaring half its work. The default ranking (verified progress)
    closes it: see the test below."""
    outcomes = measure_ranked(STAGGERED, "B", "declared")
    assert outcomes[0.5].gain > 0.1
    assert (outcomes[0.5].liar_honest_s, outcomes[0.5].liar_lying_s) == (800.0, 700.0)


def test_the_table_names_each_lie() -> None:
    rows = list(measure(EQUAL, "srtf", "B").values())
    text = lies.markdown(rows)
    assert "| srtf |  | work:0.5 | B | 0.2 -> 0.1 | +50.0% |  | +100.0% |" in text


def test_misreporting_an_unknown_app_is_a_user_error() -> None:
    with pytest.raises(ThemisError, match="no app 'Z'"):
        Simulator(
            EQUAL,
            Cluster.from_spec("1x1x2"),
            make_policy("fifo", PolicyOptions()),
            conditions=Conditions(misreport=(("Z", 2.0),)),
        )
    with pytest.raises(ThemisError, match="misreport"):
        Conditions(misreport=(("A", 0.0),)).check()


def measure_ranked(w: Workload, liar: str, ranking: str) -> dict[float, lies.LieOutcome]:
    options = PolicyOptions(lease=100.0, ranking=ranking)
    base = [RunRequest("themis", "themis", w, "1x1x2", options)]
    records = run_many(lies.requests(base, liar, FACTORS), workers=1)
    rows = lies.outcomes({r.label: r for r in records}, ["themis"], liar, FACTORS)
    return {o.factor: o for o in rows}


@pytest.mark.parametrize("liar", ["A", "B", "C"])
def test_no_lie_about_work_pays_when_themis_ranks_by_verified_progress(liar: str) -> None:
    """The staggered case where declared ranking pays B (+25% for twice its work, +12.5%
    for half) and C (+8.3% for half): ranked by the rho of the work each app has done,
    which no declaration moves, neither lie pays any of the three."""
    declared = measure_ranked(STAGGERED, liar, "declared")
    verified = measure_ranked(STAGGERED, liar, "verified")
    assert all(o.gain <= 1e-9 for o in verified.values())
    if liar != "A":
        assert max(o.gain for o in declared.values()) > 0.05  # the control: it did pay


# -- contexts: the gain a liar can expect, over estimate errors it cannot predict ---------------


def test_one_context_is_the_run_itself_and_several_draw_their_own_errors() -> None:
    plain = Conditions(restart_cost=5.0)
    assert lies.context_conditions(plain, 7, 0, 1) is plain
    drawn = [lies.context_conditions(plain, 7, k, 3) for k in range(3)]
    assert {c.estimate_error for c in drawn} == {lies.CONTEXT_ERROR}
    assert len({c.estimate_seed for c in drawn} | {7}) == 4  # none is the run's seed
    assert all(c.restart_cost == 5.0 for c in drawn)
    # the run's own estimate error wins over the context's
    assert lies.context_conditions(Conditions(estimate_error=0.2), 7, 1, 3).estimate_error == 0.2
    with pytest.raises(ThemisError, match="at least 1"):
        lies.check_contexts(0, 0.01)
    with pytest.raises(ThemisError, match=r"in \(0, 1\)"):
        lies.check_contexts(2, 0.0)


def declared_works(conditions: Conditions, seed: int = 3) -> list[float]:
    sim = Simulator(
        STAGGERED,
        Cluster.from_spec("1x1x2"),
        make_policy("themis", PolicyOptions(lease=100.0, seed=seed)),
        conditions=conditions,
    )
    sim.run()
    return [j.spec.work for app in sim.all_apps for j in app.jobs]


def test_the_estimate_seed_draws_the_errors_and_defaults_to_the_run_seed() -> None:
    truth = [600.0, 600.0, 300.0, 300.0, 500.0, 500.0]
    assert declared_works(Conditions()) == truth
    own = declared_works(Conditions(estimate_error=0.1))
    assert own == declared_works(Conditions(estimate_error=0.1, estimate_seed=3))
    other = declared_works(Conditions(estimate_error=0.1, estimate_seed=4))
    assert other != own
    assert all(0.9 * t <= w <= 1.1 * t for w, t in zip(other, truth, strict=True))


def test_a_gain_over_contexts_is_one_minus_the_ratio_of_mean_completions() -> None:
    """SRTF on EQUAL, B declaring half its work, in three contexts of 1% errors: each
    context's order is decided by the declarations (B's half work always ranks first), so
    B completes in 400 s lying and 800 s honest in every context."""
    policy = "srtf"
    case = lies.LieCase("work:0.5", ("B",))
    honest, lying = [], []
    for k in range(3):
        conditions = lies.context_conditions(Conditions(), 0, k, 3)
        base = RunRequest(f"h{k}", policy, EQUAL, "1x1x2", PolicyOptions(lease=100.0),
                          conditions=conditions)  # fmt: skip
        [h] = run_many([base], workers=1)
        [r] = run_many([lies.lie_request(base, case, 0, f"l{k}")], workers=1)
        honest.append(h)
        lying.append(r)
    over = lies.outcome_over(policy, 0, case, honest, lying)
    assert over.contexts == 3
    assert over.liar_lying_s == pytest.approx(400.0, rel=0.02)
    want = 1.0 - over.liar_lying_s / over.liar_honest_s
    assert over.gain == want and over.gain_low <= want <= over.gain_high
    single = lies.outcome(policy, 0, case, honest[0], lying[0])
    assert single.contexts == 1 and single.gain_low == single.gain_high == single.gain
    assert single.gain_sd == 0.0 and over.gain_sd >= 0.0
    with pytest.raises(ValueError, match="per context"):
        lies.outcome_over(policy, 0, case, honest, lying[:2])


def _liar_row(seed: int, lie: str, liar: str, lying: float) -> lies.LieOutcome:
    """A liar whose honest completion is 120 s, at ``lying`` s with ``lie``."""
    return lies.LieOutcome("themis", seed, lie, liar, 120.0, lying, 50.0, 50.0)


def test_report_shares_compare_each_work_liar_with_its_own_trial_order() -> None:
    """A work:0.5 liar at 90 s whose order:0.5 run took 90 s bought nothing with the
    report (0%); one at 80 s against 100 s bought 20%. Work lies without an order run,
    and order runs of other liars or seeds, are left out."""

    rows = [
        _liar_row(1, "work:0.5", "a", 90.0),
        _liar_row(1, "order:0.5", "a", 90.0),
        _liar_row(2, "work:0.5", "b", 80.0),
        _liar_row(2, "order:0.5", "b", 100.0),
        _liar_row(3, "work:0.5", "c", 10.0),  # no order run for it
        _liar_row(3, "order:0.5", "d", 10.0),
        _liar_row(1, "work:2", "a", 130.0),  # no order:2 run
    ]
    (share,) = lies.report_shares(rows)
    assert (share.policy, share.lie, share.cases, share.paid) == ("themis", "work:0.5", 2, 1)
    assert share.median_gain == pytest.approx(0.1)
    assert (share.best_gain, share.best_liar) == (pytest.approx(0.2), "2 b")
    table = lies.report_share_markdown([share])
    assert "| themis | work:0.5 | 2 | 1 | +10.0% | +20.0% | 2 b |" in table
    assert lies.report_share_markdown([]) == ""


def test_each_lie_is_measured_against_the_liars_best_truthful_order() -> None:
    """Liar a: honest 120 s, its honest orders 100 s (order:0.5) and 130 s (order:2); a
    split at 95 s beats the best truthful run (100 s) by 5%, a work:0.5 lie at 100 s buys
    nothing beyond it. Liar b has no order run and is left out; order rows are not lies."""

    rows = [
        _liar_row(1, "order:0.5", "a", 100.0),
        _liar_row(1, "order:2", "a", 130.0),
        _liar_row(1, "split:2", "a", 95.0),
        _liar_row(1, "work:0.5", "a", 100.0),
        _liar_row(2, "split:2", "b", 10.0),
    ]
    found = {s.lie: s for s in lies.over_best_honest(rows)}
    assert set(found) == {"split:2", "work:0.5"}
    split = found["split:2"]
    assert (split.cases, split.paid, split.best_liar) == (1, 1, "1 a")
    assert split.best_gain == pytest.approx(0.05)
    assert (found["work:0.5"].best_gain, found["work:0.5"].paid) == (0.0, 0)
    # Every order worse than the default: the default is the best truthful run.
    worse = [_liar_row(3, "order:2", "c", 150.0), _liar_row(3, "gang:0.5", "c", 108.0)]
    (gang,) = lies.over_best_honest(worse)
    assert gang.best_gain == pytest.approx(0.1)
    # A declared weight is a truthful strategy too: weight:0 at 90 s makes the split at
    # 95 s a loss, and weight rows are not lies.
    depth = [*rows, _liar_row(1, "weight:0", "a", 90.0)]
    found = {s.lie: s for s in lies.over_best_honest(depth)}
    assert set(found) == {"split:2", "work:0.5"}
    assert found["split:2"].best_gain == pytest.approx(1 - 95 / 90)
    table = lies.report_share_markdown([gang], "lie pays")
    assert "lie pays (> 1%)" in table and "| themis | gang:0.5 | 1 | 1 | +10.0% |" in table


# -- contexts of the simulation's own draws and arrival jitter; the placebo ------------------


@settings(max_examples=50, deadline=None)
@given(
    arrivals=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=8),
    seed=st.integers(0, 10**7),
    jitter=st.floats(0.0, 3600.0),
)
def test_jitter_only_delays_arrivals_within_its_bound_and_repeats_by_seed(
    arrivals: list[float], seed: int, jitter: float
) -> None:
    w = workload([(f"a{k}", t, [100.0]) for k, t in enumerate(arrivals)])
    once = lies.jitter_arrivals(w, seed, jitter)
    assert once == lies.jitter_arrivals(w, seed, jitter)
    for before, after in zip(w.apps, once.apps, strict=True):
        assert before.arrival <= after.arrival <= before.arrival + jitter
        assert (after.app_id, after.jobs, after.model) == (before.app_id, before.jobs, before.model)


def _generated(jobs: int = 80, seed: int = 11) -> Workload:
    return generate(GeneratorSpec(jobs=jobs, seed=seed, load=1.5, gpus=8), load_profiles())


def _finishes(request: RunRequest) -> dict[str, float]:
    [record] = run_many([request], workers=1)
    return {row.app_id: row.finish_s for row in record.rows}


def test_contexts_draw_their_own_seed_and_arrivals_and_give_other_schedules() -> None:
    """Each context of several has a seed of its own for the policy's draws and the
    estimate errors, and other arrivals; the same context twice is the same run, and
    different contexts are different schedules (one context is the run as given)."""
    base = RunRequest("h", "themis", _generated(), "1x1x8", PolicyOptions(lease=600.0, seed=5))
    assert lies.context_request(base, 5, 0, 1) is base
    drawn = [lies.context_request(base, 5, k, 4) for k in range(4)]
    seeds = {r.options.seed for r in drawn}
    assert len(seeds) == 4 and 5 not in seeds
    assert [r.conditions.estimate_seed for r in drawn] == [r.options.seed for r in drawn]
    assert len({tuple(a.arrival for a in r.workload.apps) for r in drawn}) == 4
    schedules = [_finishes(r) for r in drawn]
    assert _finishes(lies.context_request(base, 5, 2, 4)) == schedules[2]
    assert len({tuple(sorted(s.items())) for s in schedules}) == 4
    # no jitter: the draws of the seed alone still give another schedule
    still = [lies.context_request(base, 5, k, 4, jitter=0.0) for k in range(2)]
    assert still[0].workload is base.workload
    assert _finishes(still[0]) != _finishes(still[1])


def _over(
    w: Workload, policy: str, case: lies.LieCase, contexts: int = 4, jitter: float = 10.0
) -> lies.LieOutcome:
    honest, lying = [], []
    for k in range(contexts):
        base = RunRequest(f"h{k}", policy, w, "1x1x2", PolicyOptions(lease=100.0))
        base = lies.context_request(base, 0, k, contexts, jitter=jitter)
        [h, r] = run_many([base, lies.lie_request(base, case, 2, f"l{k}")], workers=1)
        honest.append(h)
        lying.append(r)
    return lies.outcome_over(policy, 0, case, honest, lying)


def test_understating_pays_under_the_oracle_over_contexts_and_not_under_themis() -> None:
    """STAGGERED (A at 0 s, B at 100 s, C at 200 s; 2 GPUs): the FTF oracle ranks by
    finish times predicted from declared work, so each app declaring half its work is
    ranked worse off than it is and served sooner: each of the three gains in all four
    contexts (A +7.1%, B +11.2%, C +8.4%). Themis ranks by verified progress: no gain in
    any context. The placebo gains nothing under either."""
    for policy, paying in (("ftf-oracle", True), ("themis", False)):
        rows = [
            _over(STAGGERED, policy, lies.LieCase(lie, (liar,)))
            for lie in ("work:0.5", lies.PLACEBO)
            for liar in ("A", "B", "C")
        ]
        found = {s.lie: s for s in lies.summarize_lies(rows, lies.PLACEBO)}
        lie, placebo = found["work:0.5"], found[lies.PLACEBO]
        assert placebo.placebo and not lie.placebo
        assert (placebo.cases, placebo.context_runs) == (lie.cases, lie.context_runs) == (3, 12)
        assert abs(placebo.best_gain) < lies.PAYS
        if paying:
            assert lie.median_gain == pytest.approx(0.0837, abs=0.002)
            assert (lie.paid, lie.contexts_gained) == (3, 12)
            assert (lie.best_who, lie.best_gained) == ("0 B", 4)
            assert lie.best_gain > placebo.best_gain
            text = lies.summary_markdown(list(found.values()))
            assert f"Noise floor ({policy})" in text and "above it: `work:0.5`" in text
        else:
            assert lie.best_gain <= 1e-9 and lie.contexts_gained == 0


@pytest.mark.parametrize("policy", ["themis", "ftf-oracle"])
def test_a_truthful_declaration_gains_exactly_nothing_in_every_context(policy: str) -> None:
    """A liar declaring exactly its work (factor 1 through the misreport path) in each of
    four contexts of a generated workload: the lying run is the honest run of its
    context decision for decision, so the gain is 0.0, not merely small. It fails if a
    context's draws differed between its honest and its lying run."""
    w = _generated()
    liar = sorted(w.apps, key=lambda a: a.arrival)[len(w.apps) // 2].app_id
    case = lies.LieCase(lies.PLACEBO, (liar,))
    honest, lying = [], []
    for k in range(4):
        base = RunRequest(f"h{k}", policy, w, "1x1x8", PolicyOptions(lease=600.0, seed=9))
        base = lies.context_request(base, 9, k, 4)
        truthful = replace(base, label=f"t{k}", conditions=replace(base.conditions,
                           misreport=((liar, 1.0),)))  # fmt: skip
        [h, t] = run_many([base, truthful], workers=1)
        honest.append(h)
        lying.append(t)
    over = lies.outcome_over(policy, 9, case, honest, lying)
    assert over.context_gains == (0.0, 0.0, 0.0, 0.0) and over.gain == 0.0
    assert over.others_loss == 0.0 and over.contexts_gained == 0
