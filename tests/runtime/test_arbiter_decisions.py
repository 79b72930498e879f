"""The arbiter's decisions against a fake launcher (no Ray): leases counted from the real
start, GPUs free only once the job has really stopped, successive halving that cannot
deadlock, outcomes that say what happened, requests that time out and never happen.

Each failure these rules prevent is reproduced here first; the jobs are simulated on the
wall clock by ``fakes.FakeLauncher``, so each test takes seconds.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import Behaviour, FakeLauncher, nodes
from themis.errors import ThemisError
from themis.runtime.loop.commands import Command, submit_command
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.loop.service import ArbiterService, ServiceOptions
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store
from themis.runtime.workers.lease import TrialSpec

FAST = ServiceOptions(
    knobs=replace(RUNTIME_KNOBS, lease=2.0),
    batch_window=0.2,
    grace=1.5,
    tick=0.05,
    inventory_every=0.5,
    status_every=0.2,
)


def service_for(tmp_path: Path, behaviours: dict[str, Behaviour], options=FAST):
    store = Store(tmp_path / "state", init=True)
    launcher = FakeLauncher(options.grace, behaviours)
    service = ArbiterService(store, tmp_path / "ck", options, lambda: nodes(), launcher=launcher)
    return service, store, launcher


def submit(service: ArbiterService, path: Path) -> str:
    command, token = submit_command(load_app_file(path), str(path))
    service.commands.put(command)
    service.tick()
    command.wait(1.0)
    return token


def drive(service: ArbiterService, until, timeout: float, each=None) -> float:
    start = time.monotonic()
    while not until():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout}s")
        service.tick()
        if each is not None:
            each()
        time.sleep(service.options.tick)
    return time.monotonic() - start


def state(store: Store, app: str) -> str:
    return store.app(app).state


def test_grace_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ThemisError, match=r"--grace \(30s\) must be shorter than --lease \(20s\)"):
        ServiceOptions(knobs=replace(RUNTIME_KNOBS, lease=20.0), grace=30.0)
    with pytest.raises(ThemisError, match="--grace"):
        ServiceOptions(knobs=replace(RUNTIME_KNOBS, lease=20.0), grace=20.0)
    assert ServiceOptions(knobs=replace(RUNTIME_KNOBS, lease=20.0), grace=19.0).grace == 19.0


@pytest.mark.timeout(60)
def test_slow_steps_cannot_livelock_another_app(tmp_path: Path) -> None:
    """The README's livelock: an app whose steps outlast the lease. Its GPUs must not be
    handed to the other app before its job has really stopped, and the other app's
    lease must not run down while it waits for them."""
    behaviours = {
        "slow": Behaviour(step_time=2.5, start_delay=0.3),
        "fast": Behaviour(step_time=0.05, start_delay=0.5),
    }
    service, store, launcher = service_for(tmp_path, behaviours)
    submit(service, app_yaml(tmp_path, "slow", trials=2, gpus_per_trial=2, steps=3, step_time=2.5))
    drive(service, lambda: len(service.running) == 2, 5)
    submit(
        service, app_yaml(tmp_path, "fast", trials=2, gpus_per_trial=2, steps=40, step_time=0.05)
    )
    overlaps: list[str] = []

    def no_gpu_twice() -> None:
        held = [g for rj in service.jobs.jobs() for g in rj.gpus]
        if len(held) != len(set(held)):
            overlaps.append(str(held))

    drive(
        service,
        lambda: state(store, "fast") == "finished" and state(store, "slow") == "finished",
        45,
        no_gpu_twice,
    )
    assert launcher.queued_on_busy_gpus == 0, "a job was launched onto GPUs still held"
    assert overlaps == []
    for fake in launcher.history:
        if fake.started_at is not None and fake.stop_sent is not None:
            ran = fake.stop_sent - fake.started_at
            # Themis stops a job only at its lease end, counted from its real start.
            assert ran >= FAST.lease - 2 * FAST.tick, (fake.spec.app_id, fake.spec.trial_id, ran)
    assert all(t.steps_done == 40 for t in store.trials("fast"))
    assert all(t.steps_done == 3 for t in store.trials("slow"))


@pytest.mark.timeout(60)
def test_a_lease_counts_from_the_real_start_not_the_grant(tmp_path: Path) -> None:
    service, store, launcher = service_for(
        tmp_path, {"late": Behaviour(step_time=0.05, start_delay=1.5)}
    )
    submit(service, app_yaml(tmp_path, "late", trials=1, steps=1000, step_time=0.05))
    submit(service, app_yaml(tmp_path, "rival", trials=4, steps=1000, step_time=0.05))
    key = ("late", "t000")
    drive(service, lambda: key in service.running and service.running[key].started, 10)
    (fake,) = [f for f in launcher.history if f.spec.app_id == "late"]
    real_start = fake.started_at - service.epoch
    job = service.apps["late"].job("t000")
    # Its lease ends one lease length after it really started, not after the grant.
    assert job.until == pytest.approx(real_start + FAST.lease, abs=3 * FAST.tick)
    (lease,) = store.leases("late")
    assert lease.until == job.until
    messages = [e.message for _, e in store.events("late")]
    assert any(m.startswith("started: lease until") for m in messages)


@pytest.mark.timeout(60)
def test_a_trial_that_returns_before_its_rung_cannot_deadlock_halving(tmp_path: Path) -> None:
    halving = {"rule": "successive_halving", "metric": "loss", "eta": 2, "min_steps": 10}
    behaviours = {
        "sh": Behaviour(step_time=0.02),
        "sh/t003": Behaviour(step_time=0.02, returns_at=7),
    }
    service, store, _ = service_for(tmp_path, behaviours)
    submit(service, app_yaml(tmp_path, "sh", trials=4, steps=40, early_stopping=halving))
    drive(service, lambda: state(store, "sh") != "running", 30)
    trials = {t.trial_id: t for t in store.trials("sh")}
    assert trials["t003"].state == "failed"
    assert trials["t003"].reason == "stopped: no loss reported at its rung"
    # Rung 10 decided among t000..t002 (lower loss is better, t000 best): keep 2, then 1.
    assert [trials[t].state for t in ("t000", "t001", "t002")] == [
        "finished",
        "stopped-early",
        "stopped-early",
    ]
    app = store.app("sh")
    assert app.state == "finished"
    assert (
        app.reason
        == "1 of 4 trials ran their whole budget; 2 stopped early by successive halving; 1 failed"
    )


@pytest.mark.timeout(60)
def test_an_app_whose_trials_all_fail_ends_failed_with_the_first_error(tmp_path: Path) -> None:
    service, store, _ = service_for(tmp_path, {"bad": Behaviour(error_at=3)})
    submit(service, app_yaml(tmp_path, "bad", trials=2, steps=20))
    drive(service, lambda: state(store, "bad") != "running", 20)
    app = store.app("bad")
    assert app.state == "failed"
    assert app.reason == "all 2 trials failed; the first: ValueError: broken"


@pytest.mark.timeout(60)
def test_a_typo_in_the_halving_metric_ends_failed_and_names_what_was_reported(
    tmp_path: Path,
) -> None:
    halving = {"rule": "successive_halving", "metric": "loss", "eta": 2, "min_steps": 10}
    service, store, _ = service_for(tmp_path, {"typo": Behaviour(metric="los", step_time=0.02)})
    submit(service, app_yaml(tmp_path, "typo", trials=2, steps=40, early_stopping=halving))
    drive(service, lambda: state(store, "typo") != "running", 20)
    app = store.app("typo")
    assert app.state == "failed"
    assert "no trial reported the metric 'loss'" in app.reason
    assert "(metrics reported: los)" in app.reason


def test_a_gang_larger_than_the_cluster_is_refused_at_submit(tmp_path: Path) -> None:
    service, store, _ = service_for(tmp_path, {})
    command, _ = submit_command(
        load_app_file(app_yaml(tmp_path, "big", gpus_per_trial=8)), "big.yaml"
    )
    service.commands.put(command)
    service.tick()
    with pytest.raises(ThemisError, match="a trial needs 8 GPUs and the cluster has 4"):
        command.wait(1.0)
    assert store.apps() == []


def test_a_request_that_timed_out_never_happens(tmp_path: Path) -> None:
    service, store, _ = service_for(tmp_path, {"a": Behaviour(step_time=0.1)})
    submit(service, app_yaml(tmp_path, "a", steps=1000))
    cancel = service.commands.put(Command("cancel", "a"))
    with pytest.raises(ThemisError, match="withdrawn and will not happen"):
        cancel.wait(0.05)  # the loop is not ticking: no answer in time
    for _ in range(5):
        service.tick()
    assert state(store, "a") == "running"
    # A restarted arbiter has no queue from the dead one: nothing replays either.
    service.shutdown()
    again = ArbiterService(
        store, tmp_path / "ck", FAST, lambda: nodes(), launcher=FakeLauncher(1.5, {})
    )
    again.tick()
    assert state(store, "a") == "running"


def test_a_grant_onto_gpus_still_draining_waits_for_the_drain(tmp_path: Path) -> None:
    """Whatever a policy grants, a job is launched only once its GPUs are free."""
    from themis.runtime.loop.job_control import JobControl

    launcher = FakeLauncher(1.5, {})
    jobs = JobControl(launcher)

    def spec(key, gpus):
        return TrialSpec(key[0], key[1], "tok", "m:f", str(tmp_path), {}, 10, "c", 5)

    def place(gpus):
        return [(nodes()[0]["NodeID"], len(gpus))]

    jobs.grant(("a", "t000"), (0, 1))
    assert jobs.launch_ready(spec, place) == [("a", "t000")]
    jobs.stop(("a", "t000"))
    assert jobs.reserved() == {0, 1}
    jobs.grant(("b", "t000"), (1, 2))
    assert jobs.launch_ready(spec, place) == []  # GPU 1 still held by a's job
    jobs.grant(("a", "t000"), (0, 3))
    assert jobs.launch_ready(spec, place) == []  # a trial never runs twice at once
    jobs.forget(jobs.draining[("a", "t000")])
    assert sorted(jobs.launch_ready(spec, place)) == [("a", "t000"), ("b", "t000")]


@pytest.mark.timeout(60)
def test_writes_to_the_database_by_anyone_else_change_nothing_the_arbiter_does(
    tmp_path: Path,
) -> None:
    """Tenant isolation: app code that writes the SQLite file (as it once could to cancel
    another app) is not obeyed by the running arbiter, which reads back only what it
    wrote itself: no request table, apps admitted from its own queue."""
    import sqlite3

    service, store, _ = service_for(tmp_path, {"victim": Behaviour(step_time=0.05)})
    submit(service, app_yaml(tmp_path, "victim", trials=2, steps=100, step_time=0.05))
    drive(service, lambda: len(service.running) == 2, 10)
    intruder = sqlite3.connect(tmp_path / "state" / "themis.db")
    tables = {r[0] for r in intruder.execute("SELECT name FROM sqlite_master")}
    assert "requests" not in tables
    intruder.execute("UPDATE apps SET state = 'cancelled' WHERE app_id = 'victim'")
    row = intruder.execute("SELECT * FROM apps WHERE app_id = 'victim'").fetchone()
    columns = [d[0] for d in intruder.execute("SELECT * FROM apps").description]
    forged = dict(zip(columns, row, strict=True)) | {"app_id": "sneaky", "state": "submitted"}
    names = ", ".join(forged)
    intruder.execute(
        f"INSERT INTO apps ({names}) VALUES ({', '.join('?' * len(forged))})",
        tuple(forged.values()),
    )
    intruder.commit()
    intruder.close()
    drive(service, lambda: all(t.steps_done == 100 for t in store.trials("victim")), 30)
    assert "sneaky" not in service.apps and service.submitted == []
    assert store.app("victim").state == "finished"  # ran to its end, then said so


@pytest.mark.timeout(60)
def test_status_says_why_an_app_holds_nothing(tmp_path: Path) -> None:
    service, store, _ = service_for(tmp_path, {"hog": Behaviour(step_time=0.05)})
    submit(service, app_yaml(tmp_path, "hog", trials=4, steps=10_000, step_time=0.05))
    drive(service, lambda: len(service.running) == 4, 10)
    submit(service, app_yaml(tmp_path, "late", trials=2, steps=100, step_time=0.05))
    drive(service, lambda: store.app("late").note is not None, 5)
    assert store.app("late").gpus == 0
    assert store.app("late").note.startswith("waiting: other apps hold every GPU until")
    assert store.app("hog").note is None  # it holds GPUs: nothing to explain


# -- one app's input never stops the loop ----------------------------------------------


def faults(service: ArbiterService, where: str) -> float:
    value = service.metrics.registry.get_sample_value("themis_loop_faults_total", {"where": where})
    return value or 0.0


def test_a_submit_the_store_cannot_hold_is_refused_and_the_loop_goes_on(tmp_path: Path) -> None:
    """An app the file checks let through (here built past them) that makes the store
    raise something other than a ThemisError must not end the loop (serve exit 1)."""
    import dataclasses

    service, store, _ = service_for(tmp_path, {})
    good = load_app_file(app_yaml(tmp_path, "huge", steps=20))
    huge = dataclasses.replace(good, steps=2**70)  # OverflowError in sqlite3
    command, _ = submit_command(huge, "huge.yaml")
    service.commands.put(command)
    service.tick()  # must not raise
    with pytest.raises(ThemisError, match="internal error while handling submit: OverflowError"):
        command.wait(1.0)
    assert store.app("huge") is None
    assert faults(service, "command") == 1
    submit(service, app_yaml(tmp_path, "after", steps=20))
    assert state(store, "after") == "running"  # the arbiter keeps serving


def test_an_app_that_cannot_be_admitted_fails_alone(tmp_path: Path, monkeypatch) -> None:
    """A fault while admitting one app fails that app with its reason; the others run."""
    service, store, _ = service_for(tmp_path, {})
    real_admit = service.book.admit

    def admit(row, *args, **kwargs):
        if row.app_id == "poison":
            raise ZeroDivisionError("float division by zero")
        return real_admit(row, *args, **kwargs)

    monkeypatch.setattr(service.book, "admit", admit)
    submit(service, app_yaml(tmp_path, "poison", steps=20))
    submit(service, app_yaml(tmp_path, "fine", steps=20))
    assert state(store, "poison") == "failed"
    assert store.app("poison").reason == (
        "could not be admitted: ZeroDivisionError: float division by zero"
    )
    assert state(store, "fine") == "running"
    assert faults(service, "admit") == 1


def test_a_failing_tick_is_logged_counted_and_the_loop_goes_on(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    service, store, _ = service_for(tmp_path, {})
    calls = {"n": 0}
    real_round = service.rounds.run

    def flaky(now: float) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("policy bug")
        real_round(now)

    monkeypatch.setattr(service.rounds, "run", flaky)
    command, _ = submit_command(load_app_file(app_yaml(tmp_path, "a", steps=20)), "a.yaml")
    service.commands.put(command)
    ticks = iter(range(40))
    service.run(lambda: next(ticks, None) is None or len(service.running) == 2)
    assert faults(service, "tick") == 1
    assert "policy bug" in caplog.text
    assert len(service.running) == 2  # the next tick's round granted the GPUs
    rendered = service.metrics.render().decode()
    assert 'themis_loop_faults_total{where="tick"} 1.0' in rendered


def test_each_app_gets_its_own_checkpoint_key_stable_across_restarts(tmp_path: Path) -> None:
    """Jobs seal their checkpoints with their app's key, which the arbiter hands
    to that app's jobs only; a restarted arbiter hands out the same key."""
    service, store, launcher = service_for(tmp_path, {})
    submit(service, app_yaml(tmp_path, "a", steps=1000))
    submit(service, app_yaml(tmp_path, "b", steps=1000))
    drive(service, lambda: len(launcher.history) >= 4, 5)
    keys = {(f.spec.app_id, f.spec.trial_id): f.spec.checkpoint_key for f in launcher.history}
    assert keys[("a", "t000")] == keys[("a", "t001")] == service.checkpoint_key("a")
    assert keys[("b", "t000")] != keys[("a", "t000")]
    assert all(len(k) == 64 for k in keys.values())
    spec = launcher.history[0].spec
    assert spec.checkpoint_path == str(
        tmp_path / "ck" / spec.app_id / spec.trial_id / "checkpoint.themis"
    )
    assert spec.checkpoint_key not in repr(spec)  # never in a log line or traceback
    again = ArbiterService(store, tmp_path / "ck", FAST, lambda: nodes(), launcher=launcher)
    assert again.checkpoint_key("a") == keys[("a", "t000")]
    secret = tmp_path / "state" / "checkpoint.key"
    assert oct(secret.stat().st_mode & 0o777) == "0o600"


