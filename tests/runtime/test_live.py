"""Apps rebuilt from the store as a restarted arbiter sees them (hand-computed N_avg)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.conftest import app_yaml
from themis.model.cluster import Cluster
from themis.runtime.loop.live import AppBook
from themis.runtime.state.appfile import load_app_file
from themis.runtime.state.store import Store


def test_rebuild_replays_active_apps_and_keeps_progress(tmp_path: Path) -> None:
    store = Store(tmp_path / "state", init=True)
    for name in ("a", "b", "c"):
        store.add_app(load_app_file(app_yaml(tmp_path, name, trials=3, steps=40)), "h", name)
    store.update_app("a", state="finished", arrival=0.0, finish=10.0, t_cluster=4.0)
    store.update_app("b", state="running", arrival=5.0, t_cluster=4.0)
    store.update_trial("b", "t000", state="finished", steps_done=40)
    store.update_trial("b", "t001", state="parked", steps_done=20)
    store.update_trial("b", "t002", state="waiting", steps_done=15, attained=31.0)

    book = AppBook.rebuild(store, now=20.0)
    assert list(book.apps) == ["b"]  # c was never admitted, a is over
    (b,) = book.active
    # Active apps: 1 on [0, 5), 2 on [5, 10), 1 on [10, 20]: b's N_avg over [5, 20] is
    # (2 * 5 + 1 * 10) / 15.
    assert book.n_avg(b, 20.0) == pytest.approx(20 / 15)
    done, parked, waiting = b.jobs
    assert done.finished_at is not None
    assert parked.finished_at == 20.0 and parked.done == 20.0  # paused, progress kept
    assert waiting.finished_at is None and (waiting.done, waiting.attained) == (15.0, 31.0)
    assert b.demand() == 1 and b.idle_jobs() == [waiting]

    # Admitting c now on 4 GPUs: its 3 one-GPU trials of 40 steps x 0.1 s are 12 GPU-s
    cluster = Cluster.from_spec("1x2x2")
    row = store.app("c")
    live = book.admit(row, {"t000": "waiting", "t001": "waiting", "t002": "waiting"}, cluster, 20.0)
    # over the 3 GPUs it can use (its demand): T_cluster = 4 s.
    assert live.state.t_cluster == pytest.approx(4.0)
    assert book.retire(b, 30.0) == pytest.approx((20 + 2 * 10) / 25)
    assert [a.app_id for a in book.active] == ["c"]
