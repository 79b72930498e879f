"""Themis: finish-time fair leases sold by a Partial Allocation auction each round."""

from __future__ import annotations

import random

from themis.arbiter.options import ArbiterOptions
from themis.arbiter.round import Arbiter
from themis.auction.budget import Limits
from themis.policies.base import Changes, Policy, PolicyOptions, Schedule, SchedulingView
from themis.policies.registry import register


@register
class ThemisPolicy(Policy):
    name = "themis"
    description = "finish-time fair auction of GPU leases (Themis, NSDI 2020)"

    def __init__(self, options: PolicyOptions) -> None:
        super().__init__(options)
        self._arbiter: Arbiter | None = None
        self._order: object = None  # the books of the run the arbiter serves
        self._restart_cost = 0.0

    def set_restart_cost(self, restart_cost: float) -> None:
        if restart_cost != self._restart_cost:
            self._arbiter = None  # its renewal rule may follow the cost
        self._restart_cost = restart_cost

    @property
    def renews_within_share(self) -> bool:
        """``renew_within_share`` as set, or by default whether restarts cost time."""
        chosen = self.options.renew_within_share
        return self._restart_cost > 0 if chosen is None else chosen

    #: A round changes only the grants that end and the GPUs that are free.
    incremental = True

    def schedule(self, view: SchedulingView) -> Schedule:
        return self._arbiter_for(view).run_round(view)

    def changes(self, view: SchedulingView) -> Changes:
        return self._arbiter_for(view).run_changes(view)

    def arbiter_options(self) -> ArbiterOptions:
        """The knobs the arbiter's round reads, made from this policy's options once per
        arbiter (the renewal rule follows the restart cost it was told)."""
        options = self.options
        return ArbiterOptions(
            fairness_knob=options.fairness_knob,
            lease=options.lease,
            max_menu=options.max_menu,
            reservation_bound=options.reservation_bound,
            lease_align=options.lease_align,
            ranking=options.ranking,
            renewal_share=options.renewal_share,
            valuation=options.valuation,
            renew_within_share=self.renews_within_share,
            gang_at_once=options.gang_at_once,
            ideal=options.ideal_time,
        )

    def _arbiter_for(self, view: SchedulingView) -> Arbiter:
        # Another run (the simulator's books of ranks are new, or another cluster): a
        # fresh arbiter, so its seeded draws and books never carry over between runs.
        another_run = view.order is not None and view.order is not self._order
        self._order = view.order
        if self._arbiter is None or self._arbiter.cluster is not view.cluster or another_run:
            if self.options.auction_deadline is not None:
                # The solvers' imports must not eat into the first auction's deadline.
                from themis.auction.preload import load_solvers

                load_solvers()
            self._arbiter = Arbiter(
                view.cluster,
                self.arbiter_options(),
                random.Random(self.options.seed),
                Limits(self.options.auction_node_limit, self.options.auction_deadline),
            )
        return self._arbiter

    def report(self) -> dict[str, float]:
        if self._arbiter is None:
            return {}
        book = self._arbiter.reservations
        return {
            "reservations": float(book.made),
            "reservations_fulfilled": float(book.fulfilled),
            "reservations_expired": float(book.expired),
            "gangs_started_at_once": float(book.at_once),
            "reserved_idle_gpu_hours": book.idle_gpu_seconds / 3600.0,
            "auctions": float(self._arbiter.auctions),
            "auctions_limited": float(self._arbiter.auctions_limited),
            "auction_gap_max": self._arbiter.auction_gap_max,
            "auction_resolve_gap_max": self._arbiter.auction_resolve_gap_max,
        }

    @property
    def arbiter(self) -> Arbiter | None:
        return self._arbiter

    def held_idle(self) -> list[tuple[float, float, tuple[int, ...]]]:
        return [] if self._arbiter is None else list(self._arbiter.reservations.withheld)
