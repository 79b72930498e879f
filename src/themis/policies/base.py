"""The one question every policy answers: given the cluster, the apps and the time,
which jobs hold which GPUs until when?

A policy reads a :class:`SchedulingView` (a snapshot it must not change) and returns a
:class:`Schedule`: every job that should run after this round, with its GPUs and the time
its grant ends (``None``: until the job finishes or the next round preempts it). Jobs not
listed stop. The mechanism (the simulator, or the Ray runtime) applies the schedule, checks
it (no GPU twice, exact gangs), and calls the policy again at the next arrival, job end or
grant end.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

from themis.arbiter.options import RANKINGS, VALUATIONS
from themis.auction.budget import DEFAULT_NODE_LIMIT
from themis.fairness.ideal import PAPER
from themis.mechanism.books import ViewBooks
from themis.mechanism.diff import as_schedule
from themis.mechanism.view import Assignment, Changes, Schedule, SchedulingView
from themis.policies.knobs import BadOption, Knob, all_knobs, check_values, declared

__all__ = [
    "RANKINGS",
    "VALUATIONS",
    "Assignment",
    "Changes",
    "Policy",
    "PolicyOptions",
    "Schedule",
    "SchedulingView",
]


@dataclass(frozen=True)
class PolicyOptions:
    """Knobs shared by policies; each uses the ones it needs.

    Defaults: see ``docs/`` and the README. ``lease`` is the grant length in seconds for
    policies that lease (Themis) and the re-allocation quantum for the others. Each knob's
    flag, meaning and rule are declared once, in ``knobs.py``; an options object that
    breaks a rule is refused when it is made (``BadOption``, naming the flag), whoever
    makes it.
    """

    #: The paper evaluates minutes to tens of minutes; 10 minutes keeps preemptions rare
    #: next to hour-long jobs while letting rho be revisited often.
    lease: float = 600.0
    #: The worst ceil((1 - f) * n) apps bid in each auction. 0.8 lets the worst fifth bid:
    #: between efficiency (f = 0, everyone bids) and fairness (f near 1, only the
    #: worst-off app bids).
    fairness_knob: float = 0.8
    seed: int = 0
    max_menu: int = 32
    #: Themis: how long a reservation for a waiting gang may hold GPUs idle (None: one
    #: lease; 0: no reservations). See docs/gangs.md.
    reservation_bound: float | None = None
    #: Themis: align lease ends to multiples of this many seconds (0: not aligned).
    lease_align: float = 0.0
    #: Themis: rank apps by the rho of the work they have done ("verified") or by the
    #: rho their declared remaining work gives ("declared"). See docs/knowledge.md.
    ranking: str = "verified"
    #: Themis: the worst-off share (0..1) of the apps that want GPUs whose ending leases
    #: are renewed in place instead of auctioned (0: every ending lease is auctioned, as
    #: in the paper). The offered apps always keep theirs when it is > 0. docs/design.md.
    renewal_share: float = 0.0
    #: Themis: an app that holds no more than its fair share (1/N of the cluster, per
    #: owner when apps have owners) keeps its ending leases, renewed in place. None: on
    #: when a restart costs time (the run's restart cost, told through
    #: ``Policy.set_restart_cost``, is above 0), where handing GPUs round buys a restart
    #: each way; off where restarts are free. See docs/knowledge.md, "Renewal within the
    #: fair share".
    renew_within_share: bool | None = None
    #: Themis: the worst-off app, holding no GPU, starts its next gang before the auction
    #: when it fits the free GPUs on its best span (a reservation made and fulfilled in one
    #: round; ``Arbiter._starts_at_once``). Off (the default of 0.2.0 and before): such a
    #: gang bids in the auction, as in the paper. See docs/gangs.md, section 2.
    gang_at_once: bool = True
    #: Themis: how a bid values a bundle: "paper" (rho with nothing over rho with the
    #: bundle, elapsed time included) or "remaining" (the app's remaining time with
    #: nothing over its remaining time with the bundle). See docs/knowledge.md.
    valuation: str = "paper"
    #: Themis, ftf-oracle: the definition of the ideal time T_id that rho divides by, in
    #: the policy's decisions and the run's headline rho: "paper" (T_cluster * N_avg) or
    #: "slice" (the app's time on a private G / N_avg GPUs, capped by its demand).
    #: ``fairness/ideal.py``; docs/metrics.md, "Two ideal times".
    ideal_time: str = PAPER
    #: gavel, gavel-mmf: when the allocation is solved again, as Gavel's ``simulator`` does
    #: (with the counters' reset, at most every 1920 s) or its ``cluster`` scheduler (at
    #: every arrival and completion). See docs/policies/gavel.md.
    gavel_resolve: str = "simulator"
    #: Tiresias: service thresholds (GPU-seconds) between its queues (None: the authors'
    #: default, ``tiresias.THRESHOLDS``) and its PROMOTEKNOB (None: the default, off).
    tiresias_thresholds: tuple[float, ...] | None = None
    tiresias_promote_knob: float | None = None
    #: Gandiva: the round-robin time slice in seconds: Gandiva suspends and resumes jobs
    #: about every minute (OSDI 2018, §4.1), and the Gandiva model in the Tiresias
    #: authors' simulator switches on that scale too. Its own knob, not the lease.
    gandiva_slice: float = 60.0
    #: Themis: work units one auction may take, deterministic (None: no limit), and
    #: wall-clock seconds (None: no deadline; the runtime sets one). docs/auction.md.
    auction_node_limit: int | None = DEFAULT_NODE_LIMIT
    auction_deadline: float | None = None
    #: The knobs plug-in policies declare (``Policy.knobs``), by field, as set: one not
    #: named keeps its knob's default. Read them with :meth:`value`.
    plugin_knobs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        own = {name: getattr(self, name) for name in _FIELDS}
        for name, _ in self.plugin_knobs:
            if name in own:
                raise BadOption(f"'{name}' is not a plug-in's knob", field=name)
        check_values(**own, **dict(self.plugin_knobs))

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> PolicyOptions:
        """The options of knob values by field, built-in and plug-in alike (as a command's
        flags, a config file or the runtime give them); checked like any other."""
        own = {k: v for k, v in values.items() if k in _FIELDS}
        more = tuple(sorted((k, v) for k, v in values.items() if k not in _FIELDS))
        return cls(**own, plugin_knobs=more)

    def value(self, field: str) -> Any:
        """A knob's value by field, a plug-in's as the built-ins'. A field no knob has is
        a ``KeyError`` (a plug-in knob is known once its policy registered)."""
        if field in _FIELDS:
            return getattr(self, field)
        for name, value in self.plugin_knobs:
            if name == field:
                return value
        knob = declared(field)
        if knob is None:
            raise KeyError(field)
        return knob.default

    def record(self) -> dict[str, Any]:
        """Every knob as a run records it in ``summary.json``'s ``config``: under its
        recorded key, when its rule says to (``Knob``), a tuple as a list."""
        out: dict[str, Any] = {}
        for knob in all_knobs():
            value = self.value(knob.field)
            if knob.when == "set" and value is None:
                continue
            if knob.when == "changed" and value == default_of(knob):
                continue
            if value is None and knob.none_is:
                value = self.value(knob.none_is)
            out[knob.recorded] = list(value) if isinstance(value, tuple) else value
        return out


#: ``PolicyOptions``'s own fields (a plug-in's knobs are not among them).
_FIELDS = frozenset(f.name for f in fields(PolicyOptions)) - {"plugin_knobs"}


def default_of(knob: Knob) -> Any:
    """A knob's default: its ``PolicyOptions`` field's, or the plug-in's declared one."""
    for f in fields(PolicyOptions):
        if f.name == knob.field and f.default is not MISSING:
            return f.default
    return knob.default


