"""Truthfulness, measured: what an app gains by lying, and what the honest apps lose, under
each policy (the paper's strategy-proofness argument, measured as a distribution).

Each policy runs the workload once with every app honest and once per (lie, liar): the
liar tells one of the lies of ``model/lies.py`` (declare a multiple of its work, claim a
placement sensitivity, resubmit its trials on other gangs, split itself into several
apps), or two apps tell the same lie together (a coalition, ``pair:LIE``). The simulator
runs the truth. The liar's **gain** is the share of its completion time it saves by lying
(``1 - lying / honest``: > 0, lying paid off; a split app completes when its last part
does); the **honest apps' loss** is how much longer the others take on average.

Partial Allocation's truthfulness is about the bids of one auction given the estimates;
these lies change the estimates, the ranking and the leftover over a whole run, so the
table measures the mechanism as a whole, not one auction.

**Contexts.** A shared cluster is chaotic: on 16 GPUs, one other app declaring 1% more
work moved an app's completion by 29% (docs/knowledge.md, "What a lie is expected to
gain"). A gain measured in one run is then mostly that run's luck, which no liar can
aim at, since it cannot know what every other app will declare or when it will arrive.
With ``contexts`` K > 1 every run (honest and lying alike) is repeated in K contexts,
the workload staying the same: in context k (``context_request``) the simulation's own
random draws take a seed of their own (``context_seed``: the Partial Allocation
auction's rounding, and every app's declared work carrying an estimate error,
``CONTEXT_ERROR`` or the run's own), and every app's arrival is delayed by a draw in
``[0, jitter]`` seconds (``CONTEXT_JITTER``: a tenth of the default lease, so that apps
meet the lease cycle at other points). A case's gain is then ``1 - mean lying
completion / mean honest completion`` over the contexts, the gain a liar can expect;
each context's own gain is kept beside it, so a table can say in how many contexts it
gained.

**Placebo.** The experiment also measures a lie that changes nothing material
(``PLACEBO``, declaring 1% more work), computed exactly as the others: its gains are
what the chaos alone gives, the **noise floor** a lie's gain is read against.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from statistics import fmean, median, stdev

from themis.errors import ThemisError
from themis.experiments.runner import RunRequest
from themis.model.lies import (
    CONTEXT_ERROR,
    CONTEXT_JITTER,
    PAIR,
    PARTING_KINDS,
    TRUTHFUL_KINDS,
    Lie,
    apply_lies,
    check_lie,
    declarations,
    liar_of,
    parse_lie_value,
)
from themis.model.lies import DEFAULT_CONTEXTS as DEFAULT_CONTEXTS
from themis.model.lies import PLACEBO as PLACEBO
from themis.model.workload import Workload
from themis.reports.record import RunRecord
from themis.simulator.engine import Conditions

#: A lie pays when it saves more than this share of the liar's completion time.
PAYS = 0.01


def context_seed(seed: int, context: int) -> int:
    """The seed of context ``context``'s draws for the run seed ``seed``: distinct from
    every run seed below a million and from the other contexts."""
    return 1_000_000 * (context + 1) + seed


def context_conditions(
    conditions: Conditions, seed: int, context: int, contexts: int, error: float = CONTEXT_ERROR
) -> Conditions:
    """``conditions`` in context ``context`` of ``contexts`` (see the module doc): one
    context is the run itself; several draw the estimate errors (the run's own, else
    ``error``) with ``context_seed``."""
    if contexts == 1:
        return conditions
    return replace(
        conditions,
        estimate_error=conditions.estimate_error or error,
        estimate_seed=context_seed(seed, context),
    )


def jitter_arrivals(workload: Workload, seed: int, jitter: float) -> Workload:
    """``workload`` with every app's arrival delayed by a draw in ``[0, jitter]`` s, drawn
    in the order of the apps with a generator of ``seed``'s own (so the draws do not
    repeat the auction's or the estimate errors'). Delays only: an arrival never moves
    before the trace's start."""
    if jitter == 0.0:
        return workload
    rng = random.Random(f"arrivals:{seed}")
    apps = tuple(replace(a, arrival=a.arrival + rng.uniform(0.0, jitter)) for a in workload.apps)
    return replace(workload, apps=apps)


