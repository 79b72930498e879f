"""Per-app rows and the run summary on a hand-made result with known numbers."""

from __future__ import annotations

import pytest

from themis.fairness.ftf import posthoc_rho
from themis.reports.metrics import (
    RunSummary,
    app_rows,
    gang_text,
    jain_index,
    percentile,
    summarize,
)
from themis.simulator.engine import Interval

from .conftest import make_result


def test_jain_index_of_equal_values_is_one() -> None:
    assert jain_index([3.0, 3.0, 3.0]) == pytest.approx(1.0)
    assert jain_index([0.5]) == pytest.approx(1.0)


def test_jain_index_of_one_holder_is_one_over_n() -> None:
    for n in (2, 5, 10):
        assert jain_index([1.0] + [0.0] * (n - 1)) == pytest.approx(1 / n)


def test_jain_index_known_value() -> None:
    # (1 + 2)^2 / (2 * (1 + 4)) = 0.9
    assert jain_index([1.0, 2.0]) == pytest.approx(0.9)


def test_jain_index_is_scale_free() -> None:
    values = [0.7, 1.3, 4.0, 2.2]
    assert jain_index([10 * v for v in values]) == pytest.approx(jain_index(values))


def test_jain_index_all_zeros_counts_as_equal() -> None:
    assert jain_index([0.0, 0.0]) == 1.0


def test_jain_index_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        jain_index([])


def test_app_rows_follow_posthoc_rho(result) -> None:
    rows = app_rows(result)
    assert [r.app_id for r in rows] == ["a", "b"]
    a, b = rows
    assert (a.arrival_s, a.finish_s, a.completion_s, a.t_cluster_s, a.n_avg) == (
        0.0,
        100.0,
        100.0,
        50.0,
        2.0,
    )
    assert a.rho == pytest.approx(1.0)
    assert b.completion_s == 300.0
    assert b.rho == pytest.approx(2.0)
    for r in rows:
        assert r.rho == posthoc_rho(r.arrival_s, r.finish_s, r.t_cluster_s, r.n_avg)


def test_summary_of_hand_made_run(result) -> None:
    s = summarize(result)
    assert isinstance(s, RunSummary)
    assert (s.policy, s.apps, s.jobs, s.rounds) == ("hand", 2, 2, 7)
    assert s.max_rho == pytest.approx(2.0)
    assert s.jain_rho == pytest.approx(0.9)  # rho = [1, 2]
    assert s.mean_completion_s == pytest.approx(200.0)
    assert s.median_completion_s == pytest.approx(200.0)
    assert s.makespan_s == pytest.approx(340.0)  # 340 - 0
    # GPU-seconds: a 2*100, b 2*60 then 2*240 = 800
    assert s.gpu_hours == pytest.approx(800 / 3600)
    assert s.utilization == pytest.approx(800 / (4 * 340))
    assert s.placement_score == pytest.approx((200 + 120) / 800)
    # work 50 + 100 GPU-seconds over 4 GPUs and a period of 2 arrivals 40 s apart = 80 s
    assert s.offered_load == pytest.approx(150 / (4 * 80))


def test_median_of_odd_count_is_middle_value() -> None:
    res = make_result(
        [("a", 0.0, 10.0, 5.0, 1.0), ("b", 0.0, 40.0, 5.0, 1.0), ("c", 0.0, 20.0, 5.0, 1.0)], []
    )
    s = summarize(res)
    assert s.median_completion_s == 20.0
    assert s.mean_completion_s == pytest.approx(70 / 3)


def test_makespan_runs_from_first_arrival_to_last_finish() -> None:
    res = make_result([("a", 50.0, 60.0, 5.0, 1.0), ("b", 100.0, 400.0, 5.0, 1.0)], [])
    assert summarize(res).makespan_s == 350.0


def test_run_with_no_gpu_time_has_full_placement_and_no_utilization() -> None:
    res = make_result([("a", 0.0, 0.0, 0.0, 1.0)], [])
    s = summarize(res)
    assert s.placement_score == 1.0
    assert s.utilization == 0.0
    assert s.gpu_hours == 0.0
    assert s.max_rho == 1.0  # an app with no work has rho 1
    assert s.offered_load == 0.0  # no work offered


def test_placement_score_counts_gpu_time_not_intervals() -> None:
    res = make_result(
        [("a", 0.0, 100.0, 5.0, 1.0)],
        [
            Interval(0.0, 10.0, "a", "a-j", (0, 1), True),  # 20 GPU-s at best span
            Interval(10.0, 100.0, "a", "a-j", (1, 2), False),  # 180 GPU-s not
        ],
    )
    assert summarize(res).placement_score == pytest.approx(0.1)


def test_unfinished_app_is_a_bug() -> None:
    res = make_result([("a", 0.0, 10.0, 5.0, 1.0)], [])
    res.apps[0].finish = None
    with pytest.raises(AssertionError):
        app_rows(res)


def test_gang_text_groups_sizes_largest_first() -> None:
    assert gang_text([8] * 20) == "8x20"
    assert gang_text([1, 4, 1, 4, 1]) == "4x2 1x3"
    assert gang_text([]) == ""


def test_app_rows_carry_model_gangs_and_wait_to_first_gpu() -> None:
    res = make_result(
        [("a", 0.0, 100.0, 50.0, 1.0), ("b", 40.0, 340.0, 100.0, 1.0), ("c", 5.0, 5.0, 0.0, 1.0)],
        [
            Interval(0.0, 100.0, "a", "a-j", (0, 1), True),
            # b's rows out of order: its first GPU is at 130, the earliest start.
            Interval(200.0, 340.0, "b", "b-j", (0, 1), True),
            Interval(130.0, 180.0, "b", "b-j", (2, 3), True),
        ],
    )
    a, b, c = app_rows(res)
    assert (a.model, a.gangs, a.wait_s) == ("toy", "2x1", 0.0)
    assert b.wait_s == 90.0  # 130 - 40
    assert c.wait_s == c.completion_s == 0.0  # never held a GPU: waited until it finished


def test_percentile_interpolates_between_order_statistics() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 90) == pytest.approx(3.7)  # position 2.7: 3 + 0.7
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summary_counts_apps_over_one_and_rho_percentiles(result) -> None:
    s = summarize(result)  # rho 1.0 and 2.0: 1.0 is not over 1
    assert (s.apps_rho_over_1, s.share_rho_over_1) == (1, 0.5)
    assert s.rho_p50 == pytest.approx(1.5)
    assert s.rho_p90 == pytest.approx(1.9)
    assert s.rho_p99 == pytest.approx(1.99)
