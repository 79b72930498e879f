"""The SQLite store: what survives a new connection (a restarted arbiter) and what not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from themis.errors import ThemisError
from themis.runtime.appfile import load_app_file
from themis.runtime.store import Store
from themis.runtime.tokens import new_token, token_hash, token_matches


def test_everything_survives_a_new_connection(tmp_path: Path, state_dir: Path) -> None:
    app = load_app_file(app_yaml(tmp_path, "a", trials=3, steps=50))
    store = Store(state_dir)
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
    store = Store(state_dir)
    store.add_app(app, token_hash("x"), "a.yaml")
    with pytest.raises(ThemisError, match="field 'name'.*already submitted"):
        store.add_app(app, token_hash("y"), "a.yaml")


def test_requests_are_answered_and_tokens_erased(state_dir: Path) -> None:
    store = Store(state_dir)
    rid = store.add_request("cancel", "a", "tok", {"x": "1"})
    (pending,) = store.pending_requests()
    assert (pending.id, pending.token, pending.payload) == (rid, "tok", {"x": "1"})
    store.answer(rid, "refused", "wrong token")
    row = store.request(rid)
    assert row is not None and (row.state, row.reply, row.token) == ("refused", "wrong token", None)
    assert store.pending_requests() == []


def test_tokens_hash_and_compare() -> None:
    token = new_token()
    assert len(token) >= 40 and token != new_token()
    stored = token_hash(token)
    assert token not in stored
    assert token_matches(token, stored)
    assert not token_matches(token + "x", stored)
    assert not token_matches(None, stored)


def test_state_dir_is_private(state_dir: Path) -> None:
    Store(state_dir)
    assert state_dir.stat().st_mode & 0o077 == 0
    assert (state_dir / "themis.db").stat().st_mode & 0o077 == 0
