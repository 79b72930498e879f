"""The GPU inventory and topology of a Ray cluster, as the scheduler's :class:`Cluster`.

Every alive Ray node with ``GPU`` resources is a machine. Its rack is its label
``themis.rack`` (``ray start --labels='{"themis.rack": "r1"}'``) or, failing that, a
custom resource named ``rack:<name>`` (``--resources='{"rack:r1": 1}'``); nodes with
neither share one rack. A ``accelerator_type:<T>`` resource gives the GPU type.

Scheduler GPU ids are positions in a list of (node id, slot) pairs sorted by rack and
node id, so the same cluster always gets the same ids (a restarted arbiter included).
Slots are the arbiter's bookkeeping: which of a node's GPUs a job gets is Ray's choice
(``CUDA_VISIBLE_DEVICES``); the arbiter only ever asks a node for as many as it has free.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from themis.model.cluster import Cluster, Gpu

RACK_LABEL = "themis.rack"
RACK_RESOURCE_PREFIX = "rack:"
TYPE_RESOURCE_PREFIX = "accelerator_type:"
DEFAULT_RACK = "default"

Slot = tuple[str, int]  # (Ray node id, GPU index within the node)


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    rack: str
    gpus: int
    gpu_type: str | None
    address: str = ""  # the node's IP (Ray's NodeManagerAddress): a gang's MASTER_ADDR


@dataclass(frozen=True)
class Inventory:
    """The scheduler's cluster and where each of its GPU ids lives in Ray."""

    cluster: Cluster | None  # None while no node has a GPU
    slots: tuple[Slot, ...]
    nodes: tuple[NodeInfo, ...]

    def index(self) -> dict[Slot, int]:
        return {slot: g for g, slot in enumerate(self.slots)}

    def address(self, node_id: str) -> str:
        for info in self.nodes:
            if info.node_id == node_id:
                return info.address
        return ""

    def per_node(self, gpus: Iterable[int]) -> list[tuple[str, int]]:
        """(node id, GPU count) of a GPU set, the node with most GPUs first."""
        counts = Counter(self.slots[g][0] for g in gpus)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def node_info(node: Mapping[str, Any]) -> NodeInfo | None:
    """A Ray node (an entry of ``ray.nodes()``) as a machine, or None if it has no GPU or
    is not alive."""
    if not node.get("Alive", False):
        return None
    resources = node.get("Resources") or {}
    gpus = int(resources.get("GPU", 0) + 1e-9)
    if gpus <= 0:
        return None
    labels = node.get("Labels") or {}
    rack = labels.get(RACK_LABEL)
    if rack is None:
        racks = sorted(k[len(RACK_RESOURCE_PREFIX) :] for k in resources if k.startswith("rack:"))
        rack = racks[0] if racks else DEFAULT_RACK
    types = sorted(k[len(TYPE_RESOURCE_PREFIX) :] for k in resources if k.startswith("accel"))
    gpu_type = types[0] if types else None
    address = str(node.get("NodeManagerAddress") or "")
    return NodeInfo(str(node["NodeID"]), str(rack), gpus, gpu_type, address)


def read_inventory(nodes: Sequence[Mapping[str, Any]]) -> Inventory:
    """Build the inventory from ``ray.nodes()``."""
    infos = sorted(
        (i for i in (node_info(n) for n in nodes) if i is not None),
        key=lambda i: (i.rack, i.node_id),
    )
    rack_index = {r: k for k, r in enumerate(dict.fromkeys(i.rack for i in infos))}
    # A cluster is typed throughout or not at all: nodes Ray reports no accelerator type
    # for, among typed ones, form a type of their own (gangs never mix types).
    typed = any(i.gpu_type for i in infos)
    gpus: list[Gpu] = []
    slots: list[Slot] = []
    for machine, info in enumerate(infos):
        for slot in range(info.gpus):
            name = f"{info.rack}/m{machine}/g{slot}"
            gpu_type = info.gpu_type or ("unknown" if typed else None)
            gpus.append(Gpu(len(gpus), name, machine, rack_index[info.rack], gpu_type))
            slots.append((info.node_id, slot))
    return Inventory(Cluster(gpus) if gpus else None, tuple(slots), tuple(infos))


#: The store's ``meta`` key under which the arbiter keeps the last cluster it scheduled
#: on (``themis replay`` simulates on it by default).
CLUSTER_META = "cluster"


def cluster_record(inventory: Inventory) -> dict[str, Any] | None:
    """What the store keeps of a cluster: its machines (rack, GPUs, type) in scheduler
    order and, when it is one regular block, the ``--cluster`` spec that rebuilds it.
    ``None`` while no node has a GPU (nothing worth keeping)."""
    if inventory.cluster is None:
        return None
    machines = [
        {"rack": info.rack, "gpus": info.gpus, "type": info.gpu_type} for info in inventory.nodes
    ]
    return {"machines": machines, "spec": regular_spec(machines)}


def regular_spec(machines: Sequence[Mapping[str, Any]]) -> str | None:
    """``RxMxG`` (``:TYPE``) when every rack has as many machines and every machine as
    many GPUs of one type; else ``None`` (no spec rebuilds it)."""
    if not machines:
        return None
    per_rack = Counter(str(m["rack"]) for m in machines)
    gpus = {int(m["gpus"]) for m in machines}
    types = {m.get("type") for m in machines}
    if len(set(per_rack.values())) != 1 or len(gpus) != 1 or len(types) != 1:
        return None
    [count] = set(per_rack.values())
    [per_machine] = gpus
    [gpu_type] = types
    spec = f"{len(per_rack)}x{count}x{per_machine}"
    return spec if gpu_type is None else f"{spec}:{str(gpu_type).lower()}"
