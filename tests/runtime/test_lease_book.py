"""The runtime's view of free GPUs leaves out the GPUs of jobs that have not stopped yet,
however a policy asks for them (a list in order, or a set)."""

from __future__ import annotations

from themis.model.cluster import Cluster
from themis.runtime.loop.lease_book import RuntimeView


def test_reserved_gpus_are_never_free() -> None:
    cluster = Cluster.from_spec("1x2x4")
    view = RuntimeView(0.0, cluster, [], lambda app: 1.0, reserved=frozenset({1, 6}))
    assert view.free_gpus() == [0, 2, 3, 4, 5, 7]
    assert view.free_set() == {0, 2, 3, 4, 5, 7}
    books = RuntimeView(0.0, cluster, [], lambda app: 1.0, free={0, 1, 2}, reserved=frozenset({1}))
    assert books.free_gpus() == [0, 2]
    assert books.free_set() == {0, 2}


def test_a_lease_end_is_said_on_both_clocks(monkeypatch) -> None:
    """Events carry the arbiter's clock (t=) and the dashboard the wall clock: the lease
    end in an event says both, so one can be matched to the other."""
    import time as time_module

    from themis.runtime.loop.lease_book import lease_end_text

    monkeypatch.setattr(time_module, "time", lambda: 1_000_000.0)
    wall = time_module.strftime("%H:%M:%S", time_module.localtime(1_000_000.0 + 60.0))
    assert lease_end_text(160.0, 100.0) == f"t=160.0s ({wall})"
    assert lease_end_text(None, 100.0) == "open"
