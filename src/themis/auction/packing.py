"""The words of the proportional-fair choice that every exact path speaks (branch and
bound in ``solver``, the bounded searches in ``bounded``, the LP path in ``lp_path``,
HiGHS's MIP in ``mip``): a candidate entry and a packing. Here, so that those paths need
not import the solver that calls them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

#: Under a node limit, HiGHS's MIP answers only auctions of at most this many entries
#: (``_mip_allowed``: measured fast there; its root node cannot be bounded by nodes).
MIP_COLUMNS = 1_000


class Candidate(NamedTuple):
    """One usable menu entry of one bidder, in solver form (a tuple: auctions make
    hundreds of thousands of them)."""

    bidder: int
    entry: int  # index into the bidder's menu
    gain: float
    mask: int  # bitmask of GPUs


class Solution(NamedTuple):
    """A packing and its objective (a named tuple: every search returns several)."""

    objective: float
    chosen: Mapping[int, Candidate]  # bidder -> candidate
    #: A certified upper bound on the optimum when the search stopped on its budget before
    #: proving ``chosen`` optimal (``budget``); None: proven optimal (within TOLERANCE).
    bound: float | None = None

    @property
    def gap(self) -> float:
        """How far the optimum may lie above ``objective`` (0 when proven optimal)."""
        return 0.0 if self.bound is None else self.bound - self.objective
