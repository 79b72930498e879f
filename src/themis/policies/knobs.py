"""Every knob a policy reads, declared once: its command-line flag, what it
means and the rule its value keeps (its help names the policies that read it).

``PolicyOptions`` (``base.py``) holds the values and checks them against these rules when
it is made, so a bad value is refused the same way whoever made it: a command's flag, a
config file, the runtime, a library caller. The command line generates its flags from
this table (``cli/policy_flags.py``) for ``simulate``, ``compare``, ``experiment`` and
``serve`` alike, so the runtime has every knob the simulator has. Defaults are
``PolicyOptions``'s own; a command may differ where it must (the runtime bounds an
auction by the wall clock, not by search nodes).

No click here: the library does not depend on the command line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from themis.arbiter.options import RANKINGS, VALUATIONS
from themis.errors import ThemisError
from themis.fairness.ideal import IDEAL_TIMES

#: gavel, gavel-mmf: when the allocation is solved again (``--gavel-resolve``).
GAVEL_RESOLVE = ("simulator", "cluster")


class BadOption(ThemisError, ValueError):
    """A knob's value breaks its rule: a user's mistake (``ThemisError``, one line on the
    command line) and, to a library caller, a ``ValueError``."""


@dataclass(frozen=True)
class Knob:
    """One knob. ``field`` is its ``PolicyOptions`` attribute; ``flag`` its long option,
    whose parameter is ``param`` (the field's name unless given: config files and
    ``make_config`` say ``tiresias_queues`` for the text of ``tiresias_thresholds``).
    ``check`` returns what is wrong with a value, or None. ``kind`` is the value's type on
    the command line (``bool``: an on/off flag pair; ``str`` with ``choices``: one of
    them). ``parse`` turns the command line's text into the value (``--tiresias-queues
    3250,7200``), ``read`` the command line's value into the option's
    (``--auction-node-limit 0``: no limit, None).

    How a run records it, in ``summary.json``'s ``config`` (``PolicyOptions.record``):
    under ``record`` (the field's name unless given: ``lease_s``, the name summaries have
    always used, so old ones still read), ``when`` it is recorded (``always``; ``set``:
    only when not None; ``changed``: only when not its default, so that runs without it
    keep the summaries they had) and, for a None that means another knob's value,
    ``none_is`` (``reservation_bound``: one lease). ``default`` is the value of a knob a
    plug-in policy declares (a built-in's default is its ``PolicyOptions`` field's)."""

    field: str
    flag: str
    help: str
    kind: type
    check: Callable[[Any], str | None]
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    show_default: bool | str = True
    parse: Callable[[str], Any] | None = None
    read: Callable[[Any], Any] | None = None
    param: str = ""
    record: str = ""
    when: str = "always"
    none_is: str = ""
    default: Any = None

    @property
    def name(self) -> str:
        """The command's parameter name of this knob."""
        return self.param or self.field

    @property
    def recorded(self) -> str:
        """The key this knob's value is recorded under in a run's ``summary.json``."""
        return self.record or self.field

    def error(self, value: Any) -> BadOption | None:
        """The error ``value`` makes, naming the flag (None: the value keeps the rule)."""
        problem = self.check(value)
        return None if problem is None else BadOption(problem, field=self.flag)


def _seconds(low: str, optional: bool = False) -> Callable[[Any], str | None]:
    """A finite number of seconds, ``> 0`` or ``>= 0`` (None allowed when ``optional``)."""

    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        ok = isinstance(value, (int, float)) and math.isfinite(value)
        ok = ok and (value > 0 if low == ">" else value >= 0)
        return None if ok else f"must be a number of seconds {low} 0, got {value}"

    return check


def _share(high_open: bool) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        ok = (
            isinstance(value, (int, float))
            and value >= 0
            and (value < 1 if high_open else value <= 1)
        )
        return None if ok else f"must be in [0, 1{')' if high_open else ']'}, got {value}"

    return check


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"

    return check


def _thresholds(value: Any) -> str | None:
    if value is None:
        return None
    ok = isinstance(value, tuple) and all(0 < v < math.inf for v in value)
    if not ok or list(value) != sorted(set(value)):
        return f"must be increasing positive GPU-seconds, got {value}"
    return None


