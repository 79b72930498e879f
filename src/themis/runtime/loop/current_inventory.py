"""The GPU inventory the loop schedules on, held in one place that every part reads.

Ray's nodes come and go (``inventory_tracking``); the parts that grant, record and show
leases read the inventory through this holder, so a change is one assignment that every
reader sees at once, and the API thread (the dashboard) reads a whole inventory, never
one half-changed."""

from __future__ import annotations

from themis.model.cluster import Cluster
from themis.runtime.workers.ray_inventory import Inventory


class CurrentInventory:
    """The inventory in force; replaced whole, never changed in place."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory

    @property
    def cluster(self) -> Cluster | None:
        """The scheduler's cluster; None while there is no GPU (or Ray is unreachable)."""
        return self.inventory.cluster
