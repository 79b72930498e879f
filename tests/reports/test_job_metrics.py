"""Job-level figures (wait for the first GPU, slowdown, starts) on hand-computed schedules."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies.base import PolicyOptions
from themis.policies.registry import make_policy
from themis.reports.comparison import jobs_section, seeds_section
from themis.reports.files import write_run
from themis.reports.html import render
from themis.reports.metrics import JOB_FIGURES, app_rows, job_rows, summarize
from themis.reports.record import record_run
from themis.reports.seeds import JOB_SEED_METRICS, seeds_table
from themis.reports.tables import comparison_tables, jobs_table, summary_table
from themis.simulator.engine import Interval, SimulationResult, simulate

#: 1 s per iteration on one GPU; half speed across machines.
TOY = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)


def _hand_result() -> SimulationResult:
    """Two apps on 1x2x2 (machines: GPUs 0,1 and 2,3), finishes set by hand.

    a (arrives 0): a1, 2 GPUs, 100 iterations: isolated 100 / 2 = 50 s; runs [10, 60)
        on one machine: wait 10, completion 60, slowdown 1.2, one start.
       a2, 1 GPU, 30 iterations: isolated 30 s; runs [0, 10) then [40, 60): wait 0,
        completion 60, slowdown 2, two starts.
    b (arrives 20): b1, 2 GPUs, 40 iterations: isolated 20 s; runs [60, 80) and
        [80, 100) on GPUs 1 and 2, across the machines (half speed: 40 s of running):
        wait 40, completion 80, slowdown 4, two starts.
       b2, 1 GPU, no work: never holds a GPU, left out.
    """
    specs = (
        AppSpec("a", 0.0, "toy", (JobSpec("a1", 2, 100.0), JobSpec("a2", 1, 30.0))),
        AppSpec("b", 20.0, "toy", (JobSpec("b1", 2, 40.0), JobSpec("b2", 1, 0.0))),
    )
    finishes = {"a1": 60.0, "a2": 60.0, "b1": 100.0, "b2": 20.0}
    states = []
    for spec in specs:
        state = AppState(spec, TOY, 0.0)
        for job in state.jobs:
            job.finished_at = finishes[job.job_id]
        state.finish = max(finishes[j.job_id] for j in spec.jobs)
        states.append(state)
    intervals = [
        Interval(80.0, 100.0, "b", "b1", (1, 2), False),
        Interval(10.0, 60.0, "a", "a1", (0, 1), True),
        Interval(0.0, 10.0, "a", "a2", (0,), True),
        Interval(40.0, 60.0, "a", "a2", (2,), True),
        Interval(60.0, 80.0, "b", "b1", (1, 2), False),
    ]
    return SimulationResult(
        "hand",
        Workload(specs, {"toy": TOY}, "hand-made"),
        Cluster.from_spec("1x2x2"),
        states,
        intervals,
        3,
        {"a": 1.5, "b": 1.5},
    )


def test_job_rows_of_a_hand_schedule() -> None:
    rows = {r.job_id: r for r in job_rows(_hand_result())}
    assert set(rows) == {"a1", "a2", "b1"}  # b2 had no work and never held a GPU
    a1, a2, b1 = rows["a1"], rows["a2"], rows["b1"]
    assert (a1.wait_s, a1.completion_s, a1.isolated_s, a1.starts) == (10.0, 60.0, 50.0, 1)
    assert a1.slowdown == pytest.approx(1.2)
    assert (a2.wait_s, a2.isolated_s, a2.starts) == (0.0, 30.0, 2)
    assert a2.slowdown == pytest.approx(2.0)
    assert (b1.wait_s, b1.completion_s, b1.isolated_s, b1.starts) == (40.0, 80.0, 20.0, 2)
    assert b1.slowdown == pytest.approx(4.0)


def test_summary_job_figures_overall_and_by_gang() -> None:
    s = summarize(_hand_result())
    # waits [10, 0, 40]: sorted [0, 10, 40]; p99 at position 1.98 = 10 + 0.98 * 30
    assert s.job_wait_mean_s == pytest.approx(50 / 3)
    assert s.job_wait_p50_s == pytest.approx(10.0)
    assert s.job_wait_p99_s == pytest.approx(39.4)
    assert s.job_wait_max_s == 40.0
    # slowdowns [1.2, 2, 4]
    assert s.job_slowdown_p50 == pytest.approx(2.0)
    assert s.job_slowdown_p99 == pytest.approx(2.0 + 0.98 * 2.0)
    assert s.job_slowdown_max == pytest.approx(4.0)
    assert s.starts_per_job_mean == pytest.approx(5 / 3)
    assert s.starts_per_job_max == 2
    assert list(s.jobs_by_gang) == [1, 2]
    one, two = s.jobs_by_gang[1], s.jobs_by_gang[2]
    assert list(one) == list(JOB_FIGURES)
    assert one["jobs"] == 1 and one["wait_max_s"] == 0.0 and one["starts_max"] == 2
    assert one["slowdown_p99"] == pytest.approx(2.0)
    # gang 2: a1 (wait 10, slowdown 1.2, 1 start) and b1 (wait 40, slowdown 4, 2 starts)
    assert two["jobs"] == 2
    assert two["wait_p50_s"] == pytest.approx(25.0)
    assert two["wait_mean_s"] == pytest.approx(25.0)
    assert two["slowdown_max"] == pytest.approx(4.0)
    assert two["starts_mean"] == pytest.approx(1.5)


def test_isolated_time_counts_the_work_done_not_the_work_declared() -> None:
    # A search trial stopped at a rung ran 20 of its 100 iterations: isolated 10 s.
    result = replace(_hand_result(), work_done={("a", "a1"): 20.0})
    a1 = next(r for r in job_rows(result) if r.job_id == "a1")
    assert a1.isolated_s == pytest.approx(10.0)
    assert a1.slowdown == pytest.approx(6.0)


def test_a_gang_larger_than_a_machine_is_timed_at_its_best_span() -> None:
    # A 4-GPU gang on 1x2x2 can only span the rack: 0.5 speed, 100 / (4 * 0.5) = 50 s.
    spec = AppSpec("c", 0.0, "toy", (JobSpec("c1", 4, 100.0),))
    state = AppState(spec, TOY, 0.0)
    state.jobs[0].finished_at = 50.0
    state.finish = 50.0
    result = SimulationResult(
        "hand",
        Workload((spec,), {"toy": TOY}),
        Cluster.from_spec("1x2x2"),
        [state],
        [Interval(0.0, 50.0, "c", "c1", (0, 1, 2, 3), True)],
        1,
        {"c": 1.0},
    )
    (row,) = job_rows(result)
    assert row.isolated_s == pytest.approx(50.0)
    assert row.slowdown == pytest.approx(1.0)


def test_simulated_fifo_waits_match_the_hand_schedule() -> None:
    """1x1x2 under FIFO: A (t=0) runs its 2-GPU job of 100 iterations on [0, 50); B (t=10)
    has a 1-GPU job of 30 iterations, which waits for A and runs [50, 80): wait 40,
    completion 70, isolated 30, slowdown 7/3; A's job: wait 0, slowdown 1."""
    workload = Workload(
        (
            AppSpec("A", 0.0, "toy", (JobSpec("A1", 2, 100.0),)),
            AppSpec("B", 10.0, "toy", (JobSpec("B1", 1, 30.0),)),
        ),
        {"toy": TOY},
    )
    result = simulate(workload, Cluster.from_spec("1x1x2"), make_policy("fifo", PolicyOptions()))
    rows = {r.job_id: r for r in job_rows(result)}
    assert rows["A1"].wait_s == pytest.approx(0.0)
    assert rows["A1"].slowdown == pytest.approx(1.0)
    assert rows["B1"].wait_s == pytest.approx(40.0)
    assert rows["B1"].completion_s == pytest.approx(70.0)
    assert rows["B1"].slowdown == pytest.approx(70.0 / 30.0)
    assert result.work_done == {("A", "A1"): 100.0, ("B", "B1"): 30.0}
    # The app's wait in apps.csv is its first job's: the same number here.
    assert app_rows(result)[1].wait_s == pytest.approx(40.0)


