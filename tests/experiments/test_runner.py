"""Runs in worker processes give exactly what runs in this process give."""

from __future__ import annotations

from dataclasses import replace

import pytest

from themis.experiments.runner import RunRequest, RunsFailed, execute, run_many
from themis.model.profiles import load_profiles
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.policies import PolicyOptions

PROFILES = load_profiles()


def small_workload() -> Workload:
    apps = tuple(
        AppSpec(
            f"a{i}",
            30.0 * i,
            ["vgg16", "resnet50", "alexnet"][i % 3],
            tuple(JobSpec(f"a{i}j{k}", 1 + (i + k) % 2, 200.0 + 90.0 * k) for k in range(4)),
        )
        for i in range(6)
    )
    return Workload(apps, PROFILES, "small")


def requests() -> list[RunRequest]:
    w = small_workload()
    return [
        RunRequest("themis", "themis", w, "1x2x2"),
        RunRequest("themis f=0", "themis", w, "1x2x2", PolicyOptions(fairness_knob=0.0)),
        RunRequest("fifo", "fifo", w, "1x2x2"),
        RunRequest("max-min", "max-min", w, "1x2x2"),
    ]


def test_parallel_equals_serial_and_keeps_request_order() -> None:
    seen: dict[str, tuple[int, int]] = {}
    parallel = run_many(requests(), workers=2, on_progress=lambda k, d, t: seen.update({k: (d, t)}))
    serial = run_many(requests(), workers=1)
    assert [r.label for r in parallel] == ["themis", "themis f=0", "fifo", "max-min"]
    # Identical but for the CPU time each run took.
    assert [replace(r, cpu_s=0.0) for r in parallel] == [replace(r, cpu_s=0.0) for r in serial]
    assert all(r.cpu_s > 0 for r in parallel)
    # Every run reported its last app through the queue.
    assert seen == {label: (6, 6) for label in ["themis", "themis f=0", "fifo", "max-min"]}


def test_params_and_policy_travel_with_the_record() -> None:
    request = replace(requests()[2], params={"lease_s": 60.0})
    record = execute(request)
    assert record.policy == "fifo"
    assert record.params == {"lease_s": 60.0}
    assert record.capacity == 4
    assert len(record.rows) == 6


def test_run_files_are_written_where_asked(tmp_path) -> None:
    request = replace(requests()[2], out_dir=tmp_path / "fifo", config={"policy": "fifo"})
    run_many([request, requests()[3]], workers=2)
    assert sorted(p.name for p in (tmp_path / "fifo").iterdir()) == [
        "allocations.csv",
        "apps.csv",
        "summary.json",
        "themis-record.json",
    ]


def test_labels_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique"):
        run_many([requests()[0], requests()[0]])


def test_a_failing_run_fails_the_batch_once_the_others_are_done() -> None:
    bad = RunRequest("bad", "fifo", small_workload(), "1x1x1")  # 2-GPU gangs cannot fit
    with pytest.raises(RunsFailed, match="1 of 2 simulations failed, first 'bad': .*needs 2 GPUs"):
        run_many([requests()[2], bad], workers=2)
