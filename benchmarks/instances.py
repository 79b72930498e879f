"""Generated inputs for the scale benchmarks: ``themis auction`` files shaped like the
scale targets' auctions, and Philly-like workloads.

An auction has ``machines`` x 8 GPUs in racks of 8 machines (128 x 8 = 1,024 GPUs in 16
racks by default), all free, and ``bidders`` apps with 8 placement-aware menu entries each.
Bidder k of n packs gangs of its size (1, 2, 4 or 8 GPUs, the Philly mix) starting at
position ``k |R| / n`` of the offer, as the arbiter's rotated offers make agents do, a whole
machine per gang when it fits; entry m holds the first 1, 2, 3, 4, 6, 8, 12, 16 gangs. Its
rho is the finish-time estimate ``(elapsed + work / speed) / t_id`` with the speed of the
span the entry's GPUs really have (one machine, one rack, several racks), so bundles that
spread out are worth less, as in a real bid.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from themis.fairness.ftf import RHO_MAX

#: Gangs in the first 8 menu entries.
GANG_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16)
#: (gang, cumulative probability): the Philly mix of the generator.
GANG_MIX = ((1, 0.70), (2, 0.80), (4, 0.95), (8, 1.0))
GPUS_PER_MACHINE = 8
MACHINES_PER_RACK = 8
#: Placement factors (cross machine, cross rack) of a VGG-like and a ResNet-like model.
FACTORS = ((0.72, 0.52), (0.98, 0.96))


def _gang(u: float) -> int:
    for gang, cumulative in GANG_MIX:
        if u < cumulative:
            return gang
    return 8


def auction_payload(bidders: int, machines: int = 128, seed: int = 0) -> dict:
    """The JSON object of one ``themis auction`` input file (see the module docstring)."""
    rng = random.Random(seed)
    gpus = [f"m{m}g{g}" for m in range(machines) for g in range(GPUS_PER_MACHINE)]
    machine_of = [i // GPUS_PER_MACHINE for i in range(len(gpus))]
    rack_of = [m // MACHINES_PER_RACK for m in machine_of]
    payload: dict = {
        "gpus": {
            g: {"machine": f"m{machine_of[i]}", "rack": f"r{rack_of[i]}"}
            for i, g in enumerate(gpus)
        },
        "bids": {},
    }
    n = len(gpus)
    for k in range(bidders):
        gang = _gang(rng.random())
        cross_machine, cross_rack = rng.choice(FACTORS)
        work = rng.uniform(1e4, 1e6)  # GPU-seconds left
        elapsed = rng.uniform(0.0, 3e4)
        t_id = rng.uniform(2e3, 2e5)
        # Pack gangs from the bidder's start, each within one machine (gang <= 8).
        start = (k * n // bidders) // gang * gang
        order = [(start + i) % n for i in range(n)]
        chain = [order[i : i + gang] for i in range(0, n - n % gang, gang)]
        menu = []
        for count in GANG_COUNTS:
            if count * gang > n:
                break
            chosen = [g for gang_gpus in chain[:count] for g in gang_gpus]
            racks = {rack_of[i] for i in chosen}
            machines_used = {machine_of[i] for i in chosen}
            if len(racks) > 1:
                factor = cross_rack
            elif len(machines_used) > 1 and gang > GPUS_PER_MACHINE:
                factor = cross_machine
            else:
                factor = 1.0
            speed = len(chosen) * factor
            rho = (elapsed + work / speed) / t_id
            menu.append({"gpus": [gpus[i] for i in chosen], "rho": rho})
        rho_none = RHO_MAX if rng.random() < 0.5 else (elapsed + work / 0.5) / t_id
        payload["bids"][f"app{k}"] = {"none": min(rho_none, RHO_MAX), "menu": menu}
    return payload


def write_auction(path: Path, bidders: int, machines: int = 128, seed: int = 0) -> Path:
    path.write_text(json.dumps(auction_payload(bidders, machines, seed)))
    return path


def rack_spec(gpus: int) -> str:
    """A cluster spec ``racks x machines x 8`` of ``gpus`` GPUs (a multiple of 8): racks of
    10 machines as in the scale targets' 125 x 10 x 8, fewer machines for small clusters."""
    machines = max(1, gpus // GPUS_PER_MACHINE)
    per_rack = min(10, machines)
    racks = math.ceil(machines / per_rack)
    return f"{racks}x{per_rack}x{GPUS_PER_MACHINE}"