@pytest.mark.timeout(60)
def test_a_job_reporting_impossible_progress_is_refused_and_the_loop_goes_on(
    tmp_path: Path,
) -> None:
    """A job's code can write anything into what its actor reports (it runs in that
    process): a checkpoint step of 2**70 made update_trial raise OverflowError in every
    tick that read it. Reports outside [0, budget], or not numbers, are refused."""
    import dataclasses

    service, store, launcher = service_for(tmp_path, {})
    real = launcher._progress

    def forged(fake, upto=None):
        progress = real(fake, upto)
        if fake.spec.app_id != "evil":
            return progress
        return dataclasses.replace(
            progress,
            steps=2**70,
            checkpoint_step=2**70,
            reports=((2**70, {"loss": float("nan")}),),
        )

    launcher._progress = forged
    submit(service, app_yaml(tmp_path, "evil", trials=1, steps=50, step_time=0.05))
    submit(service, app_yaml(tmp_path, "fine", trials=1, steps=20, step_time=0.05))
    drive(service, lambda: state(store, "fine") == "finished", 20)
    assert faults(service, "tick") == 0
    assert all(t.steps_done <= 50 for t in store.trials("evil"))
    refused = [e.message for _, e in store.events("evil") if "refused a report" in e.message]
    assert refused and "out of range" in refused[0]