class Policy(ABC):
    """A scheduling policy: a subclass sets ``name`` (what ``--policy`` and
    :func:`make_policy` call it) and a one-line ``description``, and answers one of two
    questions, the other derived from it:

    - :meth:`changes`, the rule over the books every view carries (the free pool, the
      apps changed since the last round, their admission ranks): what a round starts and
      stops, in time proportional to what changed. The baselines that rank jobs are rules
      of this kind on one engine (``_ranked.py``, ``_books.py``).
    - :meth:`schedule`, the full set of running jobs, for a policy that re-plans the
      whole cluster every round anyway (Optimus) or that is simply written that way.

    The mechanism calls it at every arrival, job end and grant end; a policy keeps
    whatever state it needs between rounds, but reads the world only through the view
    (never a job's true work: docs/knowledge.md)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: Knobs of a plug-in policy's own (``knobs.Knob``, with its ``default``): flags of
    #: every command that runs a policy, keys of config files and ``summary.json``, read
    #: with ``options.value(field)``. The built-ins' are in the one table, ``knobs.KNOBS``.
    knobs: ClassVar[tuple[Knob, ...]] = ()

    #: Whether the policy answers ``changes`` itself (the simulator then asks it instead
    #: of ``schedule``: a round then costs what changes, not every running job). Set for
    #: each subclass from which of the two it defines.
    incremental: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "incremental" not in cls.__dict__:
            cls.incremental = cls.changes is not Policy.changes

    def __init__(self, options: PolicyOptions) -> None:
        cls = type(self)
        if cls.changes is Policy.changes and cls.schedule is Policy.schedule:
            raise TypeError(f"policy {cls.__name__} must define schedule or changes")
        self.options = options
        self._view_books = ViewBooks()

    def schedule(self, view: SchedulingView) -> Schedule:
        """The full set of jobs that run after this round. Derived from ``changes`` for a
        policy that defines only that: every running job on its GPUs and grant end except
        those it stops, then those it starts (``Changes``)."""
        view = self.with_books(view)
        return as_schedule(view.running(), self.changes(view))

    def changes(self, view: SchedulingView) -> Changes:
        """This round as what changes (see ``Changes``). Derived from ``schedule`` for a
        policy that defines only that."""
        schedule = self.schedule(view)
        running = view.running()
        return Changes(
            [j for j in running if j not in schedule],
            {
                j: a
                for j, a in schedule.items()
                if not (j.gpus and a.gpus == j.gpus and a.until == j.until)
            },
        )

    def with_books(self, view: SchedulingView) -> SchedulingView:
        """``view`` with the mechanism's books: its own when it keeps them (the simulator
        and the runtime do), else books this policy keeps for its callers (``ViewBooks``)."""
        return self._view_books.fill(view)

    def set_restart_cost(self, restart_cost: float) -> None:
        """The run's restart cost (seconds of no progress per start), told before the run:
        a policy refuses one under which it could not make progress, before a run that
        would never end (Gandiva), or adapts to it (Themis); the default ignores it. A
        platform knows this cost (its checkpoint and reload time), so a policy may read it."""
        return None

    def report(self) -> dict[str, float]:
        """Figures of the policy's own mechanism for the run's summary (e.g. the idle
        GPU-time its reservations cost); empty for policies with nothing to add."""
        return {}

    def held_idle(self) -> list[tuple[float, float, tuple[int, ...]]]:
        """(from, to, GPUs) wherever the policy kept free GPUs idle on purpose (Themis's
        reservations), so that checks of work conservation can tell them from waste."""
        return []

    @staticmethod
    def keep_running(view: SchedulingView) -> Schedule:
        """The current schedule unchanged: a starting point for non-preemptive rounds."""
        return {j: Assignment(j.gpus, j.until) for j in view.running()}
