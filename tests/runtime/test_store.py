"""The SQLite store: what survives a new connection (a restarted arbiter) and what not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from themis.errors import ThemisError
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store
from themis.runtime.state.tokens import new_token, token_hash, token_matches


def test_everything_survives_a_new_connection(tmp_path: Path, state_dir: Path) -> None:
    app = load_app_file(app_yaml(tmp_path, "a", trials=3, steps=50))
    store = Store(state_dir, init=True)
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    epoch = store.epoch()
    store.add_app(app, token_hash("secret"), "a.yaml")
    store.update_app("a", state="running", arrival=12.5, t_cluster=40.0)
    store.update_trial("a", "t001", steps_done=30, attained=61.5, checkpoint="/c")
    store.set_lease("a", "t002", [("node1", 0)], 12.5, 72.5)
    store.add_rung("a", "t001", 10, 0.25)
    store.log(13.0, "a", "t001", "hello")
    store.close()

    again = Store(state_dir)
    assert again.epoch() == epoch
    (row,) = again.apps()
    assert (row.app_id, row.state, row.arrival, row.t_cluster) == ("a", "running", 12.5, 40.0)
    assert row.spec == app
    trials = {t.trial_id: t for t in again.trials("a")}
    assert list(trials) == ["t000", "t001", "t002"]
    assert (trials["t001"].steps_done, trials["t001"].attained) == (30, 61.5)
    assert trials["t002"].state == "running"
    assert again.leases()[0].gpus == [["node1", 0]]
    assert again.rungs("a") == {10: {"t001": 0.25}}
    assert again.events("a")[0][1].message == "hello"
    # A restart voids the dead process's leases; their trials wait again.
    assert again.void_leases() == 1
    assert again.leases() == [] and again.trials("a")[2].state == "waiting"


def test_duplicate_name_refused_naming_the_field(tmp_path: Path, state_dir: Path) -> None:
    app = load_app_file(app_yaml(tmp_path, "a"))
    store = Store(state_dir, init=True)
    store.add_app(app, token_hash("x"), "a.yaml")
    with pytest.raises(ThemisError, match="field 'name'.*already submitted"):
        store.add_app(app, token_hash("y"), "a.yaml")


def test_tokens_hash_and_compare() -> None:
    token = new_token()
    assert len(token) >= 40 and token != new_token()
    stored = token_hash(token)
    assert token not in stored
    assert token_matches(token, stored)
    assert not token_matches(token + "x", stored)
    assert not token_matches(None, stored)


def test_state_dir_is_private(state_dir: Path) -> None:
    Store(state_dir, init=True)
    assert state_dir.stat().st_mode & 0o077 == 0
    assert (state_dir / "themis.db").stat().st_mode & 0o077 == 0


# -- nothing created by accident, nothing lost in silence --------------------------------


def test_a_missing_or_empty_database_is_refused_unless_init(state_dir: Path) -> None:
    with pytest.raises(ThemisError, match="no state database.*serve --init"):
        Store(state_dir)
    assert not state_dir.exists()  # nothing created on the way
    state_dir.mkdir()
    (state_dir / "themis.db").write_bytes(b"")
    with pytest.raises(ThemisError, match="an empty state database"):
        Store(state_dir)
    Store(state_dir, init=True).close()
    assert Store(state_dir).apps() == []


def test_a_corrupt_database_is_one_error_and_init_moves_it_aside(state_dir: Path) -> None:
    state_dir.mkdir()
    garbage = b"this is not sqlite" * 100
    (state_dir / "themis.db").write_bytes(garbage)
    with pytest.raises(ThemisError, match="not a readable themis database"):
        Store(state_dir)
    Store(state_dir, init=True).close()
    (aside,) = state_dir.glob("themis.db.corrupt-*")
    assert aside.read_bytes() == garbage  # kept, never deleted
    assert Store(state_dir).apps() == []


def test_an_unknown_schema_version_is_refused(state_dir: Path) -> None:
    import sqlite3

    Store(state_dir, init=True).close()
    db = sqlite3.connect(state_dir / "themis.db")
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(ThemisError, match="schema version 99 is not the 2"):
        Store(state_dir)
    with pytest.raises(ThemisError, match="schema version 99"):
        Store(state_dir, init=True)  # init never overwrites a readable database


def test_a_database_of_themis_0_1_is_refused_by_version(state_dir: Path) -> None:
    import sqlite3

    state_dir.mkdir()
    db = sqlite3.connect(state_dir / "themis.db")
    db.execute("CREATE TABLE apps (app_id TEXT PRIMARY KEY)")
    db.commit()
    db.close()
    with pytest.raises(ThemisError, match=r"schema version none \(themis 0.1\)"):
        Store(state_dir)


def test_the_state_lock_refuses_a_second_holder_and_dies_with_its_process(
    state_dir: Path,
) -> None:
    import subprocess
    import sys

    from themis.runtime.state.lock import StateLock

    first = StateLock(state_dir)
    with pytest.raises(ThemisError, match=f"another arbiter \\(pid {__import__('os').getpid()}\\)"):
        StateLock(state_dir)
    first.release()
    StateLock(state_dir).release()
    # Held by a process that is then SIGKILLed: free again at once.
    code = (
        "import sys, time; from themis.runtime.state.lock import StateLock; "
        f"StateLock({str(state_dir)!r}); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ThemisError, match=f"pid {holder.pid}"):
            StateLock(state_dir)
    finally:
        holder.kill()
        holder.wait(10)
    StateLock(state_dir).release()
