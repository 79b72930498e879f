"""The app logs' writer (``state/log_writer.py``): batched off the loop, every limit
counted and said in the app's log, the state's share of each app capped."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

from themis.runtime.state.log_writer import LogLimits
from themis.runtime.state.store import Store


def counted() -> tuple[Counter[tuple[str, str]], object]:
    counts: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()

    def on_count(app_id: str, why: str, lines: int) -> None:
        with lock:
            counts[(app_id, why)] += lines

    return counts, on_count


def messages(store: Store, app_id: str) -> list[str]:
    return [e.message for _, e in store.events(app_id)]


def test_lines_over_an_apps_rate_are_dropped_counted_and_said_in_its_log(
    state_dir: Path,
) -> None:
    store = Store(state_dir, init=True)
    counts, on_count = counted()
    limits = LogLimits(lines_per_s=10, bytes_per_s=1e9, burst_s=2)
    writer = store.start_log_writer(limits, on_count)
    try:
        store.trial_lines(0.0, "loud", "t000", [f"line {k}" for k in range(500)])
        store.trial_lines(0.0, "quiet", "t000", ["hello"])
        lines = messages(store, "loud")
        kept = [m for m in lines if m.startswith("line ")]
        assert 20 <= len(kept) <= 22, len(kept)  # the burst: 2 s of 10 lines/s
        dropped = 500 - len(kept)
        assert counts[("loud", "rate")] == dropped
        assert f"{dropped} lines dropped (rate limit: 10 lines/s, " in lines[-1]
        assert messages(store, "quiet") == ["hello"]  # another app's budget is its own
        assert writer.failed is None
    finally:
        store.close()


def test_bytes_over_an_apps_rate_are_dropped_and_long_lines_cut(state_dir: Path) -> None:
    store = Store(state_dir, init=True)
    counts, on_count = counted()
    limits = LogLimits(max_line=100, lines_per_s=1e6, bytes_per_s=1000, burst_s=1)
    store.start_log_writer(limits, on_count)
    try:
        store.trial_lines(0.0, "wide", "t000", ["y" * 5000 for _ in range(50)])
        lines = messages(store, "wide")
        kept = [m for m in lines if m.startswith("y")]
        assert all(m == "y" * 100 + " [cut]" for m in kept)
        assert 8 <= len(kept) <= 10  # 1000 bytes of 106-byte lines
        assert counts[("wide", "rate")] == 50 - len(kept)
        assert counts[("wide", "cut")] == len(kept)  # lines dropped are not also cut
    finally:
        store.close()


def test_the_state_keeps_at_most_the_cap_of_each_app_and_counts_what_it_prunes(
    state_dir: Path,
) -> None:
    store = Store(state_dir, init=True)
    counts, on_count = counted()
    limits = LogLimits(lines_per_s=1e6, bytes_per_s=1e9, keep_lines=100, batch_lines=10)
    store.start_log_writer(limits, on_count)
    try:
        store.log(0.0, "other", None, "admitted")
        for batch in range(10):
            store.trial_lines(0.0, "big", "t000", [f"{batch}:{k}" for k in range(50)])
            store.flush_logs()
        lines = messages(store, "big")
        assert len(lines) <= 100
        assert lines[-1].startswith("9:") or "pruned" in lines[-1]
        assert any("older log lines pruned" in m for m in lines)
        kept = sum(not m.startswith(("older", " ")) and ":" in m for m in lines)
        assert counts[("big", "pruned")] >= 500 - kept
        assert messages(store, "other") == ["admitted"]  # another app's lines stay
    finally:
        store.close()


def test_the_loop_never_waits_on_the_disk_for_a_log_line(state_dir: Path) -> None:
    """Another connection holds the database's write lock for 3 s: queuing lines (as
    the loop does) returns at once, and they are written once the lock is free."""
    store = Store(state_dir, init=True)
    store.start_log_writer(LogLimits(flush_every=0.05))
    blocker = sqlite3.connect(store.path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        time.sleep(0.2)
        started = time.monotonic()
        for k in range(200):
            store.log(0.0, "a", None, f"event {k}")
            store.trial_lines(0.0, "a", "t000", [f"line {k}"])
        queued_in = time.monotonic() - started
        time.sleep(3.0)
        blocker.execute("COMMIT")
        assert queued_in < 1.0, queued_in
        assert len(messages(store, "a")) == 400
    finally:
        blocker.close()
        store.close()


def test_an_app_log_is_read_back_in_order_after_a_restart(state_dir: Path) -> None:
    store = Store(state_dir, init=True)
    store.start_log_writer()
    for k in range(30):
        store.log(float(k), "a", None, f"event {k}")
    store.close()  # the writer writes what it holds before the store closes
    again = Store(state_dir)
    try:
        assert messages(again, "a") == [f"event {k}" for k in range(30)]
    finally:
        again.close()
