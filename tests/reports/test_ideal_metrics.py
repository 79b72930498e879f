"""Both ideal times in the report: per-app columns, the tail that does not saturate, and
the headline that follows the run's ``--ideal-time`` (docs/metrics.md, "Two ideal
times"). Runs of the real simulator on workloads whose schedule is forced: every app
starts at its arrival on a cluster with room for all."""

from __future__ import annotations

import pytest

from tests.policies.hand import workload
from themis.fairness.ftf import posthoc_rho
from themis.model.cluster import Cluster
from themis.model.profiles import load_profiles
from themis.policies import PolicyOptions, make_policy
from themis.reports.metrics import app_rows, shared_cluster, summarize, true_work
from themis.simulator.engine import Conditions, SimulationResult, simulate
from themis.workload.generator import GeneratorSpec, generate

#: Ten 1-GPU apps of 100 s arriving together on 64 GPUs, then one alone at 1,000 s.
TEN_AND_ONE = [(f"s{k}", 0.0, [(1, 100.0)]) for k in range(10)] + [("late", 1000.0, [(1, 100.0)])]


def run(policy: str, ideal: str = "paper", apps: list = TEN_AND_ONE) -> SimulationResult:
    options = PolicyOptions(lease=600.0, ideal_time=ideal)
    return simulate(
        workload(apps), Cluster.from_spec("1x8x8"), make_policy(policy, options), batch_window=0.0
    )


@pytest.mark.parametrize("policy", ["themis", "ftf-oracle", "srtf"])
def test_ten_one_gpu_apps_on_64_gpus_and_one_alone(policy: str) -> None:
    # Each of the ten runs at once and ends at 100 among N_avg 10: T_cluster 100, paper
    # T_id 1,000 (rho 0.1); its slice of 6.4 GPUs runs it at full demand, T_id 100 (rho
    # 1). The late app ran alone: rho 1 by both, and not shared.
    rows = {r.app_id: r for r in app_rows(run(policy))}
    for k in range(10):
        row = rows[f"s{k}"]
        assert (row.finish_s, row.n_avg) == (100.0, pytest.approx(10.0))
        assert row.rho_paper == pytest.approx(0.1)
        assert row.t_slice_s == pytest.approx(100.0)
        assert row.rho_slice == pytest.approx(1.0)
        assert row.rho == row.rho_paper  # the run's definition: the paper's
        assert row.shared
    late = rows["late"]
    assert (late.rho_paper, late.rho_slice, late.shared) == (1.0, 1.0, False)


def test_the_summary_reports_both_definitions_and_the_shared_tail() -> None:
    summary = summarize(run("srtf"))
    assert summary.ideal_time == "paper"
    # The max saturates at the lone app's 1 under both; over the apps that shared, the
    # paper reads 0.1 where the slice reads 1.
    assert summary.max_rho == summary.max_rho_paper == 1.0
    assert summary.max_rho_slice == pytest.approx(1.0)
    assert summary.apps_shared == 10
    assert summary.max_rho_shared == summary.max_rho_shared_paper == pytest.approx(0.1)
    assert summary.max_rho_shared_slice == pytest.approx(1.0)
    assert summary.share_rho_over_1_paper == summary.share_rho_over_1_slice == 0.0


def test_the_headline_follows_the_ideal_time_the_policy_ran_with() -> None:
    # Two 1-GPU apps on 64 GPUs, the second of 300 s: both start at 0, N_avg 2 for the
    # first (100 s), (2 x 100 + 1 x 200) / 300 = 4/3 for the second. With the slice the
    # headline rho is each app's completion over its own work: 1 and 1.
    apps = [("a", 0.0, [(1, 100.0)]), ("b", 0.0, [(1, 300.0)])]
    result = run("themis", "slice", apps)
    assert result.ideal_time == "slice"
    rows = {r.app_id: r for r in app_rows(result)}
    assert rows["b"].n_avg == pytest.approx(4 / 3)
    assert rows["a"].rho == rows["a"].rho_slice == pytest.approx(1.0)
    assert rows["b"].rho == rows["b"].rho_slice == pytest.approx(1.0)
    assert rows["b"].rho_paper == pytest.approx(300.0 / (300.0 * 4 / 3))
    summary = summarize(result)
    assert summary.ideal_time == "slice"
    assert summary.max_rho == summary.max_rho_slice == pytest.approx(1.0)
    assert summary.max_rho_paper == pytest.approx(0.75)


def test_shared_is_an_overlap_of_lives() -> None:
    spans = [
        (0.0, 10.0),  # overlaps the next
        (5.0, 20.0),
        (20.0, 30.0),  # starts as the previous ends: alone
        (40.0, 40.0),  # no work: shares nothing
        (40.0, 50.0),  # the zero-length app beside it does not count
        (60.0, 70.0),  # same arrival as the next
        (60.0, 61.0),
    ]
    assert shared_cluster(spans) == [True, True, False, False, False, True, True]
    assert shared_cluster(list(reversed(spans))) == list(reversed(shared_cluster(spans)))
    assert shared_cluster([]) == []


def test_the_slice_is_of_the_work_t_cluster_is_of() -> None:
    # With estimate errors the policy sees declared work and the report the truth: the
    # report's T_cluster is of the true work, and so must the slice's ideal time be (at
    # N = 1 the two are the same time).
    # Online halving: a search's trials stopped at a rung count to the rung.
    spec = GeneratorSpec(jobs=150, seed=5, load=1.5, gpus=16, online_halving=1)
    cluster = Cluster.from_spec("1x2x8")
    result = simulate(
        generate(spec, load_profiles()),
        cluster,
        make_policy("srtf", PolicyOptions()),
        conditions=Conditions(estimate_error=0.3),
    )
    truth = {a.app_id: a for a in result.workload.apps}
    for app, row in zip(result.apps, app_rows(result), strict=True):
        work = true_work(result, app, truth[app.app_id])
        assert work.time_on(cluster.shape) == pytest.approx(app.t_cluster, rel=1e-12)
        assert row.rho_paper == posthoc_rho(row.arrival_s, row.finish_s, row.t_cluster_s, row.n_avg)
        # The slice's ideal time is never longer: its rho never lower.
        assert row.t_slice_s <= row.t_cluster_s * row.n_avg * (1 + 1e-12)
        assert row.rho_slice >= row.rho_paper * (1 - 1e-12)
        if row.n_avg == 1.0:
            assert row.rho_slice == row.rho_paper