def context_request(
    base: RunRequest,
    seed: int,
    context: int,
    contexts: int,
    error: float = CONTEXT_ERROR,
    jitter: float = CONTEXT_JITTER,
) -> RunRequest:
    """``base`` (an honest run of the run seed ``seed``) in context ``context`` of
    ``contexts`` (see the module doc): one context is the run itself; several each give
    the policy's own draws and the estimate errors the seed ``context_seed`` and delay
    every arrival by up to ``jitter`` s. The workload ``base`` holds is kept, so a trace
    generated with ``seed`` stays the same trace."""
    if contexts == 1:
        return base
    own = context_seed(seed, context)
    return replace(
        base,
        options=replace(base.options, seed=own),
        conditions=context_conditions(base.conditions, seed, context, contexts, error),
        workload=jitter_arrivals(base.workload, own, jitter),
    )


def check_contexts(contexts: int, error: float, jitter: float = CONTEXT_JITTER) -> None:
    if contexts < 1:
        raise ThemisError(f"must be at least 1, got {contexts}", field="--contexts")
    if not (0.0 < error < 1.0):
        raise ThemisError(f"must be in (0, 1), got {error}", field="--context-error")
    if not (math.isfinite(jitter) and jitter >= 0.0):
        raise ThemisError(
            f"must be a number of seconds >= 0, got {jitter}", field="--context-jitter"
        )


def check_lie_text(text: str) -> None:
    """``KIND:VALUE`` or ``pair:KIND:VALUE``, with a clear error."""
    body = text.removeprefix(PAIR)
    kind, colon, value = body.partition(":")
    if not colon:
        raise ThemisError(f"'{text}' is not KIND:VALUE (e.g. work:0.5)", field="--lies")
    try:
        check_lie(kind, parse_lie_value(kind, value))
    except ThemisError as error:
        raise ThemisError(f"'{text}': {error.message}", field="--lies") from None


@dataclass(frozen=True)
class LieCase:
    """One run's lie: ``lie`` (``KIND:VALUE``, or ``pair:KIND:VALUE`` told by both
    ``liars``) told by ``liars`` (the first is *the* liar; a pair's second its partner)."""

    lie: str
    liars: tuple[str, ...]

    @property
    def kind(self) -> str:
        return self.lie.removeprefix(PAIR).partition(":")[0]

    def lies(self) -> tuple[Lie, ...]:
        kind, _, value = self.lie.removeprefix(PAIR).partition(":")
        return tuple(Lie(app, kind, parse_lie_value(kind, value)) for app in self.liars)

    @property
    def label(self) -> str:
        return f"{self.lie} by {'+'.join(self.liars)}"


def _context(context: int | None) -> str:
    return "" if context is None else f" context {context}"


def honest_label(policy: str, seed: int | None = None, context: int | None = None) -> str:
    return f"{policy} honest" + ("" if seed is None else f" seed {seed}") + _context(context)


def case_label(
    policy: str, case: LieCase, seed: int | None = None, context: int | None = None
) -> str:
    return f"{policy} {case.label}" + ("" if seed is None else f" seed {seed}") + _context(context)


def lie_request(base: RunRequest, case: LieCase, max_gang: int, label: str) -> RunRequest:
    """``base`` (an honest run) with ``case``'s lies told: the submitted workload rewritten
    (gang, split), the declarations handed to the simulator (work, placement)."""
    lies = case.lies()
    submitted = apply_lies(base.workload, lies, max_gang).workload
    told = declarations(lies)
    conditions = replace(
        base.conditions, misreport=told.misreport, claims=told.claims, orders=told.orders
    )
    return replace(base, label=label, workload=submitted, conditions=conditions, out_dir=None)


