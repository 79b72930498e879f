"""State you can trust: a corrupt database is refused at every open, a database deleted or
replaced under the running arbiter stops it (with what it held rescued), its files are
private from their creation, and it can be backed up live."""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from tests.runtime.fakes import FakeLauncher, nodes
from themis.errors import ThemisError
from themis.runtime.loop.commands import submit_command
from themis.runtime.loop.options import RUNTIME_KNOBS
from themis.runtime.loop.service import ArbiterService, ServiceOptions
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import StateLost, Store
from themis.runtime.state.tokens import token_hash

FAST = ServiceOptions(
    knobs=replace(RUNTIME_KNOBS, lease=2.0), batch_window=0.2, grace=1.5, tick=0.05
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def filled_store(tmp_path: Path, state_dir: Path, events: int = 3000) -> None:
    store = Store(state_dir, init=True)
    store.add_app(load_app_file(app_yaml(tmp_path, "a")), token_hash("x"), "a.yaml")
    with store.tx() as db:
        db.executemany(
            "INSERT INTO events (wall, t, app_id, trial_id, message) VALUES (0, 0, 'a', NULL, ?)",
            [(f"event {k} " + "x" * 80,) for k in range(events)],
        )
    store.close()


# -- integrity checked at every open ----------------------------------------------------


def test_a_database_with_one_corrupt_page_is_refused_at_open_in_one_line(
    tmp_path: Path, state_dir: Path
) -> None:
    """It used to be checked only under --init: serve started Ray and crashed 22 s later
    with a 37-line traceback (Store.void_leases)."""
    filled_store(tmp_path, state_dir)
    path = state_dir / "themis.db"
    page = 4096
    assert path.stat().st_size > 40 * page
    with open(path, "r+b") as f:  # one page of the events table, overwritten
        f.seek(30 * page + 100)
        f.write(os.urandom(3000))
    with pytest.raises(ThemisError) as info:
        Store(state_dir)
    message = info.value.format()
    assert "failed its integrity check" in message and "\n" not in message
    assert "themis state backup" in message or "--init" in message


# -- the open file checked against the path ---------------------------------------------


def service_for(tmp_path: Path, state_dir: Path) -> tuple[ArbiterService, Store]:
    store = Store(state_dir, init=True)
    launcher = FakeLauncher(FAST.grace, {})
    service = ArbiterService(store, tmp_path / "ck", FAST, lambda: nodes(), launcher=launcher)
    command, _ = submit_command(load_app_file(app_yaml(tmp_path, "a")), "a.yaml")
    service.commands.put(command)
    service.tick()
    command.wait(1.0)
    return service, store


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_deleted_or_replaced_under_the_arbiter_stops_it(
    tmp_path: Path, state_dir: Path, how: str
) -> None:
    """``rm .themis/themis.db`` under a running serve went unnoticed: submits still
    answered 201, and the restart refused 'no state database' with the history lost."""
    service, store = service_for(tmp_path, state_dir)
    path = state_dir / "themis.db"
    if how == "deleted":
        path.unlink()
    else:
        other = tmp_path / "other.db"
        sqlite3.connect(other).close()
        os.replace(other, path)
    with pytest.raises(StateLost) as info:
        service.run(lambda: False)  # not swallowed as a faulty tick
    message = info.value.format()
    assert f"was {how} under the running arbiter" in message and "\n" not in message
    (rescued,) = state_dir.glob("themis.db.rescued-*")
    assert str(rescued) in message
    assert mode(rescued) == 0o600
    db = sqlite3.connect(rescued)
    assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert [r[0] for r in db.execute("SELECT app_id FROM apps")] == ["a"]
    assert db.execute("SELECT count(*) FROM events").fetchone()[0] >= 2
    wal = list(state_dir.glob("themis.db-wal.rescued-*"))
    assert len(wal) == 1 and wal[0].stat().st_size > 0  # the WAL kept, as it was
    service.shutdown()  # no write goes anywhere (lost state): it must not raise
    store.close()
    assert wal[0].exists()


# -- private from creation --------------------------------------------------------------


def test_wal_and_shm_are_private_from_creation_and_a_loose_dir_is_tightened(
    state_dir: Path,
) -> None:
    """-wal and -shm were created 0644 before the chmod, and an existing 0755 state
    directory stayed 0755: another user read live event text from the WAL."""
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    store = Store(state_dir, init=True)
    store.log(0.0, "a", None, "a secret event")
    for name in ("themis.db", "themis.db-wal", "themis.db-shm"):
        assert mode(state_dir / name) == 0o600, name
    assert mode(state_dir) == 0o700
    store.close()
    os.chmod(state_dir, 0o755)
    os.chmod(state_dir / "themis.db", 0o644)
    Store(state_dir).close()  # an existing state: tightened too
    assert mode(state_dir) == 0o700 and mode(state_dir / "themis.db") == 0o600


# -- backup -----------------------------------------------------------------------------


def test_backup_of_a_live_database_is_a_consistent_private_copy(
    tmp_path: Path, state_dir: Path
) -> None:
    from themis.runtime.state.store import backup

    filled_store(tmp_path, state_dir, events=50)
    live = Store(state_dir)  # the arbiter's connection, open (WAL) while we copy
    live.log(1.0, "a", None, "written after the copy started? no: before")
    dest = tmp_path / "backups" / "themis-1.db"
    summary = backup(state_dir, dest)
    assert "1 apps" in summary and "51 events" in summary
    assert mode(dest) == 0o600
    copy = sqlite3.connect(dest)
    assert copy.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert copy.execute("SELECT count(*) FROM events").fetchone()[0] == 51
    with pytest.raises(ThemisError, match="exists"):
        backup(state_dir, dest)  # never overwritten
    live.close()
    # Restore: the copy in place of the database, and it opens as a state.
    restored = tmp_path / "restored"
    restored.mkdir(mode=0o700)
    os.replace(dest, restored / "themis.db")
    assert [r.app_id for r in Store(restored).apps()] == ["a"]


def test_the_state_backup_command(tmp_path: Path, state_dir: Path, capsys) -> None:
    from themis.cli.main import run

    filled_store(tmp_path, state_dir, events=5)
    dest = tmp_path / "b.db"
    assert run(["state", "backup", "--state-dir", str(state_dir), str(dest)]) == 0
    assert "1 apps, 5 events (quick_check ok)" in capsys.readouterr().out
    assert run(["state", "backup", "--state-dir", str(tmp_path / "none"), str(dest)]) == 2
    err = capsys.readouterr().err
    assert "no state database" in err and len(err.strip().splitlines()) == 1