def test_summary_json_holds_the_job_figures(tmp_path: Path) -> None:
    result = _hand_result()
    rows = app_rows(result)
    write_run(tmp_path, result, summarize(result, rows), rows)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["job_wait_max_s"] == 40.0
    assert data["starts_per_job_max"] == 2
    assert set(data["jobs_by_gang"]) == {"1", "2"}
    assert data["jobs_by_gang"]["2"]["jobs"] == 2


def _text(table) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_tables_show_the_job_figures() -> None:
    s = summarize(_hand_result())
    text = _text(summary_table([s]))
    assert "job wait p50 / p99 / max" in text and "40 s" in text
    assert "1.67 / 2" in text  # starts per job, mean / max
    many = [replace(s, policy=f"p{k}") for k in range(5)]
    tables = comparison_tables(many)
    assert len(tables) == 2  # a row per run, then the job figures
    jobs = _text(jobs_table(many))
    assert "slowdown p99" in jobs and "3.96" in jobs and "1.67" in jobs
    assert "39 s" in jobs  # p99 wait 39.4 s


def test_seeds_table_of_job_metrics() -> None:
    s = summarize(_hand_result())
    later = replace(s, job_wait_p99_s=7200.0)
    text = _text(seeds_table({"hand": [s, later]}, "jobs", JOB_SEED_METRICS))
    assert "job wait p99 h" in text
    assert "0.0-2.0" in text  # the range of the p99 wait over the two seeds, in hours


def test_report_has_a_jobs_section_per_gang() -> None:
    record = record_run(_hand_result())
    assert record.job_waits_h == pytest.approx((10 / 3600, 0.0, 40 / 3600))
    section = jobs_section({"hand": [(None, record)]})
    (table,) = section.tables
    assert [row[:3] for row in table.rows] == [["hand", "1", "1"], ["hand", "2", "2"]]
    assert len(section.figures) == 1 and "fraction of jobs" in section.figures[0].svg
    page = render("t", [], [section, seeds_section({"hand": [(1, record), (2, record)]}, "S")])
    assert "job wait p99 h" in page and "wait p99 (h)" in page


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_a_comparison_on_a_narrow_terminal_is_split_never_cut(width: int) -> None:
    s = summarize(_hand_result())
    names = ["themis", "ftf-oracle", "gavel-mmf", "tiresias", "srtf", "max-min", "gandiva"]
    many = [replace(s, policy=name, utilization=0.877, placement_score=0.991) for name in names]
    texts = []
    for table in comparison_tables(many, width=width):
        console = Console(width=width, record=True, color_system=None)
        console.print(table)
        texts.append(console.export_text())
    text = "\n".join(texts)
    assert "…" not in text  # rich cut nothing
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    for header in ("max rho", "Jain", "util.", "placed", "wait p50", "starts max"):
        assert header in text, header
    assert "87.7%" in text and "99.1%" in text
    assert all(text.count(name) >= 2 for name in names)  # every part names its rows
    if width >= 120:
        assert len(texts) == 2  # as before: runs, then jobs
