"""The scheduler's cluster read from Ray's node table (``ray.nodes()`` entries)."""

from __future__ import annotations

from themis.model.cluster import Span
from themis.runtime.workers.ray_inventory import read_inventory


def node(node_id: str, gpus: float, alive: bool = True, labels=None, **extra) -> dict:
    resources = {"CPU": 1.0, "memory": 1e9}
    if gpus:
        resources["GPU"] = gpus
    resources.update(extra)
    return {"NodeID": node_id, "Alive": alive, "Resources": resources, "Labels": labels or {}}


def test_racks_from_labels_or_resources_and_stable_ids() -> None:
    nodes = [
        node("ffff", 2, labels={"themis.rack": "r1"}),
        node("head", 0),  # no GPU: not a machine
        node("aaaa", 2, labels={"themis.rack": "r1"}),
        node("bbbb", 4, **{"rack:r0": 1.0, "accelerator_type:V100": 1.0}),
        node("dead", 8, alive=False),
    ]
    inv = read_inventory(nodes)
    cluster = inv.cluster
    assert cluster is not None and cluster.size == 8
    # Sorted by (rack, node id): r0/bbbb (4), r1/aaaa (2), r1/ffff (2).
    assert inv.slots == (
        ("bbbb", 0),
        ("bbbb", 1),
        ("bbbb", 2),
        ("bbbb", 3),
        ("aaaa", 0),
        ("aaaa", 1),
        ("ffff", 0),
        ("ffff", 1),
    )
    assert cluster.machine_of == (0, 0, 0, 0, 1, 1, 2, 2)
    assert cluster.rack_of == (0, 0, 0, 0, 1, 1, 1, 1)
    # One node reports a type: the cluster is typed throughout, the others "unknown".
    assert cluster.gpus[0].gpu_type == "V100" and cluster.gpus[4].gpu_type == "unknown"
    assert cluster.types == ("V100", "unknown")
    assert cluster.span([4, 6]) is Span.RACK
    assert cluster.span([0, 4]) is Span.CLUSTER
    assert inv.per_node([0, 4, 5]) == [("aaaa", 2), ("bbbb", 1)]
    # GPUs are named by rack, machine index and slot, as the dashboard names machines
    # (m0, m1, ...), not by a prefix of Ray's node id.
    assert [g.name for g in cluster.gpus][::2] == ["r0/m0/g0", "r0/m0/g2", "r1/m1/g0", "r1/m2/g0"]
    # Same nodes in another order: same ids.
    assert read_inventory(list(reversed(nodes))).slots == inv.slots


def test_no_gpu_no_cluster() -> None:
    inv = read_inventory([node("head", 0)])
    assert inv.cluster is None and inv.slots == ()
