"""Successive halving's rules (Jamieson & Talwalkar 2016), shared by the simulator and the
runtime: one implementation, so that a search decided in simulation is decided the same
way on a real cluster.

Rungs are at ``min_steps * eta**k`` steps (or iterations), below the budget. A rung is
decided once every trial that entered it (every trial the rung below kept) has a metric
value there, or has ended for another reason. Then the best ``ceil(n / eta)`` of the ``n``
with a value go on and the others stop. Ties go to the earlier trial. Decisions are a pure
function of the recorded values: no trial's fate is known before its rung.

Anything with ``mode``, ``eta`` and ``rungs(budget)`` is a ladder: the runtime's app-file
``Halving`` and the simulator's declared ``Search`` both are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

Step = TypeVar("Step", int, float)


class Ladder(Protocol):
    """A successive-halving configuration: where its rungs are, which way is better."""

    @property
    def mode(self) -> str: ...  # "min" or "max"

    @property
    def eta(self) -> int: ...

    def rungs(self, budget: int) -> list[int]: ...


def rungs(min_steps: Step, eta: int, budget: Step) -> list[Step]:
    """Rung positions below ``budget``, ascending: ``min_steps * eta**k``."""
    out = []
    step = min_steps
    while step < budget:
        out.append(step)
        step *= eta
    return out


@dataclass(frozen=True)
class Decisions:
    stops: dict[str, int]  # trial -> the rung (steps) that stopped it
    decided: tuple[int, ...]  # rungs decided so far, ascending


def decide(
    halving: Ladder,
    budget: int,
    trials: Sequence[str],
    values: dict[int, dict[str, float]],
    ended: set[str],
) -> Decisions:
    """What successive halving has decided given the metric values recorded so far.

    ``trials`` in submission order; ``values[rung][trial]`` the metric at that rung;
    ``ended`` the trials that stopped for another reason (they never block a rung).
    """
    order = {t: i for i, t in enumerate(trials)}
    sign = 1.0 if halving.mode == "min" else -1.0
    survivors = list(trials)
    stops: dict[str, int] = {}
    decided: list[int] = []
    for rung in halving.rungs(budget):
        at = values.get(rung, {})
        if any(t not in at and t not in ended for t in survivors):
            break  # the rung is not complete yet
        ranked = sorted((t for t in survivors if t in at), key=lambda t: (sign * at[t], order[t]))
        keep = math.ceil(len(ranked) / halving.eta)
        for t in ranked[keep:]:
            stops[t] = rung
        survivors = ranked[:keep]
        decided.append(rung)
    return Decisions(stops, tuple(decided))


def next_stop(halving: Ladder | None, budget: int, steps: int, decided: Sequence[int]) -> int:
    """Where a trial that has done ``steps`` steps must pause next: the first undecided
    rung above them, or the end of its budget."""
    if halving is None:
        return budget
    for rung in halving.rungs(budget):
        if rung > steps and rung not in decided:
            return rung
    return budget
