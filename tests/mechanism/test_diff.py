"""A schedule as what the mechanism does (``mechanism/diff.py``): the running jobs it stops
(unlisted or moved), in the order of the apps and their jobs, after which the scheduled
jobs still on their GPUs renew and the others start."""

from __future__ import annotations

from tests.mechanism.test_checks import _state
from themis.mechanism.diff import stopping
from themis.mechanism.view import Assignment


def test_unlisted_and_moved_jobs_stop_kept_ones_renew_new_ones_start() -> None:
    apps, jobs, _ = _state()
    by_id = {j.job_id: j for j in jobs}
    a0, a1, b0 = by_id["a0"], by_id["a1"], by_id["b0"]
    kept = {a0: Assignment((0, 1), 600.0), a1: Assignment((6, 7))}
    assert stopping(kept, apps) == [b0]  # b0 is not listed
    moved = {**kept, b0: Assignment((2, 3, 4, 6))}
    assert stopping(moved, apps) == [b0]  # b0 moves: a stop, then a start
    assert stopping({a0: Assignment((0, 1)), b0: Assignment((2, 3, 4, 5))}, apps) == []
    assert stopping({}, apps) == [a0, b0]  # apps in order
    for job in stopping(moved, apps):
        job.stop(0.0, False)
    # after the stops, a0 still holds its GPUs (a renewal); a1 and b0 start
    assert [bool(j.gpus) for j in moved] == [True, False, False]
