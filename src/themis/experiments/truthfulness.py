"""Truthfulness, measured: what an app gains by lying, and what the honest apps lose, under
each policy (issues 10 and 19; the paper's strategy-proofness argument as a distribution).

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
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean, median

from themis.errors import ThemisError
from themis.experiments.runner import RunRequest
from themis.model.lies import (
    PAIR,
    Lie,
    apply_lies,
    check_lie,
    declarations,
    liar_of,
    parse_lie_value,
)
from themis.model.workload import Workload
from themis.reports.record import RunRecord

#: A lie pays when it saves more than this share of the liar's completion time.
PAYS = 0.01


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


def honest_label(policy: str, seed: int | None = None) -> str:
    return f"{policy} honest" + ("" if seed is None else f" seed {seed}")


def case_label(policy: str, case: LieCase, seed: int | None = None) -> str:
    return f"{policy} {case.label}" + ("" if seed is None else f" seed {seed}")


def lie_request(base: RunRequest, case: LieCase, max_gang: int, label: str) -> RunRequest:
    """``base`` (an honest run) with ``case``'s lies told: the submitted workload rewritten
    (gang, split), the declarations handed to the simulator (work, placement)."""
    lies = case.lies()
    submitted = apply_lies(base.workload, lies, max_gang).workload
    work, claims = declarations(lies)
    conditions = replace(base.conditions, misreport=work, claims=claims)
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
    before = completions(honest)
    after = completions(lying, case.liars if case.kind == "split" else ())
    others = [a for a in before if a not in case.liars]
    liar = case.liars[0]
    partner = case.liars[1] if len(case.liars) > 1 else None
    return LieOutcome(
        policy,
        seed,
        case.lie,
        liar,
        before[liar],
        after[liar],
        fmean(before[a] for a in others) if others else float("nan"),
        fmean(after[a] for a in others) if others else float("nan"),
        partner,
        before[partner] if partner else float("nan"),
        after[partner] if partner else float("nan"),
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
    lines = [
        "| policy | seed | lie | liar | liar's completion honest -> lying (h) | liar's gain "
        "| partner's gain | honest apps' mean completion change |",
        "|---|---:|---|---|---|---:|---:|---:|",
    ]
    for o in rows:
        partner = f"{100 * o.partner_gain:+.1f}% ({o.partner})" if o.partner else ""
        seed = "" if o.seed is None else str(o.seed)
        lines.append(
            f"| {o.policy} | {seed} | {o.lie} | {o.liar} | {o.liar_honest_s / 3600:,.1f} -> "
            f"{o.liar_lying_s / 3600:,.1f} | {100 * o.gain:+.1f}% | {partner} "
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


def summarize_lies(rows: Sequence[LieOutcome]) -> list[LieSummary]:
    """Per (policy, lie), in the order first seen: how often and how much lying paid (a
    pair counts each member's gain)."""
    groups: dict[tuple[str, str], list[LieOutcome]] = {}
    for o in rows:
        groups.setdefault((o.policy, o.lie), []).append(o)
    out = []
    for (policy, lie), group in groups.items():
        gains = [o.gain for o in group] + [o.partner_gain for o in group if o.partner]
        out.append(
            LieSummary(
                policy,
                lie,
                len(gains),
                sum(1 for g in gains if g > PAYS),
                median(gains),
                max(gains),
                median(o.others_loss for o in group),
            )
        )
    return out


def summary_markdown(summaries: Sequence[LieSummary]) -> str:
    lines = [
        f"| policy | lie | liars | paid (> {100 * PAYS:g}%) | median gain | best gain "
        "| honest apps' median loss |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.policy} | {s.lie} | {s.cases} | {s.paid} | {100 * s.median_gain:+.1f}% "
            f"| {100 * s.best_gain:+.1f}% | {100 * s.median_others_loss:+.1f}% |"
        )
    return "\n".join(lines) + "\n"


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
            ]
        )
    return buffer.getvalue()
