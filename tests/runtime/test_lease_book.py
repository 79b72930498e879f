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
