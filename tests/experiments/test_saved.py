"""Finished runs are kept and reused: a batch run again skips the runs whose inputs did
not change, reruns the ones that did, and a failed run costs only itself."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from themis.experiments import runner, saved
from themis.experiments.runner import RunRequest, RunsFailed, execute, run_batch, run_many
from themis.policies import PolicyOptions
from themis.reports.files import RECORD_FILE

from .test_runner import requests, small_workload


def kept(tmp_path: Path) -> list[RunRequest]:
    """The runner test's four runs, each with a folder of its own."""
    return [replace(r, out_dir=tmp_path / f"run{i}") for i, r in enumerate(requests())]


def mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.iterdir())}


def test_a_record_reads_back_equal(tmp_path: Path) -> None:
    record = execute(requests()[0])
    again = saved.record_from_json(json.loads(json.dumps(saved.record_to_json(record))))
    assert saved.same_record(record, again)
    assert again == record or any(v != v for v in vars(record.summary).values())  # NaN


def test_the_same_batch_again_reuses_every_run_and_rewrites_nothing(tmp_path: Path) -> None:
    first = run_batch(kept(tmp_path), workers=2)
    assert (first.reused, first.failures) == (0, [])
    before = {r.out_dir: mtimes(r.out_dir) for r in kept(tmp_path) if r.out_dir}
    heard: list[str] = []
    second = run_batch(kept(tmp_path), workers=2, on_progress=lambda k, d, t: heard.append(k))
    assert second.reused == 4 and second.failures == []
    assert {r.out_dir: mtimes(r.out_dir) for r in kept(tmp_path) if r.out_dir} == before
    assert sorted(heard) == sorted(r.label for r in requests())  # counted as done at once
    for a, b in zip(first.ordered(kept(tmp_path)), second.ordered(kept(tmp_path)), strict=True):
        assert saved.same_record(a, b)


def test_a_changed_input_reruns_that_run_only(tmp_path: Path) -> None:
    run_batch(kept(tmp_path), workers=1)
    before = {r.label: mtimes(r.out_dir) for r in kept(tmp_path) if r.out_dir}
    changed = kept(tmp_path)
    apps = list(small_workload().apps)
    job = apps[2].jobs[0]
    apps[2] = replace(apps[2], jobs=(replace(job, work=job.work + 1.0), *apps[2].jobs[1:]))
    changed[0] = replace(changed[0], workload=replace(small_workload(), apps=tuple(apps)))
    changed[1] = replace(changed[1], options=PolicyOptions(fairness_knob=0.5))
    batch = run_batch(changed, workers=1)
    assert batch.reused == 2
    after = {r.label: mtimes(r.out_dir) for r in changed if r.out_dir}
    assert [k for k in before if after[k] != before[k]] == ["themis", "themis f=0"]


def test_the_key_follows_contents_not_names(tmp_path: Path) -> None:
    base = kept(tmp_path)[2]
    assert saved.inputs_key(base) == saved.inputs_key(replace(base, label="other", out_dir=None))
    assert saved.inputs_key(base) == saved.inputs_key(replace(base, workload=small_workload()))
    different = [
        replace(base, policy="max-min"),
        replace(base, cluster="1x2x4"),
        replace(base, batch_window=1.0),
        replace(base, params={"seed": 1}),
        replace(base, config={"policy": "fifo"}),
        replace(base, files=("summary.json",)),
    ]
    keys = {saved.inputs_key(r) for r in different}
    assert saved.inputs_key(base) not in keys and len(keys) == len(different)


@settings(max_examples=25, deadline=None)
@given(app=st.integers(0, 5), job=st.integers(0, 3), extra=st.floats(0.5, 500.0))
def test_any_change_of_a_jobs_work_changes_the_key(app: int, job: int, extra: float) -> None:
    base = requests()[2]
    apps = list(base.workload.apps)
    jobs = list(apps[app].jobs)
    jobs[job] = replace(jobs[job], work=jobs[job].work + extra)
    apps[app] = replace(apps[app], jobs=tuple(jobs))
    other = replace(base, workload=replace(base.workload, apps=tuple(apps)))
    assert saved.inputs_key(other) != saved.inputs_key(base)


def test_other_code_is_not_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_batch(kept(tmp_path)[2:], workers=1)
    monkeypatch.setattr(saved, "code_digest", lambda: "edited")
    assert run_batch(kept(tmp_path)[2:], workers=1).reused == 0


def test_a_half_written_run_is_not_reused(tmp_path: Path) -> None:
    run_batch(kept(tmp_path)[2:], workers=1)
    (tmp_path / "run2" / "allocations.csv").unlink()  # a file lost: run again
    (tmp_path / "run3" / RECORD_FILE).write_text('{"format": 1, "inputs": "x"')  # cut short
    batch = run_batch(kept(tmp_path)[2:], workers=1)
    assert batch.reused == 0
    assert (tmp_path / "run2" / "allocations.csv").exists()
    assert saved.load(kept(tmp_path)[3]) is not None


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_run_is_reported_and_the_others_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    real = runner.make_policy

    def broken(name: str, options: PolicyOptions):  # type: ignore[no-untyped-def]
        if options.fairness_knob == 0.0:
            raise RuntimeError("injected failure")
        return real(name, options)

    monkeypatch.setattr(runner, "make_policy", broken)  # forked workers inherit it
    heard: list[str] = []
    batch = run_batch(kept(tmp_path), workers=workers, on_failure=lambda o: heard.append(o.label))
    assert heard == ["themis f=0"]
    [failure] = batch.failures
    assert failure.error == "RuntimeError: injected failure" and failure.bug
    assert "injected failure" in failure.details and "Traceback" in failure.details
    assert sorted(batch.records) == ["fifo", "max-min", "themis"]
    assert not (tmp_path / "run1").exists()
    with pytest.raises(RunsFailed, match="1 of 4 simulations failed, first 'themis f=0'"):
        batch.ordered(kept(tmp_path))
    monkeypatch.setattr(runner, "make_policy", real)  # fixed: only the failed run reruns
    again = run_batch(kept(tmp_path), workers=workers)
    assert again.reused == 3 and again.failures == []


def test_run_many_still_raises_after_the_others(tmp_path: Path) -> None:
    bad = RunRequest("bad", "no-such-policy", small_workload(), "1x2x2")
    with pytest.raises(RunsFailed, match="'bad'"):
        run_many([kept(tmp_path)[2], bad], workers=2)
    assert saved.load(kept(tmp_path)[2]) is not None  # saved before the error


def test_a_users_error_is_not_a_bug(tmp_path: Path) -> None:
    bad = RunRequest("bad", "fifo", small_workload(), "1x1x1")  # 2-GPU gangs cannot fit
    [failure] = run_batch([bad, kept(tmp_path)[2]], workers=2).failures
    assert not failure.bug and "needs 2 GPUs" in str(failure.error)
