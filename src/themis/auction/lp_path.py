"""Large auctions through one warm-started LP, every answer certified exact.

On the menus agents send (nested chains of gangs from rotated starting points) the LP
relaxation of the proportional-fair program is integral nearly always, so the LP optimum
*is* the integer optimum. This path keeps one HiGHS LP per auction: it solves it once for
x*, then for each winner i fixes i's columns to 0 and re-solves from the previous basis
(a couple of dual simplex iterations instead of a fresh integer program: only i's GPUs
changed). Every LP answer is accepted only with a proof, computed here and not trusted
from HiGHS:

- the LP solution is integral and feasible (one entry per bidder, disjoint GPUs; checked
  on the bitmasks), and its objective is summed from the candidates' own gains;
- weak duality: for the LP's GPU prices y >= 0 (any y is valid, so HiGHS's tolerances
  cannot make the bound wrong, only loose), ``y(GPUs) + sum_j max(0, max_e gain_e -
  y(e))`` bounds every packing; the answer is taken only if that bound is within
  ``TOLERANCE`` of it, the same guarantee as the branch and bound's.

An answer without a proof falls back to HiGHS's integer program (``solver._milp``), so the
path is exact on every instance and fast where the relaxation is tight. It needs HiGHS's
incremental interface, which scipy ships privately (``scipy.optimize._highspy``); without
it (older scipy) ``WarmLp.available()`` is False and the solver keeps its other paths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.sparse import coo_matrix

try:  # scipy >= 1.15 ships HiGHS's incremental interface privately
    from scipy.optimize._highspy import _core as _highs
except ImportError:  # pragma: no cover - depends on the installed scipy
    _highs = None

#: Costs are scaled as for the integer program (see ``solver._HIGHS_COST_SCALE``): HiGHS's
#: absolute tolerances then sit far below the solver's TOLERANCE.
COST_SCALE = 1e4

#: An LP value this close to 0 or 1 counts as integral (the proof re-checks everything
#: else on the bitmasks, so this only decides which columns are read as chosen).
INTEGRAL = 1e-6

#: Allowance for rounding in the computed dual bound (sums of a few thousand numbers of
#: size <= ~1e4, each summed exactly by fsum, and sparse products of <= ~1e3 prices).
ROUNDING = 1e-10

#: Solves a restricted model may take, adding the entries its proof misses each time.
ROUNDS = 4


class WarmLp:
    """The LP relaxation of one auction (bidders' entries as columns, one row per bidder
    and one per GPU), kept in HiGHS between solves so that a re-solve starts from the
    last basis.

    The model may hold only some of the columns (``restricted``): its answers are still
    certified against *every* column's reduced profit, so a missing column can make a proof
    fail (the caller then asks the full model) but never makes a wrong answer pass.
    """

    def __init__(self, groups: Sequence[Sequence[Any]], tolerance: float) -> None:
        """``groups``: per bidder its candidates (``solver.Candidate``: gain and mask);
        ``tolerance``: how far below the optimum an accepted answer may be."""
        self.groups = groups
        self.tolerance = tolerance
        self.flat = [c for g in groups for c in g]
        self.starts = np.cumsum([0] + [len(g) for g in groups])
        n_bidders = len(groups)
        width = max(c.mask.bit_length() for c in self.flat)
        rows: list[int] = []
        cols: list[int] = []
        for col, cand in enumerate(self.flat):
            rows.append(-1)  # the bidder's row, filled in below
            cols.append(col)
            mask = cand.mask
            while mask:
                low = mask & -mask
                rows.append(n_bidders + low.bit_length() - 1)
                cols.append(col)
                mask ^= low
        row_array = np.array(rows)
        row_array[row_array < 0] = np.repeat(np.arange(n_bidders), np.diff(self.starts))
        self.height = n_bidders + width
        self.matrix = coo_matrix(
            (np.ones(len(rows)), (row_array, np.array(cols))),
            shape=(self.height, len(self.flat)),
        ).tocsc()
        self.n_bidders = n_bidders
        self.gains = np.array([c.gain for c in self.flat])
        self.gpu_cost = self.matrix[n_bidders:].T.tocsr()  # entry x GPU: y(e) = gpu_cost @ y
        self.prices = np.zeros(width)  # the GPU prices of the last solve
        # (dual bound, per bidder its best reduced profit) of the last solve's proof
        self.proof: tuple[float, np.ndarray] | None = None
        self._load(np.arange(len(self.flat)))

    def restricted(self, columns: np.ndarray) -> WarmLp:
        """A model of the same auction holding only ``columns`` (sorted indices into the
        entries), certified against all of them."""
        other = object.__new__(WarmLp)
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k != "highs"})
        other._load(columns)
        return other

    def reduced_profits(self) -> np.ndarray:
        """Each entry's gain minus the price of its GPUs at the last solve's prices."""
        return self.gains - self.gpu_cost @ self.prices

    def _load(self, columns: np.ndarray) -> None:
        self.columns: list[int] = []  # model column -> entry
        self.in_model = np.zeros(len(self.flat), dtype=bool)
        self.model_cols: list[list[int]] = [[] for _ in range(self.n_bidders)]
        self.bidder_of = np.repeat(np.arange(self.n_bidders), np.diff(self.starts))
        lp = _highs.HighsLp()
        lp.num_row_ = self.height
        lp.row_lower_ = np.full(self.height, -_highs.kHighsInf)
        lp.row_upper_ = np.ones(self.height)
        self.highs = _highs._Highs()
        self.highs.setOptionValue("output_flag", False)
        self.highs.passModel(lp)
        self._add(columns)

    def _add(self, columns: np.ndarray) -> None:
        """Add these entries (not yet in the model) as columns."""
        matrix = self.matrix[:, columns]
        n = len(columns)
        self.highs.addCols(
            n,
            -self.gains[columns] * COST_SCALE,
            np.zeros(n),
            np.ones(n),
            matrix.nnz,
            matrix.indptr[:-1].astype(np.int32),
            matrix.indices.astype(np.int32),
            matrix.data,
        )
        for entry in columns.tolist():
            self.model_cols[self.bidder_of[entry]].append(len(self.columns))
            self.columns.append(entry)
        self.in_model[columns] = True

    def proves_no_gain_without(self, position: int, incumbent: float) -> bool:
        """Whether the last proof (of the whole auction) already shows that without the
        bidder at ``position`` nothing beats ``incumbent`` by more than the tolerance: the
        same prices bound that problem by the bound minus the bidder's own term. True when
        the bidder's GPUs are priced at 0 (nobody else wants them): then c_i = 1 with no
        re-solve."""
        if self.proof is None:
            return False
        bound, best = self.proof
        return bound - float(best[position]) + ROUNDING <= incumbent + self.tolerance

    @staticmethod
    def available() -> bool:
        return _highs is not None

    def solve(self, without: int | None = None) -> list[Any] | None:
        """The optimal choice (candidates, one per winning bidder) of the auction, or of it
        without the bidder at position ``without`` of ``groups``; None if the LP answer
        comes without a proof of optimality (see the module docstring).

        A restricted model adds the entries that break its proof (those pricing above
        what their bidder gets in the model) and solves again, at most ``ROUNDS`` times.
        """
        highs = self.highs
        cols = np.array(self.model_cols[without] if without is not None else [], dtype=np.int32)
        if len(cols):
            highs.changeColsBounds(len(cols), cols, np.zeros(len(cols)), np.zeros(len(cols)))
        try:
            for _ in range(ROUNDS):
                highs.run()
                if highs.getModelStatus() != _highs.HighsModelStatus.kOptimal:
                    return None  # pragma: no cover - a bounded feasible LP always solves
                solution = highs.getSolution()
                chosen, missing = self._certified(
                    np.asarray(solution.col_value), np.asarray(solution.row_dual), without
                )
                if chosen is not None or missing is None or not len(missing):
                    return chosen
                self._add(missing)
            return None
        finally:
            if len(cols):
                highs.changeColsBounds(len(cols), cols, np.zeros(len(cols)), np.ones(len(cols)))

    def _certified(
        self, x: np.ndarray, row_dual: np.ndarray, without: int | None
    ) -> tuple[list | None, np.ndarray | None]:
        """(the choice, None) with a proof; else (None, entries outside the model that
        break the proof, or None when more columns cannot help)."""
        if np.any((x > INTEGRAL) & (x < 1.0 - INTEGRAL)):
            return None, None
        picked = np.asarray(self.columns)[np.flatnonzero(x > 0.5)]
        # One entry per bidder, no GPU twice: no row is hit twice by the chosen columns.
        indptr, indices = self.matrix.indptr, self.matrix.indices
        first, counts = indptr[picked], indptr[picked + 1] - indptr[picked]
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        if np.bincount(indices[np.repeat(first, counts) + offsets]).max(initial=0) > 1:
            return None, None  # pragma: no cover - an LP vertex within its tolerances
        if without is not None and np.any(self.bidder_of[picked] == without):
            return None, None  # pragma: no cover - its columns were fixed to 0
        gains = self.gains[picked].tolist()
        objective = math.fsum(gains)
        self.prices = np.maximum(0.0, -row_dual[self.n_bidders :] / COST_SCALE)
        # Weak duality over every entry of the auction, not only the model's columns.
        reduced = self.reduced_profits()
        best = np.maximum(np.maximum.reduceat(reduced, self.starts[:-1]), 0.0)
        if without is not None:
            best[without] = 0.0
        bound = math.fsum(self.prices.tolist()) + math.fsum(best.tolist())
        self.proof = (bound, best)
        if bound + ROUNDING <= objective + self.tolerance:
            return [self.flat[k] for k in picked.tolist()], None
        # What each bidder reaches inside the model; entries outside it above that.
        inside = np.where(self.in_model, reduced, 0.0)
        reach = np.maximum(np.maximum.reduceat(inside, self.starts[:-1]), 0.0)
        missing = ~self.in_model & (reduced > reach[self.bidder_of] + self.tolerance)
        if without is not None:
            missing[self.starts[without] : self.starts[without + 1]] = False
        return None, np.flatnonzero(missing)
