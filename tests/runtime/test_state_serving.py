"""The state under a serving arbiter, through its API (an arbiter loop on a thread with
the Ray-free launcher, and its real HTTP server): a database damaged while serving, a
``workdir`` that would reach into the server, app names that differ only in case."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

from tests.runtime.conftest import HERE
from tests.runtime.fakes import Behaviour
from tests.runtime.test_api import Arbiter, call
from themis.runtime.state.store import Store


@pytest.fixture
def arbiter(tmp_path: Path):
    a = Arbiter(tmp_path / "state", {"slow": Behaviour(step_time=0.2)})
    try:
        yield a
    finally:
        a.close()


def app_text(name: str, **fields: object) -> str:
    spec: dict[str, object] = {
        "name": name,
        "entrypoint": "trainers:paced",
        "trials": 1,
        "gpus_per_trial": 1,
        "steps": 20,
        "step_time": 0.1,
        "workdir": str(HERE),
        "search_space": {"quality": [1.0]},
    }
    spec.update(fields)
    return yaml.safe_dump(spec, sort_keys=False)


def submit(a: Arbiter, text: str, base_dir: str = "/") -> tuple[int, dict]:
    body = json.dumps({"text": text, "source": "app.yaml", "base_dir": base_dir}).encode()
    status, answer = call(a.url, "POST", "/v1/apps", a.submitter, body)
    return status, json.loads(answer)


def one_line(answer: dict) -> str:
    detail = answer["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    return detail


def metric(a: Arbiter, name: str) -> float:
    status, text = call(a.url, "GET", "/metrics", a.admin)
    assert status == 200
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


# -- a database damaged while serving ----------------------------------------------------


def damage(db: Path, pages: range) -> None:
    """Overwrite whole pages of the database file, as a failing disk or a stray writer
    would (the WAL first checkpointed into it, so that readers read these pages)."""
    side = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = side.execute("PRAGMA page_size").fetchone()[0]
    finally:
        side.close()
    with open(db, "r+b") as f:
        for page in pages:
            f.seek(page * size)
            f.write(os.urandom(size))


def test_a_database_damaged_while_serving_is_a_503_a_failing_healthz_and_stops_the_loop(
    arbiter: Arbiter,
) -> None:
    for name in ("one", "two", "three"):
        assert submit(arbiter, app_text(name))[0] == 201
    assert call(arbiter.url, "GET", "/healthz", None)[0] == 200
    damage(arbiter.state / "themis.db", range(1, 6))
    deadline = time.monotonic() + 20
    while True:  # the next read of a damaged page says so
        status, answer = call(arbiter.url, "GET", "/v1/status", arbiter.admin)
        if status != 200:
            break
        assert time.monotonic() < deadline, "the damage was never noticed"
        time.sleep(0.2)
    assert status == 503, answer
    assert "the state database is damaged" in one_line(json.loads(answer))
    status, answer = call(arbiter.url, "GET", "/healthz", None)
    assert status == 503 and json.loads(answer)["ok"] is False
    assert metric(arbiter, "themis_state_faults_total") >= 1
    arbiter.thread.join(10)  # its next tick stopped the loop (serve then exits)
    assert not arbiter.thread.is_alive()
    service = arbiter.service
    assert service is not None and service.store.lost
    with pytest.raises(Exception, match="damaged"):  # and nothing more is written
        service.store.update_app("one", note="x")


# -- workdir -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workdir", "base_dir"),
    [
        ("/proc/self/fd/3", "/"),
        ("/proc/1/root", "/"),
        ("../proc/self/cwd", "/tmp"),
        ("3", "/proc/self/fd"),
        ("/sys/kernel", "/"),
        ("/dev", "/"),
    ],
)
def test_a_workdir_into_the_servers_own_process_is_a_400_quoting_only_the_input(
    arbiter: Arbiter, workdir: str, base_dir: str
) -> None:
    status, answer = submit(arbiter, app_text("probe", workdir=workdir), base_dir)
    assert status == 400, answer
    detail = one_line(answer)
    assert "workdir" in detail and repr(workdir) in detail
    assert str(arbiter.state) not in detail and "themis.db" not in detail
    assert f"/proc/{os.getpid()}" not in detail and "/proc/self/fd/" not in detail.replace(
        repr(workdir), ""
    )


def test_a_link_into_proc_and_a_missing_or_unreadable_workdir_are_400s(
    arbiter: Arbiter, tmp_path: Path
) -> None:
    (tmp_path / "inside").symlink_to("/proc/self")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    try:
        for workdir in (str(tmp_path / "inside"), str(tmp_path / "nowhere"), "x" * 5000):
            status, answer = submit(arbiter, app_text("probe", workdir=workdir))
            assert status == 400, answer
            assert "workdir" in one_line(answer)
            assert "/proc/self" not in one_line(answer).replace(repr(workdir[:200]), "")
        status, answer = submit(arbiter, app_text("fine", workdir=str(HERE)))
        assert status == 201, answer
    finally:
        locked.chmod(0o700)


# -- names -------------------------------------------------------------------------------


def test_app_names_are_unique_ignoring_case_a_409_naming_the_app(arbiter: Arbiter) -> None:
    assert submit(arbiter, app_text("waiter"))[0] == 201
    for name in ("Waiter", "WAITER", "waiter"):
        status, answer = submit(arbiter, app_text(name))
        assert status == 409, answer
        detail = one_line(answer)
        assert f"'{name}'" in detail and "unique ignoring case" in detail
        if name != "waiter":
            assert "(as 'waiter')" in detail
    status, answer = call(arbiter.url, "GET", "/v1/status", arbiter.admin)
    assert [r["app_id"] for r in json.loads(answer)["apps"]] == ["waiter"]


def test_a_state_holding_names_that_differ_only_in_case_still_loads(state_dir: Path) -> None:
    """An older arbiter accepted them: they stay, and their names are still taken."""
    from themis.runtime.state.appfile import parse_app_text
    from themis.runtime.state.store import NameTaken

    store = Store(state_dir, init=True)
    try:
        store.add_app(parse_app_text(app_text("waiter"), "a", HERE), "h1", "a")
        store.db.execute(  # what an older arbiter wrote: the same app under another case
            "INSERT INTO apps (app_id, token_hash, spec, source, state, submitted_at)"
            " SELECT 'Waiter', 'h2', spec, source, state, submitted_at FROM apps"
        )
    finally:
        store.close()
    again = Store(state_dir)
    try:
        assert [a.app_id for a in again.apps()] == ["Waiter", "waiter"]
        with pytest.raises(NameTaken):
            again.add_app(parse_app_text(app_text("WAITER"), "a", HERE), "h3", "a")
    finally:
        again.close()