def parse_thresholds(text: str) -> tuple[float, ...]:
    """``--tiresias-queues``: comma-separated GPU-seconds (the rule is ``_thresholds``)."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise BadOption(
            f"must be comma-separated GPU-seconds, got '{text}'", field="--tiresias-queues"
        ) from None
    if _thresholds(values) is not None:  # named as the user wrote it
        raise BadOption(
            f"must be increasing positive GPU-seconds, got '{text}'", field="--tiresias-queues"
        )
    return values


def _nodes(value: Any) -> str | None:
    ok = value is None or (isinstance(value, int) and value > 0)
    return None if ok else f"must be a number of nodes >= 0, got {value}"


def _promote(value: Any) -> str | None:
    ok = value is None or (isinstance(value, (int, float)) and value > 0)
    return None if ok else f"must be > 0 (inf: off), got {value}"


def _any(value: Any) -> str | None:
    return None


KNOBS: tuple[Knob, ...] = (
    Knob(
        "fairness_knob", "--fairness-knob",
        "0 <= F < 1: the worst ceil((1-F)*n) apps bid in each auction.",
        float, _share(high_open=True), metavar="F",
    ),
    Knob(
        "lease", "--lease",
        "Lease length (> 0); the re-allocation quantum of non-leasing policies.",
        float, _seconds(">"), metavar="SECONDS", record="lease_s",
    ),
    Knob(
        "reservation_bound", "--reservation-bound",
        "Themis: longest a reservation may hold GPUs idle for a waiting gang "
        "(0: no reservations)  [default: one lease]",
        float, _seconds(">=", optional=True), metavar="SECONDS",
        show_default=False, record="reservation_bound_s", none_is="lease",
    ),
    Knob(
        "lease_align", "--lease-align",
        "Themis: end leases on multiples of this many seconds (0: not aligned).",
        float, _seconds(">="), metavar="SECONDS", record="lease_align_s",
    ),
    Knob(
        "ranking", "--ranking",
        "Themis: rank apps by the rho of the work they have done (verified: observed "
        "progress only, N the larger of the app's N_avg and the apps now; an app that has "
        "made nothing by its starving rho one lease later), the same with N_avg alone "
        "(verified-avg-n, the previous default), that with apps that cannot run "
        "first (verified-tiered, the 0.2 default), by the rho of their declared "
        "remaining work (declared), or by the rho each would reach holding the GPUs it "
        "would get this round, its demand capped by what it keeps plus the free GPUs "
        "(prospective: PCS's Themis's rank; declared work, observed progress; "
        "docs/results.md).",
        str, _one_of(RANKINGS), choices=RANKINGS,
    ),
    Knob(
        "renewal_share", "--renewal-share",
        "Themis: leases ending for the worst-off R (0..1) of the apps that want GPUs are "
        "renewed in place, not auctioned (0: all auctioned, as in the paper).",
        float, _share(high_open=False), metavar="R",
    ),
    Knob(
        "renew_within_share", "--renew-within-share",
        "Themis: an app holding no more than its fair share (1/N of the cluster) keeps its "
        "ending leases, renewed in place: fewer restarts, at a small cost in fairness on "
        "small gang-mix clusters where restarts are free (docs/knowledge.md).",
        bool, _any, show_default="on when --restart-cost > 0", when="set",
    ),
    Knob(
        "gang_at_once", "--gang-at-once",
        "Themis: the worst-off app, holding no GPU, starts its next gang at once when it "
        "fits the free GPUs on its best span (a reservation made and fulfilled in one "
        "round) instead of bidding for them: big gangs no longer lose to the same trials "
        "cut smaller (docs/gangs.md).",
        bool, _any,
    ),
    Knob(
        "valuation", "--valuation",
        "Themis: a bid values a bundle by the app's rho with it (paper) or by its remaining "
        "time with it (remaining: declaring more or less work changes nothing).",
        str, _one_of(VALUATIONS), choices=VALUATIONS, when="changed",
    ),
    Knob(
        "ideal_time", "--ideal-time",
        "Themis, ftf-oracle: the ideal time rho divides by, in the policy's ranking, bids "
        "and shares and in the run's headline rho: the paper's (T_cluster x N_avg: alone "
        "on the cluster, N_avg times slower) or a private slice (the app's time on "
        "G/N_avg GPUs, capped by its demand; docs/metrics.md). The report shows both.",
        str, _one_of(IDEAL_TIMES), choices=IDEAL_TIMES, when="changed",
    ),
    Knob(
        "auction_node_limit", "--auction-node-limit",
        "Themis: work units (~5 us of CPU each) one auction may take before it answers "
        "with its best allocation and a bound on the gap (0: no limit; docs/auction.md).",
        int, _nodes, metavar="N", read=lambda n: n or None,
    ),
    Knob(
        "auction_deadline", "--auction-deadline",
        "Themis: wall-clock seconds one auction may take (not reproducible; the runtime's "
        "bound)  [default: none]",
        float, _seconds(">", optional=True), metavar="SECONDS",
        show_default=False, record="auction_deadline_s",
    ),
    Knob(
        "tiresias_thresholds", "--tiresias-queues",
        "Tiresias: service thresholds between its queues, GPU-seconds, increasing (3600: "
        "two queues)  [default: 3250,7200, the authors' default run]",
        str, _thresholds, metavar="T1,T2,...", show_default=False,
        parse=parse_thresholds, param="tiresias_queues", record="tiresias_queues",
        when="set",
    ),
    Knob(
        "tiresias_promote_knob", "--tiresias-promote-knob",
        "Tiresias: promote a waiting job back to the top queue once it has waited K times "
        "its running time (the authors' dlas-gpu-8 run: 8)  [default: off]",
        float, _promote, metavar="K", show_default=False, when="set",
    ),
    Knob(
        "gandiva_slice", "--gandiva-slice",
        "Gandiva: the round-robin time slice (not the lease).",
        float, _seconds(">"), metavar="SECONDS", record="gandiva_slice_s",
    ),
    Knob(
        "gavel_resolve", "--gavel-resolve",
        "gavel, gavel-mmf: re-solve the allocation as Gavel's simulator does (with the time "
        "counters' reset, at most every 1920 s) or as its cluster scheduler does (at the "
        "first round after every arrival or completion).",
        str, _one_of(GAVEL_RESOLVE), choices=GAVEL_RESOLVE,
    ),
)  # fmt: skip

#: ``PolicyOptions`` fields with no flag: set by the command itself (``seed``: the run's
#: seed), by the library only (``max_menu``), or the plug-in knobs' values, each its own
#: flag (``plugin_knobs``).
NOT_FLAGS = ("seed", "max_menu", "plugin_knobs")


#: Knobs plug-in policies declare (``Policy.knobs``), by field, in the order their
#: policies registered: flags, config-file keys and ``summary.json`` keys like the
#: built-ins'.
_DECLARED: dict[str, Knob] = {}


def all_knobs() -> tuple[Knob, ...]:
    """The built-in knobs, then those the plug-in policies registered so far declared
    (``registry.knobs()`` loads them first)."""
    return KNOBS + tuple(_DECLARED.values())


def declared(field: str) -> Knob | None:
    """The plug-in knob of ``field``, if a registered policy declared one."""
    return _DECLARED.get(field)


def declare(knobs: tuple[Knob, ...]) -> str | None:
    """Add the knobs a plug-in policy declares; what is wrong with them (nothing is added
    then), or None. A knob must not take a name a knob or a ``PolicyOptions`` field already
    has (its field, flag, parameter or recorded key), or the command line and the
    summaries could not tell the two apart; a knob two plug-ins share (the same object)
    is declared once."""
    new = [k for k in knobs if _DECLARED.get(k.field) is not k]
    taken: dict[str, str] = {name: name for name in NOT_FLAGS}
    for knob in (*KNOBS, *_DECLARED.values()):
        for name in (knob.field, knob.flag, knob.name, knob.recorded):
            taken[name] = knob.flag
    for knob in new:
        for name in {knob.field, knob.flag, knob.name, knob.recorded}:
            if name in taken:
                return f"its knob {knob.flag} takes the name '{name}' of {taken[name]}"
            taken[name] = knob.flag
        if knob.error(knob.default) is not None:
            return f"its knob {knob.flag}'s default {knob.default!r} breaks its own rule"
    _DECLARED.update((k.field, k) for k in new)
    return None


def check_values(**values: Any) -> None:
    """Each value against its knob's rule, in the table's order; the first broken one is
    raised (``BadOption``, naming its flag)."""
    for knob in all_knobs():
        if knob.field in values:
            error = knob.error(values[knob.field])
            if error is not None:
                raise error
