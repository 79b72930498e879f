"""How much work one auction may do before it answers with what it has.

An exact proportional-fair auction has no bound on its running time (weighted set packing
is NP-hard), and an arbiter whose round takes minutes stalls every lease in the cluster.
So every auction runs under a ``Budget``:

- ``nodes``: a deterministic work limit, in *work units* of about 5 us of CPU each on the
  project's machine (``UNIT_SECONDS``): one branch-and-bound node is one unit; a HiGHS
  simplex, interior-point or MIP iteration costs more the larger the model it works on
  (``highs_units``, ``ipm_units``: by the model's non-zeros, up to a cap), and a
  bounded re-solve's Python work one unit per bidder it passes over (````resolve_units``).
  HiGHS's own limits (``simplex_iteration_limit``, ``ipm_iteration_limit``,
  ``mip_max_nodes``) are set from the units left divided by that weight. The simulator
  uses it: the same inputs then give the same answer on any machine, at any load.
- ``seconds``: a wall-clock deadline, for the runtime, where a round must end in time
  whatever the machine does.

Either or both may be set; ``None`` is no limit. The budget covers the whole auction call
(``partial_allocation``): checking the bids and building the solver's program, the
proportional-fair allocation x* and every winner's re-solve x^-i, and assembling the
answer. When it runs out the solver answers with the best allocation found so far and a
certified upper bound on the optimum (``solver.Solution.bound``), never with nothing.

Under a deadline the solves stop ``FINISH_SHARE`` of the time early (``for_solves``): the
rest is kept for assembling the answer (packings improved by local search, bounds, the
payments), whose own loops look at the clock too (``out_of_time``) and stop with what they
have. The node limit is not split that way: what it decides stays the same on any machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

#: The simulator's default work limit per auction (work units, see the module docstring).
#: Far above what any auction of the bundled or generated workloads needs (their largest
#: search visits a few hundred nodes). On the hard held-out family (``benchmarks/heldout.py``,
#: 50 to 1,000 bidders) a limited auction takes at most about a second of CPU on the
#: project's 2-core machine, measured by ``benchmarks/auction_limits.py`` (docs/benchmarks.md).
DEFAULT_NODE_LIMIT = 200_000

#: What one work unit costs, about, in CPU seconds on the project's machine (what the
#: weights below were calibrated to; a machine twice as fast takes half the time for the
#: same answer).
UNIT_SECONDS = 5e-6

#: A HiGHS simplex iteration (or MIP node) costs one work unit per this many non-zeros of
#: its model, up to ``MAX_ITERATION_UNITS``: small models cost what a branch-and-bound
#: node does; on large packing LPs an iteration took 40-160 us whatever the size
#: (held-out family at 200 to 1,000 bidders, 7,600 to 38,000 non-zeros; agents' menus at
#: 1,000 bidders, 110,000 non-zeros: ~200 us), so the weight levels off.
NONZEROS_PER_UNIT = 500
MAX_ITERATION_UNITS = 16

#: An interior-point iteration (a factorisation of the normal equations) costs one unit
#: per this many non-zeros, up to ``MAX_IPM_UNITS``: 2.5-5.5 ms an iteration on the
#: held-out family at 200 to 1,000 bidders.
IPM_NONZEROS_PER_UNIT = 10
MAX_IPM_UNITS = 1_000

#: Work units a HiGHS MIP run is charged per column (entry) besides its nodes and
#: iterations: presolve and the root's cuts and heuristics, which its counters miss
#: (30-130 ms at 800 columns of the held-out family, 20-30 ms at 300).
MIP_UNITS_PER_COLUMN = 20

#: Bidders of the auction per work unit a bounded re-solve (``bounded.limited_answer``
#: around one winner) is charged: it passes over every bidder once or twice (~2-3 ms at
#: 1,000 held-out bidders, ~450 units). Charged at twice that, to leave room for the
#: parts of an auction no counter sees (bid checking, payments: ~0.1 s at 1,000 bidders).
BIDDERS_PER_RESOLVE_UNIT = 1

#: The runtime's default wall-clock deadline per auction, in seconds.
DEFAULT_DEADLINE = 1.0

#: A deadline search looks at the clock once per this many nodes.
CLOCK_EVERY = 256

#: Share of an auction's deadline kept from its solves for assembling the answer (see the
#: module docstring): at 1,000 bidders of the held-out family that assembly (the
#: re-solves' incumbents and bounds, the payments) takes ~0.1 s of CPU.
FINISH_SHARE = 0.25

#: The top level keeps at least this many times the wall time that checking the bids and
#: building the program took (``Budget.assembly``): assembling the answer is Python work
#: of the same order (a pass over the winners and the entries), and it slows down as much
#: when the machine is loaded, which a fixed share of the deadline does not.
ASSEMBLY_FACTOR = 3.0


def highs_units(nonzeros: int) -> int:
    """Work units one HiGHS simplex iteration or MIP node costs on a model of
    ``nonzeros`` constraint-matrix entries (the module docstring)."""
    return 1 + min(nonzeros // NONZEROS_PER_UNIT, MAX_ITERATION_UNITS - 1)


def ipm_units(nonzeros: int) -> int:
    """Work units one HiGHS interior-point iteration costs on such a model."""
    return 1 + min(nonzeros // IPM_NONZEROS_PER_UNIT, MAX_IPM_UNITS - 1)


def resolve_units(bidders: int) -> int:
    """Work units of one bounded re-solve in an auction of ``bidders`` bidders."""
    return 1 + bidders // BIDDERS_PER_RESOLVE_UNIT


def mip_affordable(budget: Budget, columns: int) -> bool:
    """Whether ``budget``'s work units pay for a HiGHS MIP run's set-up on ``columns``
    entries (``MIP_UNITS_PER_COLUMN`` each): its presolve and root node ignore HiGHS's
    limits, so a MIP started on less would overrun the work limit."""
    return budget.nodes_left is None or budget.nodes_left >= MIP_UNITS_PER_COLUMN * columns


@dataclass(frozen=True)
class Limits:
    """The limits of one auction: ``nodes`` (deterministic work) and ``seconds`` (wall
    clock); None is no limit."""

    nodes: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.nodes is not None and self.nodes < 1:
            raise ValueError(f"an auction node limit must be >= 1, got {self.nodes}")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"an auction deadline must be > 0 seconds, got {self.seconds}")


class Budget:
    """The work left to one auction (see the module docstring), shared by its solves.

    A solve asks ``allowance()`` how many nodes it may take, reports what it took with
    ``spend``, and checks ``expired()`` for the deadline. Whether a solve stopped on it
    shows in its answer (``solver.Solution.bound``)."""

    def __init__(self, limits: Limits, clock: object = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.nodes_left = limits.nodes
        start: float = clock()  # type: ignore[operator]
        self.started = start
        self.deadline = None if limits.seconds is None else start + limits.seconds
        self.parent: Budget | None = None
        #: Wall seconds the auction took before its solves (``partial_allocation`` sets
        #: it): the top level keeps ``ASSEMBLY_FACTOR`` times as much for the end.
        self.assembly = 0.0

    def share(self, fraction: float, time_fraction: float | None = None) -> Budget:
        """A part of what is left (``fraction`` of the nodes and of the time, or
        ``time_fraction`` of the time when given), for one solve: what it spends is spent
        here too. So the re-solves of an auction whose x* took long still get their turn,
        and one hard solve cannot starve the others."""
        part = Budget(Limits(), self.clock)
        if self.nodes_left is not None:
            part.nodes_left = max(1, int(self.nodes_left * fraction))
        left = self.seconds_left()
        if left is not None:
            timed = fraction if time_fraction is None else time_fraction
            part.deadline = self.clock() + max(0.0, left) * timed  # type: ignore[operator]
        part.parent = self
        return part

    def for_solves(self, keep: float = FINISH_SHARE) -> Budget:
        """The budget of the solves: the same nodes (spent here too), and under a deadline
        one that ends ``keep`` of the time left earlier, so the answer can be assembled
        before the real one."""
        if self.deadline is None:
            return self
        part = Budget(Limits(), self.clock)
        part.nodes_left = self.nodes_left
        left = max(0.0, self.seconds_left() or 0.0)
        kept = min(left, max(left * keep, ASSEMBLY_FACTOR * self.assembly))
        part.deadline = self.clock() + left - kept  # type: ignore[operator]
        part.parent = self
        return part

    def out_of_time(self) -> bool:
        """Whether the deadline (not the node limit) has passed: what assembles an answer
        looks only at this, so that under a node limit it does the same work on any
        machine."""
        left = self.seconds_left()
        return left is not None and left <= 0.0

    @staticmethod
    def unlimited() -> Budget:
        return Budget(Limits())

    @property
    def active(self) -> bool:
        return self.nodes_left is not None or self.deadline is not None

    def allowance(self, cap: int | None = None) -> int | None:
        """Nodes a solve may take now: what is left, at most ``cap`` (None: no limit)."""
        if self.nodes_left is None:
            return cap
        return self.nodes_left if cap is None else min(cap, self.nodes_left)

    def spend(self, nodes: int) -> None:
        if self.nodes_left is not None:
            self.nodes_left = max(0, self.nodes_left - nodes)
        if self.parent is not None:
            self.parent.spend(nodes)

    def afford(self, weight: int) -> int | None:
        """Iterations of ``weight`` units each that the units left pay for (None: no
        node limit): at least 1, so that a solve given a turn can start."""
        if self.nodes_left is None:
            return None
        return max(1, self.nodes_left // max(1, weight))

    def seconds_left(self) -> float | None:
        if self.deadline is None:
            return None
        return self.deadline - self.clock()  # type: ignore[operator]

    def expired(self) -> bool:
        """Whether nothing is left (no nodes, or past the deadline)."""
        if self.nodes_left is not None and self.nodes_left <= 0:
            return True
        left = self.seconds_left()
        return left is not None and left <= 0.0