def completions(record: RunRecord, split: Sequence[str] = ()) -> dict[str, float]:
    """Each app's completion time; the parts of an app of ``split`` (``app~k``, arriving
    together) as one app, complete when its last part is."""
    out: dict[str, float] = {}
    last: dict[str, float] = {}
    arrival: dict[str, float] = {}
    liars = set(split)
    for row in record.rows:
        whole = liar_of(row.app_id, liars)
        if whole is not None and whole != row.app_id:
            last[whole] = max(last.get(whole, row.finish_s), row.finish_s)
            arrival[whole] = min(arrival.get(whole, row.arrival_s), row.arrival_s)
        else:
            out[row.app_id] = row.completion_s
    for whole, finish in last.items():
        out[whole] = finish - arrival[whole]
    return out


def check_selectors(selectors: Sequence[str], workload: Workload) -> None:
    """A clear error, before any run, for a liar selector that names nothing."""
    known = {a.app_id for a in workload.apps}
    for selector in selectors:
        if selector.startswith("worst:"):
            count = selector.removeprefix("worst:")
            if not (count.isdigit() and int(count) > 0):
                raise ThemisError(f"'{selector}' is not worst:N (N >= 1)", field="--liars")
        elif selector not in ("middle", "vgg-gang") and selector not in known:
            raise ThemisError(
                f"'{selector}' is neither an app of the workload nor middle, worst:N, vgg-gang",
                field="--liars",
            )


