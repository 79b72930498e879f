"""Starting or joining the Ray cluster the runtime schedules on.

``start_local`` runs several Ray nodes on this machine (``ray.cluster_utils.Cluster``) so
one person can try the runtime, or test it, with logical GPUs and a real multi-node
topology: node ``k`` gets ``gpus / machines`` GPUs and the rack label
``themis.rack = r<k * racks // machines>``.

Loopback by default. Ray picks the machine's outward address unless told otherwise; with
``host`` left at 127.0.0.1, every node is started on 127.0.0.1 and
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray's own address lookups (workers, the
driver) answer loopback too. Ray's session files go to a temp directory of this run,
never the shared ``/tmp/ray``: set before the first node starts, ``RAY_TMPDIR`` also
moves Ray's "current cluster" file there.

Everything started here is stopped through the handle it returns, never with
``ray stop`` (which kills every Ray process of the machine by name).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from themis.errors import ThemisError

LOOPBACK = "127.0.0.1"


def loopback_environment(temp_root: str, host: str = LOOPBACK) -> None:
    """Environment every Ray process started from here inherits (see the module doc).

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, when ``ray`` is imported; if this
    process imported it already, its copy of the flag is set too, or this driver would
    look for the cluster at the machine's outward address.
    """
    os.environ["RAY_TMPDIR"] = temp_root
    if host == LOOPBACK:
        loopback_addresses()


def loopback_addresses() -> None:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[attr-defined]


@dataclass
class LocalCluster:
    """A multi-node Ray cluster on this machine, and this process connected to it."""

    handle: Any  # ray.cluster_utils.Cluster
    temp_root: str
    workers: list[Any] = field(default_factory=list)

    @property
    def address(self) -> str:
        return str(self.handle.address)

    def add_machine(self, gpus: int, rack: str) -> Any:
        node = self.handle.add_node(
            num_cpus=1,
            num_gpus=gpus,
            node_ip_address=_host(),
            labels={"themis.rack": rack},
        )
        self.workers.append(node)
        return node

    def remove_machine(self, node: Any) -> None:
        self.handle.remove_node(node)
        self.workers.remove(node)

    def shutdown(self) -> None:
        """Stop every node started here (by handle) and remove the session files."""
        import ray

        ray.shutdown()
        try:
            self.handle.shutdown()
        finally:
            shutil.rmtree(self.temp_root, ignore_errors=True)


def _host() -> str:
    return os.environ.get("THEMIS_RAY_HOST", LOOPBACK)


def start_local(
    gpus: int,
    machines: int = 1,
    racks: int = 1,
    host: str = LOOPBACK,
    temp_root: str | None = None,
    head_gpus: bool = True,
    connect: bool = True,
) -> LocalCluster:
    """Start ``machines`` Ray nodes sharing ``gpus`` logical GPUs and connect to them.

    With ``head_gpus`` the head node is machine 0; without, the head has no GPU and every
    machine is a worker node (so any of them can be removed to simulate a failure).
    Without ``connect`` this process does not join as a driver (``serve`` drives Ray
    from a child process: ``ray_driver``).
    """
    if machines < 1 or gpus < machines or gpus % machines:
        raise ThemisError(
            f"{gpus} GPUs cannot be split evenly over {machines} machines", field="--machines"
        )
    if not 1 <= racks <= machines:
        raise ThemisError(f"racks must be between 1 and {machines}, got {racks}", field="--racks")
    import ray
    from ray.cluster_utils import Cluster as RayCluster

    root = temp_root or tempfile.mkdtemp(prefix="thr-")  # short: Ray has socket paths there
    os.makedirs(os.path.join(root, "ray"), exist_ok=True)
    loopback_environment(root, host)
    os.environ["THEMIS_RAY_HOST"] = host
    per = gpus // machines
    head_args: dict[str, Any] = {
        "num_cpus": 1,
        "num_gpus": per if head_gpus else 0,
        "node_ip_address": host,
        "include_dashboard": False,
        "temp_dir": os.path.join(root, "ray"),
    }
    if head_gpus:
        head_args["labels"] = {"themis.rack": "r0"}
    handle = RayCluster(initialize_head=True, head_node_args=head_args)
    local = LocalCluster(handle, root)
    try:
        for k in range(1 if head_gpus else 0, machines):
            local.add_machine(per, f"r{k * racks // machines}")
        if connect:
            ray.init(address=local.address, logging_level=logging.ERROR, log_to_driver=False)
    except BaseException:
        handle.shutdown()
        raise
    return local


def connect(address: str) -> None:
    """Join an existing cluster (started with ``ray start``) as a driver.

    A cluster on this machine's loopback is joined over loopback: Ray would otherwise
    look for its local node at the machine's outward address and never find it."""
    host = address.rsplit(":", 1)[0]
    if host in (LOOPBACK, "localhost"):
        loopback_addresses()
    import ray

    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ThemisError(f"cannot join the Ray cluster: {exc}", field="--address") from None
