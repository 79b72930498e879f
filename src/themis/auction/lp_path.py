"""Large auctions through one warm-started LP, every answer certified exact.

On the menus agents send (nested chains of gangs from rotated starting points) the LP
relaxation of the proportional-fair program is integral nearly always, so the LP optimum
*is* the integer optimum. This path keeps one HiGHS LP per auction: it solves it once for
x*, then for each winner i fixes i's columns to 0 and re-solves from the previous basis
(a couple of dual simplex iterations instead of a fresh integer program: only i's GPUs
changed). Every LP answer is accepted only with a proof, computed here and not trusted
from HiGHS:

- the LP solution is integral and feasible (one entry per bidder, disjoint GPUs), and its
  objective is summed from the candidates' own gains;
- weak duality: for the LP's GPU prices y >= 0 (any y is valid, so HiGHS's tolerances
  cannot make the bound wrong, only loose), ``y(GPUs) + sum_j max(0, max_e gain_e -
  y(e))`` bounds every packing; the answer is taken only if that bound is within
  ``TOLERANCE`` of it, the same guarantee as the branch and bound's.

**Local re-solves** (``LocalResolver``). Removing winner i changes the auction only near
i's GPUs, yet a re-solve of the whole LP pays HiGHS's fixed cost of a run on the whole
model (a few ms at 1,000 bidders, for 2-3 simplex iterations). A local re-solve keeps
every bidder's choice in x* except those of a set S (first: the bidders with an entry on
i's GPUs) and solves a small LP over S's entries that avoid the GPUs the others hold. Its
answer, with the others' choices, is a feasible packing; it is accepted with the same
proof over *every* entry of the auction, the prices being the small LP's duals on its
GPUs, 0 on i's GPUs it does not use, and x*'s prices elsewhere. When the proof fails, the
bidders that break it (an entry worth more at those prices than what the bidder gets) join
S, and the holders of the GPUs such an entry would need; then it solves again. A local
answer is therefore exact for the same reason as a global one; a local re-solve that does
not find a proof in a few rounds hands over to the global model.

An answer without a proof falls back to HiGHS's integer program (``solver._milp``), so the
path is exact on every instance and fast where the relaxation is tight. It needs HiGHS's
incremental interface, from its official bindings (``highspy``, a dependency); without
them ``WarmLp.available()`` is False and the solver keeps its other paths. ``highspy``
imports in ~10 ms once numpy is loaded (``scipy.optimize``, which ships a private copy of
the same bindings, costs ~0.5 s: most of scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from themis.auction.budget import highs_units, ipm_units
from themis.auction.packing import Solution

#: Costs are scaled as for the integer program (see ``mip.COST_SCALE``): HiGHS's
#: absolute tolerances then sit far below the solver's TOLERANCE.
COST_SCALE = 1e4

#: An LP value this close to 0 or 1 counts as integral (the proof re-checks everything
#: else, so this only decides which columns are read as chosen).
INTEGRAL = 1e-6

#: Allowance for rounding in the computed dual bound (sums of a few thousand numbers of
#: size <= ~1e4, each summed exactly by fsum, and sparse products of <= ~1e3 prices).
ROUNDING = 1e-10

#: Solves a restricted model may take, adding the entries its proof misses each time.
ROUNDS = 4

#: Iterations the interior point method may take (``WarmLp.interior``): it converges in
#: 15-20 on the held-out family at 200 to 1,000 bidders.
IPM_ITERATIONS = 40

#: Solves a local re-solve may take, growing its set of bidders each time, before it
#: hands over to the global model.
LOCAL_ROUNDS = 6


def _load_highs() -> Any:
    """The ``highspy`` package (HiGHS's official Python bindings), or None without it.

    Models are built on ``highspy._Highs``, the bindings' C++ class itself (exported by the
    package; ``highspy.Highs`` is a Python subclass of it): the subclass's constructor
    prints HiGHS's banner on stdout before output can be switched off, which would corrupt
    ``themis auction``'s JSON, and it adds callback and threading plumbing this path does
    not use."""
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy is a dependency
        return None
    return highspy


_highs = _load_highs()


def _segments(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in the data of a compressed (``ptr``) array of the given rows, one row
    after another, and each row's length."""
    first = ptr[rows]
    counts = ptr[rows + 1] - first
    total = int(counts.sum())
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(first, counts) + offsets, counts


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
        # entry -> its GPUs (ascending), compressed
        gpus: list[int] = []
        ptr = [0]
        for cand in self.flat:
            mask = cand.mask
            while mask:
                low = mask & -mask
                gpus.append(low.bit_length() - 1)
                mask ^= low
            ptr.append(len(gpus))
        self.ent_ptr = np.array(ptr, dtype=np.int64)
        self.ent_gpu = np.array(gpus, dtype=np.int64)
        width = int(self.ent_gpu.max()) + 1
        # GPU -> the entries on it, compressed
        self.gpu_ent = np.repeat(np.arange(len(self.flat)), np.diff(self.ent_ptr))[
            np.argsort(self.ent_gpu, kind="stable")
        ]
        self.gpu_ptr = np.concatenate(([0], np.cumsum(np.bincount(self.ent_gpu, minlength=width))))
        self.width = width
        self.height = n_bidders + width
        self.n_bidders = n_bidders
        self.bidder_of = np.repeat(np.arange(n_bidders), np.diff(self.starts))
        self.gains = np.array([c.gain for c in self.flat])
        self.prices = np.zeros(width)  # the GPU prices of the last solve
        # (dual bound, per bidder its best reduced profit) of the last solve's proof
        self.proof: tuple[float, np.ndarray] | None = None
        self.picked = np.zeros(0, dtype=np.int64)  # the entries of the last proven answer
        self.solved = False  # whether an unproven solve left prices and values
        self.values = np.zeros(len(self.flat))  # the LP values of that solve
        #: Work units one simplex iteration on the whole model costs (``budget``).
        self.weight = highs_units(len(self.ent_gpu) + len(self.flat))
        #: ... and one interior-point iteration.
        self.ipm_weight = ipm_units(len(self.ent_gpu) + len(self.flat))
        self._load(np.arange(len(self.flat)))

    def restricted(self, columns: np.ndarray) -> WarmLp:
        """A model of the same auction holding only ``columns`` (sorted indices into the
        entries), certified against all of them."""
        other = object.__new__(WarmLp)
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k != "highs"})
        other._load(columns)
        return other

    def entry_prices(self, prices: np.ndarray) -> np.ndarray:
        """Each entry's price (the sum of its GPUs' prices)."""
        return np.add.reduceat(prices[self.ent_gpu], self.ent_ptr[:-1])

    def entry_prices_of(self, entries: np.ndarray, prices: np.ndarray) -> np.ndarray:
        """The prices of these entries (the sum of their GPUs' prices)."""
        if not len(entries):
            return np.zeros(0)
        seg, counts = _segments(self.ent_ptr, entries)
        return np.add.reduceat(prices[self.ent_gpu[seg]], np.cumsum(counts) - counts)

    def reduced_profits(self) -> np.ndarray:
        """Each entry's gain minus the price of its GPUs at the last solve's prices."""
        return self.gains - self.entry_prices(self.prices)

    def columns_of(self, entries: np.ndarray, row_of: np.ndarray, gpu_row: np.ndarray) -> tuple:
        """HiGHS's column-wise data of these entries: each column is its bidder's row
        (``row_of``, per entry) and its GPUs' rows (``gpu_row``, per GPU)."""
        seg, counts = _segments(self.ent_ptr, entries)
        n = len(entries)
        starts = np.cumsum(counts + 1) - (counts + 1)
        index = np.empty(int(counts.sum()) + n, dtype=np.int32)
        is_head = np.zeros(len(index), dtype=bool)
        is_head[starts] = True
        index[starts] = row_of
        index[~is_head] = gpu_row[self.ent_gpu[seg]]
        return n, starts.astype(np.int32), index, np.ones(len(index))

    def _load(self, columns: np.ndarray) -> None:
        self.columns: list[int] = []  # model column -> entry
        self.in_model = np.zeros(len(self.flat), dtype=bool)
        self.model_cols: list[list[int]] = [[] for _ in range(self.n_bidders)]
        self.highs = _new_model(self.height)
        self.limited = False  # whether HiGHS's limits were set (apply_limits)
        self._add(columns)

    def _add(self, columns: np.ndarray) -> None:
        """Add these entries (not yet in the model) as columns."""
        n, starts, index, values = self.columns_of(
            columns, self.bidder_of[columns], np.arange(self.width) + self.n_bidders
        )
        self.highs.addCols(
            n,
            -self.gains[columns] * COST_SCALE,
            np.zeros(n),
            np.ones(n),
            len(index),
            starts,
            index,
            values,
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

    def solve(self, without: int | None = None, budget: Any = None) -> list[Any] | None:
        """The optimal choice (candidates, one per winning bidder) of the auction, or of it
        without the bidder at position ``without`` of ``groups``; None if the LP answer
        comes without a proof of optimality (see the module docstring).

        A restricted model adds the entries that break its proof (those pricing above
        what their bidder gets in the model) and solves again, at most ``ROUNDS`` times.
        ``budget`` (``themis.auction.budget.Budget``) limits HiGHS's simplex iterations
        and time; a solve that stops on it answers None and leaves its prices and LP
        values (``solved``, ``prices``, ``rounded``) for a bounded answer.
        """
        highs = self.highs
        cols = np.array(self.model_cols[without] if without is not None else [], dtype=np.int32)
        if len(cols):
            highs.changeColsBounds(len(cols), cols, np.zeros(len(cols)), np.zeros(len(cols)))
        try:
            for _ in range(ROUNDS):
                self.limited = apply_limits(highs, budget, self.limited, self.weight)
                highs.run()
                if budget is not None:
                    iterations = max(0, int(highs.getInfo().simplex_iteration_count))
                    budget.spend(iterations * self.weight)
                solution = highs.getSolution()
                if highs.getModelStatus() != _highs.HighsModelStatus.kOptimal:
                    self._remember(solution)
                    return None
                chosen, missing = self._certified(
                    np.asarray(solution.col_value), np.asarray(solution.row_dual), without
                )
                if chosen is not None or missing is None or not len(missing):
                    if chosen is None:
                        self._remember(solution)
                    return chosen
                if budget is not None and budget.expired():
                    self._remember(solution)
                    return None
                self._add(missing)
            return None
        finally:
            if len(cols):
                highs.changeColsBounds(len(cols), cols, np.zeros(len(cols)), np.ones(len(cols)))

    def interior(self, budget: Any = None) -> bool:
        """Solve the LP relaxation by HiGHS's interior point method, without crossover, for
        its GPU prices and LP values only (``prices``, ``rounded``): no vertex, so no proof
        of an integral optimum. On the fractional LPs of hard menus it finishes in 15-20
        iterations where the simplex needs tens of thousands (held-out family, 400
        bidders: 0.14 s against 3-4 s, the same bound). At most ``IPM_ITERATIONS``
        iterations of ``budget.ipm_units`` each. Returns whether it converged; either way
        it leaves prices (an unfinished run's are valid too, only looser) and values."""
        highs = self.highs
        weight = self.ipm_weight
        iterations = IPM_ITERATIONS
        if budget is not None:
            afford = budget.afford(weight)
            if afford is not None:
                iterations = min(iterations, afford)
            seconds = budget.seconds_left()
            if seconds is not None:
                highs.setOptionValue("time_limit", max(1e-3, seconds))
        highs.setOptionValue("solver", "ipm")
        highs.setOptionValue("run_crossover", "off")
        highs.setOptionValue("ipm_iteration_limit", int(iterations))
        try:
            highs.run()
        finally:
            highs.setOptionValue("solver", "choose")
            highs.setOptionValue("run_crossover", "on")
            highs.setOptionValue("ipm_iteration_limit", _highs.kHighsIInf)
        if budget is not None:
            budget.spend(max(0, int(highs.getInfo().ipm_iteration_count)) * weight)
        self._remember(highs.getSolution())
        return bool(highs.getModelStatus() == _highs.HighsModelStatus.kOptimal)

    def _remember(self, solution: Any) -> None:
        """Keep an unproven solve's GPU prices (any prices >= 0 give a valid bound) and LP
        values (``rounded``)."""
        duals = np.asarray(solution.row_dual)
        x = np.asarray(solution.col_value)
        if len(duals) != self.height or len(x) != len(self.columns):
            return
        self.prices = np.maximum(0.0, -duals[self.n_bidders :] / COST_SCALE)
        self.values = np.zeros(len(self.flat))
        self.values[np.asarray(self.columns, dtype=np.int64)] = x
        self.solved = True

    def rounded(self) -> Any:
        """A feasible packing guided by the last unproven solve: entries by LP value, then
        gain per GPU, largest first, each taken if its bidder and GPUs are still free."""

        sizes = np.diff(self.ent_ptr)
        order = np.lexsort((-self.gains / sizes, -self.values))
        chosen: dict[int, Any] = {}
        used = 0
        for k in order.tolist():
            c = self.flat[k]
            if c.bidder not in chosen and not c.mask & used:
                chosen[c.bidder] = c
                used |= c.mask
        return Solution(sum(c.gain for c in chosen.values()), chosen)

    def feasible(self, picked: np.ndarray) -> bool:
        """At most one of these entries per bidder, and no GPU in two of them."""
        if not len(picked):
            return True
        if np.bincount(self.bidder_of[picked]).max() > 1:
            return False
        seg, _ = _segments(self.ent_ptr, picked)
        return bool(np.bincount(self.ent_gpu[seg]).max() <= 1)

    def bound(
        self, prices: np.ndarray, without: int | None
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """The weak-duality bound at these prices over every entry (without the bidder at
        position ``without``): (bound, per bidder its best reduced profit (>= 0), every
        entry's reduced profit)."""
        reduced = self.gains - self.entry_prices(prices)
        best = np.maximum(np.maximum.reduceat(reduced, self.starts[:-1]), 0.0)
        if without is not None:
            best[without] = 0.0
        return math.fsum(prices.tolist()) + math.fsum(best.tolist()), best, reduced

    def _certified(
        self, x: np.ndarray, row_dual: np.ndarray, without: int | None
    ) -> tuple[list | None, np.ndarray | None]:
        """(the choice, None) with a proof; else (None, entries outside the model that
        break the proof, or None when more columns cannot help)."""
        if np.any((x > INTEGRAL) & (x < 1.0 - INTEGRAL)):
            return None, None
        picked = np.asarray(self.columns)[np.flatnonzero(x > 0.5)]
        if not self.feasible(picked):
            return None, None  # pragma: no cover - an LP vertex within its tolerances
        if without is not None and np.any(self.bidder_of[picked] == without):
            return None, None  # pragma: no cover - its columns were fixed to 0
        gains = self.gains[picked].tolist()
        objective = math.fsum(gains)
        self.prices = np.maximum(0.0, -row_dual[self.n_bidders :] / COST_SCALE)
        # Weak duality over every entry of the auction, not only the model's columns.
        bound, best, reduced = self.bound(self.prices, without)
        self.proof = (bound, best)
        if bound + ROUNDING <= objective + self.tolerance:
            self.picked = picked
            return [self.flat[k] for k in picked.tolist()], None
        # What each bidder reaches inside the model; entries outside it above that.
        inside = np.where(self.in_model, reduced, 0.0)
        reach = np.maximum(np.maximum.reduceat(inside, self.starts[:-1]), 0.0)
        missing = ~self.in_model & (reduced > reach[self.bidder_of] + self.tolerance)
        if without is not None:
            missing[self.starts[without] : self.starts[without + 1]] = False
        return None, np.flatnonzero(missing)


def apply_limits(highs: Any, budget: Any, limited: bool, weight: int = 1) -> bool:
    """Set HiGHS's simplex iteration and time limits from ``budget``'s allowance, each
    iteration costing ``weight`` work units (or clear them, if set before, when there is
    none); returns whether limits are now set."""
    if budget is None or not budget.active:
        if limited:
            highs.setOptionValue("simplex_iteration_limit", _highs.kHighsIInf)
            highs.setOptionValue("time_limit", _highs.kHighsInf)
        return False
    nodes = budget.afford(weight)
    iterations = _highs.kHighsIInf if nodes is None else min(nodes, _highs.kHighsIInf)
    highs.setOptionValue("simplex_iteration_limit", int(iterations))
    seconds = budget.seconds_left()
    highs.setOptionValue("time_limit", _highs.kHighsInf if seconds is None else max(1e-3, seconds))
    return True


def _new_model(height: int) -> Any:
    """An empty HiGHS model with ``height`` rows ``<= 1``, output off."""
    lp = _highs.HighsLp()
    lp.num_row_ = height
    lp.row_lower_ = np.full(height, -_highs.kHighsInf)
    lp.row_upper_ = np.ones(height)
    highs = _highs._Highs()
    highs.setOptionValue("output_flag", False)
    highs.passModel(lp)
    return highs


class LocalResolver:
    """Re-solves without one winner on small LPs around its GPUs (see the module
    docstring), certified over every entry with ``lp``'s proof of the optimum as the
    starting point. Built right after ``lp.solve()`` proved the optimum.

    Without winner i, a set S of bidders (first: those with an entry on i's GPUs) may
    change their choice; every other bidder keeps its choice in x*, its GPUs keep x*'s
    prices y0 and it keeps its term ``u_k`` of x*'s bound. The small LP prices the GPUs
    the others do not hold (H) so that the bound holds for every entry:

    - S's entries as columns (their bidder's row and their GPUs in H), each worth its gain
      minus y0 of its GPUs outside H;
    - every other bidder's entries on H as columns without a bidder row, worth their gain
      minus y0 outside H minus ``u_k`` (only those worth > 0: the others hold at any
      prices >= 0).

    Its duals are then feasible for every entry. If its optimum picks only S's columns
    that lie in H, that optimum with the others' choices is a packing whose value meets
    the bound: exact. If it picks another bidder's column, that bidder joins S; if it
    picks an S column that needs other bidders' GPUs, those bidders join S; then it
    solves again. Each answer is still checked by the full proof (``WarmLp.bound``).
    """

    def __init__(self, lp: WarmLp) -> None:
        self.lp = lp
        if lp.proof is None:  # pragma: no cover - built after a proven solve
            raise ValueError("LocalResolver needs a proven optimum")
        self.prices = lp.prices.copy()  # x*'s prices y0
        self.terms = lp.proof[1].copy()  # x*'s per-bidder terms u
        self.reduced = lp.reduced_profits()  # at y0
        n = lp.n_bidders
        picked = lp.picked
        self.win = np.full(n, -1, dtype=np.int64)  # per bidder its entry in x* (or -1)
        self.win[lp.bidder_of[picked]] = picked
        self.holder = np.full(lp.width, -1, dtype=np.int64)  # per GPU its bidder in x*
        seg, counts = _segments(lp.ent_ptr, picked)
        self.holder[lp.ent_gpu[seg]] = np.repeat(lp.bidder_of[picked], counts)
        self.held = self.holder >= 0
        self.held_gpus = np.flatnonzero(self.held)
        self.held_by = self.holder[self.held_gpus]
        self.priced = self.prices > 0.0
        # each entry's reduced profit at y0 minus its bidder's term: what it is worth as
        # another bidder's column before the prices of its open GPUs are added
        self.slack = self.reduced - self.terms[lp.bidder_of]
        # The proof's two sums at x*: a local answer's bound is these plus its changes.
        self.price_sum = math.fsum(self.prices.tolist())
        self.value = math.fsum(lp.gains[picked].tolist())
        self.term_sum = math.fsum(self.terms.tolist())
        self.small = _highs._Highs()  # one HiGHS object, cleared for each small LP
        self.small.setOptionValue("output_flag", False)
        self.small.setOptionValue("presolve", "off")  # small and sparse: presolve costs more
        # primal simplex: its optimum needs fewer rounds of growing S here than the dual's
        self.small.setOptionValue("simplex_strategy", 4)
        self.solves = 0  # small LPs solved (for tests and benchmarks)
        self.limited = False  # whether HiGHS's limits are set (apply_limits)

    def solve_without(
        self, position: int, budget: Any = None
    ) -> tuple[float, list[tuple[int, int]]] | None:
        """A certified optimum of the auction without the bidder at ``position``: its
        value and how it differs from x* (bidder position, its new entry or -1); None
        without a proof in ``LOCAL_ROUNDS`` solves."""
        lp = self.lp
        n = lp.n_bidders
        y0 = self.prices
        entry = self.win[position]
        freed = lp.ent_gpu[lp.ent_ptr[entry] : lp.ent_ptr[entry + 1]]
        local = np.zeros(n, dtype=bool)
        seg, _ = _segments(lp.gpu_ptr, freed)
        local[lp.bidder_of[lp.gpu_ent[seg]]] = True
        local[position] = False
        holder = self.holder
        for _ in range(LOCAL_ROUNDS):
            # GPUs held in x* by bidders that keep their choice; the rest is open (H)
            blocked = np.zeros(lp.width, dtype=bool)
            blocked[self.held_gpus] = ~local[self.held_by]
            blocked[freed] = False
            blocked_price = np.where(blocked, y0, 0.0)
            # S's columns, worth their gain minus y0 of the GPUs they would take from others
            members = np.flatnonzero(local)
            inner, _ = _segments(lp.starts, members)
            inner_worth = lp.gains[inner] - lp.entry_prices_of(inner, blocked_price)
            keep = inner_worth > 0.0
            inner, inner_worth = inner[keep], inner_worth[keep]
            # Others' columns on open GPUs priced at x*: worth gain - y0 outside H - u,
            # i.e. their reduced profit at y0 plus y0 of their open GPUs, minus u.
            hot = np.flatnonzero(self.priced & ~blocked)
            seg, counts = _segments(lp.gpu_ptr, hot)
            open_price = np.bincount(
                lp.gpu_ent[seg], weights=np.repeat(y0[hot], counts), minlength=len(lp.flat)
            )
            outer_worth = self.slack + open_price
            outer = np.flatnonzero((open_price > 0.0) & (outer_worth > 0.0))
            owner = lp.bidder_of[outer]
            outer = outer[~local[owner] & (owner != position)]
            picked, gpus, duals = self._solve_small(
                members, inner, inner_worth, outer, outer_worth[outer], ~blocked, budget
            )
            if picked is None:
                return None
            grow = np.zeros(n, dtype=bool)
            grow[lp.bidder_of[outer[picked[picked >= len(inner)] - len(inner)]]] = True
            chosen = inner[picked[picked < len(inner)]]
            seg, _ = _segments(lp.ent_ptr, chosen)
            taken = lp.ent_gpu[seg]
            grow[holder[taken[blocked[taken]]]] = True
            if grow.any():
                local |= grow
                local[position] = False
                continue
            choice = self.win.copy()
            choice[local] = -1
            choice[position] = -1
            choice[lp.bidder_of[chosen]] = chosen
            prices = blocked_price
            prices[gpus] = duals
            value = self._proves(choice, chosen, prices, position)
            if value is None:
                return None
            differ = np.flatnonzero(choice != self.win)
            return value, list(zip(differ.tolist(), choice[differ].tolist(), strict=True))
        return None

    def _proves(
        self, choice: np.ndarray, chosen: np.ndarray, prices: np.ndarray, position: int
    ) -> float | None:
        """The value of ``choice`` (per bidder its entry or -1; ``chosen`` the entries
        that differ from x*, which avoid the GPUs of the unchanged ones) if it is feasible
        and within the tolerance of the weak-duality bound at ``prices`` over every entry,
        the bidder at ``position`` left out; else None.

        Only what differs from x*'s proof is recomputed: the entries on GPUs whose price
        changed are re-priced (the others keep their reduced profit at x*'s prices, the
        same numbers), and the two sums are x*'s (each exactly rounded by fsum) plus the
        changed terms, summed by fsum again: a few roundings of ~1e-16 relative, far
        below ROUNDING."""
        lp = self.lp
        # x*'s unchanged choices are disjoint (x* is proven feasible), and the new ones
        # avoid their GPUs (checked by the caller): only the new ones are checked here.
        if not lp.feasible(chosen):
            return None  # pragma: no cover - an LP vertex within its tolerances
        changed = np.flatnonzero(prices != self.prices)
        seg, _ = _segments(lp.gpu_ptr, changed)
        mark = np.zeros(len(lp.flat), dtype=bool)
        mark[lp.gpu_ent[seg]] = True
        touched = np.flatnonzero(mark)
        reduced = self.reduced.copy()
        reduced[touched] = lp.gains[touched] - lp.entry_prices_of(touched, prices)
        best = np.maximum(np.maximum.reduceat(reduced, lp.starts[:-1]), 0.0)
        best[position] = 0.0
        moved = np.flatnonzero(best != self.terms)
        bound = math.fsum(
            [self.price_sum, self.term_sum]
            + prices[changed].tolist()
            + (-self.prices[changed]).tolist()
            + best[moved].tolist()
            + (-self.terms[moved]).tolist()
        )
        # value: x*'s minus the choices that changed plus what replaced them
        differ = choice != self.win
        new, old = choice[differ], self.win[differ]
        value = math.fsum(
            [self.value] + lp.gains[new[new >= 0]].tolist() + (-lp.gains[old[old >= 0]]).tolist()
        )
        return value if bound + ROUNDING <= value + lp.tolerance else None

    def _solve_small(
        self,
        members: np.ndarray,
        inner: np.ndarray,
        inner_worth: np.ndarray,
        outer: np.ndarray,
        outer_worth: np.ndarray,
        open_gpus: np.ndarray,
        budget: Any = None,
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """The small LP: ``inner`` columns (with their bidder's row among ``members``) and
        ``outer`` ones (no bidder row), each on its GPUs in ``open_gpus``. Returns the
        chosen columns (indices: inner first, then outer; None if fractional), the GPUs
        of its rows and their prices."""
        lp = self.lp
        entries = np.concatenate((inner, outer))
        seg, counts = _segments(lp.ent_ptr, entries)
        all_gpus = lp.ent_gpu[seg]
        on = open_gpus[all_gpus]
        mark = np.zeros(lp.width, dtype=bool)
        mark[all_gpus[on]] = True
        gpus = np.flatnonzero(mark)
        gpu_rows = np.zeros(lp.width, dtype=np.int64)
        gpu_rows[gpus] = np.arange(len(gpus)) + len(members)
        # column-wise: an inner column's bidder row, then its open GPUs' rows
        n_inner = len(inner)
        heads = np.zeros(len(entries), dtype=np.int64)
        heads[:n_inner] = 1
        sizes = np.add.reduceat(on, np.cumsum(counts) - counts) if len(entries) else heads
        sizes = sizes + heads
        starts = np.cumsum(sizes) - sizes
        index = np.empty(int(sizes.sum()), dtype=np.int32)
        is_head = np.zeros(len(index), dtype=bool)
        is_head[starts[:n_inner]] = True
        index[starts[:n_inner]] = np.searchsorted(members, lp.bidder_of[inner])
        index[~is_head] = gpu_rows[all_gpus[on]]
        highs = self.small
        highs.clearModel()
        height = len(members) + len(gpus)
        highs.addRows(
            height,
            np.full(height, -_highs.kHighsInf),
            np.ones(height),
            0,
            np.zeros(height, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
        )
        n = len(entries)
        worth = np.concatenate((inner_worth, outer_worth))
        highs.addCols(
            n,
            -worth * COST_SCALE,
            np.zeros(n),
            np.ones(n),
            len(index),
            starts.astype(np.int32),
            index,
            np.ones(len(index)),
        )
        # Start from x*: S's choices basic at 1 in place of their bidder rows' slacks
        # (nonbasic at the bound 1), every other slack basic. A feasible basis (each
        # chosen column covers its own bidder row: triangular), priced at each chosen
        # entry's worth, so the primal simplex starts near the answer.
        status = _highs.HighsBasisStatus
        start = self.win[members]
        at_one = np.zeros(n, dtype=bool)
        at_one[np.searchsorted(inner, start[start >= 0])] = True
        basis = _highs.HighsBasis()
        basis.col_status = [status.kBasic if one else status.kLower for one in at_one.tolist()]
        tight = np.zeros(height, dtype=bool)
        tight[: len(members)] = start >= 0
        basis.row_status = [status.kUpper if t else status.kBasic for t in tight.tolist()]
        basis.valid = True
        highs.setBasis(basis)
        weight = highs_units(len(index) + height)
        self.limited = apply_limits(highs, budget, self.limited, weight)
        highs.run()
        if budget is not None:
            budget.spend(max(0, int(highs.getInfo().simplex_iteration_count)) * weight)
        self.solves += 1
        if highs.getModelStatus() != _highs.HighsModelStatus.kOptimal:
            return None, gpus, gpus  # pragma: no cover - a bounded feasible LP always solves
        solution = highs.getSolution()
        x = np.asarray(solution.col_value)
        if np.any((x > INTEGRAL) & (x < 1.0 - INTEGRAL)):
            return None, gpus, gpus
        duals = np.maximum(0.0, -np.asarray(solution.row_dual)[len(members) :] / COST_SCALE)
        return np.flatnonzero(x > 0.5), gpus, duals