def choose_liars(
    selectors: Sequence[str], workload: Workload, honest: RunRecord | None
) -> list[str]:
    """The apps ``selectors`` name, each once, in the order named: an app id, ``middle``
    (the app arriving in the middle), ``worst:N`` (the N worst-off apps by rho in
    ``honest``), ``vgg-gang`` (the first-arriving app of a VGG model whose trials need
    more than one GPU; none if there is none). Check them first (:func:`check_selectors`)."""
    check_selectors(selectors, workload)
    arrivals = sorted(workload.apps, key=lambda a: (a.arrival, a.app_id))
    chosen: list[str] = []

    def add(app_id: str) -> None:
        if app_id not in chosen:
            chosen.append(app_id)

    for selector in selectors:
        if selector == "middle":
            add(arrivals[len(arrivals) // 2].app_id)
        elif selector.startswith("worst:"):
            count = int(selector.removeprefix("worst:"))
            if honest is None:
                raise ThemisError("worst:N needs an honest run", field="--liars")
            for row in sorted(honest.rows, key=lambda r: (-r.rho, r.app_id))[:count]:
                add(row.app_id)
        elif selector == "vgg-gang":
            app = next(
                (
                    a
                    for a in arrivals
                    if a.model.startswith("vgg") and any(j.gang > 1 for j in a.jobs)
                ),
                None,
            )
            if app is not None:
                add(app.app_id)
        else:
            add(selector)
    return chosen


def partner_of(liar: str, workload: Workload) -> str | None:
    """A coalition's second member: the app arriving next after ``liar`` (else before)."""
    arrivals = [a.app_id for a in sorted(workload.apps, key=lambda a: (a.arrival, a.app_id))]
    k = arrivals.index(liar)
    if k + 1 < len(arrivals):
        return arrivals[k + 1]
    return arrivals[k - 1] if k > 0 else None


def cases(lies: Sequence[str], liars: Sequence[str], workload: Workload) -> list[LieCase]:
    out = []
    for lie in lies:
        for liar in liars:
            if lie.startswith(PAIR):
                partner = partner_of(liar, workload)
                if partner is None:
                    continue
                out.append(LieCase(lie, (liar, partner)))
            else:
                out.append(LieCase(lie, (liar,)))
    return out


@dataclass(frozen=True)
class LieOutcome:
    policy: str
    seed: int | None
    lie: str
    liar: str
    liar_honest_s: float  # the liar's completion time when every app is honest
    liar_lying_s: float
    others_honest_s: float  # the apps outside the lie: mean completion time
    others_lying_s: float
    partner: str | None = None
    partner_honest_s: float = float("nan")
    partner_lying_s: float = float("nan")
    #: Contexts the completions are means over (see the module doc), the liar's gain in
    #: the context where it gained least and most, and the standard deviation of its gains
    #: over the contexts (0 for one context; the mean's standard error is it / sqrt(K)).
    contexts: int = 1
    gain_low: float = float("nan")
    gain_high: float = float("nan")
    gain_sd: float = 0.0
    #: The liar's gain in each context, in context order (empty when built by hand).
    context_gains: tuple[float, ...] = ()

    @property
    def contexts_gained(self) -> int:
        """In how many contexts the lie saved the liar more than ``PAYS``."""
        return sum(1 for g in self.context_gains if g > PAYS)

    @property
    def gain(self) -> float:
        """Share of its completion time the liar saves by lying (> 0: lying paid off)."""
        return 1.0 - self.liar_lying_s / self.liar_honest_s

    @property
    def partner_gain(self) -> float:
        return 1.0 - self.partner_lying_s / self.partner_honest_s

    @property
    def others_loss(self) -> float:
        """How much longer the honest apps take on average (> 0: they lose)."""
        return self.others_lying_s / self.others_honest_s - 1.0

    @property
    def factor(self) -> float:
        """The factor of a lie about work (what the old table printed)."""
        return float(self.lie.removeprefix(PAIR).partition(":")[2])


def outcome(
    policy: str, seed: int | None, case: LieCase, honest: RunRecord, lying: RunRecord
) -> LieOutcome:
    return outcome_over(policy, seed, case, [honest], [lying])


def outcome_over(
    policy: str,
    seed: int | None,
    case: LieCase,
    honest: Sequence[RunRecord],
    lying: Sequence[RunRecord],
) -> LieOutcome:
    """The case's outcome over contexts: ``honest[k]`` and ``lying[k]`` ran in context
    ``k``; completions are means over the contexts (one context: that run's)."""
    if len(honest) != len(lying) or not honest:
        raise ValueError("one honest and one lying run per context")
    before = [completions(h) for h in honest]
    after = [completions(r, case.liars if case.kind in PARTING_KINDS else ()) for r in lying]
    others = [a for a in before[0] if a not in case.liars]
    liar = case.liars[0]
    partner = case.liars[1] if len(case.liars) > 1 else None
    gains = [1.0 - a[liar] / b[liar] for b, a in zip(before, after, strict=True)]

    def mean_of(runs: Sequence[dict[str, float]], app: str | None) -> float:
        return fmean(r[app] for r in runs) if app else float("nan")

    def others_mean(runs: Sequence[dict[str, float]]) -> float:
        return fmean(fmean(r[a] for a in others) for r in runs) if others else float("nan")

    return LieOutcome(
        policy,
        seed,
        case.lie,
        liar,
        mean_of(before, liar),
        mean_of(after, liar),
        others_mean(before),
        others_mean(after),
        partner,
        mean_of(before, partner),
        mean_of(after, partner),
        len(honest),
        min(gains),
        max(gains),
        stdev(gains) if len(gains) > 1 else 0.0,
        tuple(gains),
    )


# -- the single-liar, work-only form (kept for the library's callers) -------------------------


def requests(base: Sequence[RunRequest], liar: str, factors: Sequence[float]) -> list[RunRequest]:
    """For each policy's run in ``base`` (honest conditions): that run, then one per lie
    about work by ``liar``."""
    out = []
    for request in base:
        if request.conditions.misreport or request.conditions.claims:
            raise ValueError("the base runs must be honest")
        out.append(replace(request, label=honest_label(request.policy)))
        for factor in factors:
            case = LieCase(f"work:{factor:g}", (liar,))
            out.append(lie_request(request, case, 0, case_label(request.policy, case)))
    return out


def outcomes(
    records: Mapping[str, RunRecord], policies: Sequence[str], liar: str, factors: Sequence[float]
) -> list[LieOutcome]:
    result = []
    for policy in policies:
        honest = records[honest_label(policy)]
        for factor in factors:
            case = LieCase(f"work:{factor:g}", (liar,))
            lying = records[case_label(policy, case)]
            result.append(outcome(policy, None, case, honest, lying))
    return result


def markdown(rows: Sequence[LieOutcome]) -> str:
    """Every case: the liar's completion honest and lying, its gain, the others' loss."""
    several = any(o.contexts > 1 for o in rows)
    mean = "mean " if several else ""
    lines = [
        f"| policy | seed | lie | liar | liar's {mean}completion honest -> lying (h) "
        f"| liar's gain |{' over the contexts |' if several else ''} partner's gain "
        "| honest apps' mean completion change |",
        "|---|---:|---|---|---|---:|" + ("---|" if several else "") + "---:|---:|",
    ]
    for o in rows:
        partner = f"{100 * o.partner_gain:+.1f}% ({o.partner})" if o.partner else ""
        seed = "" if o.seed is None else str(o.seed)
        spread = (
            f" {100 * o.gain_low:+.1f}% .. {100 * o.gain_high:+.1f}% ({o.contexts}) |"
            if several
            else ""
        )
        lines.append(
            f"| {o.policy} | {seed} | {o.lie} | {o.liar} | {o.liar_honest_s / 3600:,.1f} -> "
            f"{o.liar_lying_s / 3600:,.1f} | {100 * o.gain:+.1f}% |{spread} {partner} "
            f"| {100 * o.others_loss:+.1f}% |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LieSummary:
    """One policy's gains from one lie over every liar and seed."""

    policy: str
    lie: str
    cases: int
    paid: int  # cases where the lie saved more than ``PAYS``
    median_gain: float
    best_gain: float
    median_others_loss: float
    #: Contexts where a liar gained more than ``PAYS``, of all the cases' contexts.
    contexts_gained: int = 0
    context_runs: int = 0
    #: The best case: who (``seed app``), in how many of its contexts it gained, and its
    #: least and largest gain in one context.
    best_who: str = ""
    best_gained: int = 0
    best_contexts: int = 0
    best_low: float = float("nan")
    best_high: float = float("nan")
    placebo: bool = False


def summarize_lies(rows: Sequence[LieOutcome], placebo: str | None = None) -> list[LieSummary]:
    """Per (policy, lie), policies and then lies in the order first seen: how often and
    how much lying paid (a pair counts each member's gain), and in how many contexts; the
    lie ``placebo`` is marked as the noise floor."""
    groups: dict[tuple[str, str], list[LieOutcome]] = {}
    policies: dict[str, int] = {}
    lies: dict[str, int] = {}
    for o in rows:
        groups.setdefault((o.policy, o.lie), []).append(o)
        policies.setdefault(o.policy, len(policies))
        lies.setdefault(o.lie, len(lies))
    out = []
    for (policy, lie), group in sorted(
        groups.items(), key=lambda item: (policies[item[0][0]], lies[item[0][1]])
    ):
        gains = [o.gain for o in group] + [o.partner_gain for o in group if o.partner]
        best = max(group, key=lambda o: o.gain)
        partner = max((o for o in group if o.partner), key=lambda o: o.partner_gain, default=None)
        by_partner = partner is not None and partner.partner_gain > best.gain
        out.append(
            LieSummary(
                policy,
                lie,
                len(gains),
                sum(1 for g in gains if g > PAYS),
                median(gains),
                max(gains),
                median(o.others_loss for o in group),
                sum(o.contexts_gained for o in group),
                sum(len(o.context_gains) for o in group),
                f"{_who(partner)}'s partner {partner.partner}"
                if by_partner and partner is not None
                else _who(best),
                0 if by_partner else best.contexts_gained,
                0 if by_partner else len(best.context_gains),
                float("nan") if by_partner else best.gain_low,
                float("nan") if by_partner else best.gain_high,
                lie == placebo,
            )
        )
    return out


def noise_floors(summaries: Sequence[LieSummary]) -> dict[str, LieSummary]:
    """Each policy's placebo summary: a lie whose best gain is not above its placebo's
    is not told from the chaos of the runs."""
    return {s.policy: s for s in summaries if s.placebo}


def _gains_table(
    heads: tuple[str, str, str, str], rows: Iterable[tuple[str, str, int, int, float, float, str]]
) -> str:
    """A table of gains per (policy, lie): cases, those above ``PAYS``, median, best and
    a last column of the caller's (``heads``: the last four columns' names)."""
    paid, mid_head, best_head, last = heads
    lines = [
        f"| policy | lie | liars | {paid} (> {100 * PAYS:g}%) | {mid_head} | {best_head} "
        f"| {last} |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for policy, lie, cases, count, mid, best, tail in rows:
        lines.append(
            f"| {policy} | {lie} | {cases} | {count} | {100 * mid:+.1f}% "
            f"| {100 * best:+.1f}% | {tail} |"
        )
    return "\n".join(lines) + "\n"


def summary_markdown(summaries: Sequence[LieSummary]) -> str:
    """Per (policy, lie): liars, those who gained, median and best gain, the best case
    (who, in how many contexts it gained, its range), the honest apps' loss; then each
    policy's noise floor (its placebo's best gain) and the lies whose best gain is above
    it. Gains over several contexts are expected gains (``outcome_over``)."""
    several = any(s.context_runs > s.cases for s in summaries)
    lines = [
        f"| policy | lie | liars | paid (> {100 * PAYS:g}%) | contexts gained | median gain "
        "| best gain | best: who, contexts gained, range | honest apps' median loss |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for s in summaries:
        name = f"placebo `{s.lie}`" if s.placebo else s.lie
        runs = f"{s.contexts_gained} of {s.context_runs}" if s.context_runs else ""
        best = s.best_who
        if s.best_contexts > 1:
            best += (
                f", {s.best_gained} of {s.best_contexts}, {100 * s.best_low:+.1f}% .. "
                f"{100 * s.best_high:+.1f}%"
            )
        lines.append(
            f"| {s.policy} | {name} | {s.cases} | {s.paid} | {runs} | "
            f"{100 * s.median_gain:+.1f}% | {100 * s.best_gain:+.1f}% | {best} "
            f"| {100 * s.median_others_loss:+.1f}% |"
        )
    text = "\n".join(lines) + "\n"
    floors = noise_floors(summaries)
    for policy, floor in floors.items():
        above = [
            s.lie
            for s in summaries
            if s.policy == policy and not s.placebo and s.best_gain > max(floor.best_gain, PAYS)
        ]
        over = " over the contexts" if several else ""
        text += (
            f"\nNoise floor ({policy}): the placebo `{floor.lie}` gains at best "
            f"{100 * floor.best_gain:+.1f}%{over} (in {floor.contexts_gained} of "
            f"{floor.context_runs} contexts); above it: "
            + (", ".join(f"`{lie}`" for lie in above) if above else "no lie")
            + ".\n"
        )
    return text


@dataclass(frozen=True)
class ReportShare:
    """One policy's ``work:F`` liars measured against ``order:F`` (the same trial order,
    declared truthfully): what the false report itself buys from the arbiter."""

    policy: str
    lie: str
    cases: int
    paid: int  # cases where the report saved more than ``PAYS`` beyond the order
    median_gain: float
    best_gain: float
    best_liar: str


def report_shares(rows: Sequence[LieOutcome]) -> list[ReportShare]:
    """Per (policy, ``work:F``) with ``order:F`` measured for the same liars and seeds:
    the liar's completion telling the lie over its completion with the lie's trial order
    alone (``1 - work / order``; > 0: the report pays beyond the order). A ``work:F`` gain
    that ``order:F`` matches is the app's own trial order, which the arbiter never sees."""
    ordered = {(o.policy, o.seed, o.liar, o.lie): o for o in rows if o.lie.startswith("order:")}
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for o in rows:
        kind, _, value = o.lie.partition(":")
        match = ordered.get((o.policy, o.seed, o.liar, f"order:{value}"))
        if kind != "work" or match is None:
            continue
        groups.setdefault((o.policy, o.lie), []).append(
            (1.0 - o.liar_lying_s / match.liar_lying_s, _who(o))
        )
    return _shares(groups)


def _who(o: LieOutcome) -> str:
    return f"{o.seed} {o.liar}" if o.seed is not None else o.liar


def _shares(groups: dict[tuple[str, str], list[tuple[float, str]]]) -> list[ReportShare]:
    """Each (policy, lie)'s gains (with who gained) as a ``ReportShare``."""
    out = []
    for (policy, lie), cases in groups.items():
        gains = [g for g, _ in cases]
        best, who = max(cases)
        paid = sum(1 for g in gains if g > PAYS)
        out.append(ReportShare(policy, lie, len(gains), paid, median(gains), best, who))
    return out


def over_best_honest(rows: Sequence[LieOutcome]) -> list[ReportShare]:
    """Per (policy, lie) other than a truthful strategy (``order:F``, ``weight:W``), for
    the liars whose truthful strategies were measured (rows of the same seed and liar):
    the liar's completion lying over its best completion declaring the truth, with the
    default order or any measured order (``progress_weight``, which an honest app can
    declare). Strategy-proofness asks exactly this: that no lie beats the best truthful
    strategy; a lie that only buys an order the app could have declared does not."""
    best: dict[tuple[str, int | None, str], float] = {}
    for o in rows:
        if _truthful(o.lie):
            key = (o.policy, o.seed, o.liar)
            best[key] = min(best.get(key, o.liar_honest_s), o.liar_lying_s)
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for o in rows:
        honest = best.get((o.policy, o.seed, o.liar))
        if _truthful(o.lie) or honest is None:
            continue
        groups.setdefault((o.policy, o.lie), []).append((1.0 - o.liar_lying_s / honest, _who(o)))
    return _shares(groups)


def _truthful(lie: str) -> bool:
    """Whether ``lie`` (``KIND:VALUE``) is an honest app's own strategy, not a lie."""
    return lie.partition(":")[0] in TRUTHFUL_KINDS


def report_share_markdown(shares: Sequence[ReportShare], paid: str = "report pays") -> str:
    """The table of ``report_shares`` or ``over_best_honest`` (empty without ``order:F``
    runs); ``paid`` names the column of gains above ``PAYS``."""
    if not shares:
        return ""
    return _gains_table(
        (paid, "median", "best", "who"),
        (
            (s.policy, s.lie, s.cases, s.paid, s.median_gain, s.best_gain, s.best_liar)
            for s in shares
        ),
    )


def rows_csv(rows: Sequence[LieOutcome]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "policy",
            "seed",
            "lie",
            "liar",
            "partner",
            "liar_honest_s",
            "liar_lying_s",
            "gain",
            "partner_gain",
            "others_loss",
            "contexts",
            "gain_low",
            "gain_high",
            "gain_sd",
            "contexts_gained",
            "context_gains",
        ]
    )
    for o in rows:
        writer.writerow(
            [
                o.policy,
                "" if o.seed is None else o.seed,
                o.lie,
                o.liar,
                o.partner or "",
                repr(o.liar_honest_s),
                repr(o.liar_lying_s),
                repr(o.gain),
                repr(o.partner_gain) if o.partner else "",
                repr(o.others_loss),
                o.contexts,
                repr(o.gain_low),
                repr(o.gain_high),
                repr(o.gain_sd),
                o.contexts_gained,
                " ".join(repr(g) for g in o.context_gains),
            ]
        )
    return buffer.getvalue()


def payload(
    settings: Mapping[str, object],
    summaries: Sequence[LieSummary],
    rows: Sequence[LieOutcome],
) -> dict[str, object]:
    """``truthfulness.json``: the experiment's ``settings``, each (policy, lie)'s summary,
    each policy's noise floor (its placebo's summary) and every case with its gain in
    each context."""

    def case(o: LieOutcome) -> dict[str, object]:
        return {
            "policy": o.policy,
            "seed": o.seed,
            "lie": o.lie,
            "liar": o.liar,
            "partner": o.partner,
            "liar_honest_s": o.liar_honest_s,
            "liar_lying_s": o.liar_lying_s,
            "gain": o.gain,
            "partner_gain": o.partner_gain if o.partner else None,
            "others_loss": o.others_loss,
            "contexts": o.contexts,
            "contexts_gained": o.contexts_gained,
            "context_gains": list(o.context_gains),
        }

    return {
        "settings": dict(settings),
        "summary": [asdict(s) for s in summaries],
        "noise_floor": {p: asdict(s) for p, s in noise_floors(summaries).items()},
        "cases": [case(o) for o in rows],
    }
