"""Truthfulness, measured: what an app gains by misreporting its work, and what the honest
apps lose, under each policy (issue 10; the paper's strategy-proofness argument as a table).

For each policy the workload runs once with every app honest and once per lie, where one
app (the liar) declares ``factor`` times its true work (``Conditions.misreport``; the
simulator still runs the true work). The liar's **gain** is the share of its completion
time it saves by lying (``1 - lying / honest``: > 0, lying paid off); the **honest apps'
loss** is how much longer the others take on average (``lying / honest - 1``).

What this measures is a manipulation of the *estimates* a policy reads (remaining work,
``T_cluster``), over a whole run: Partial Allocation's truthfulness is about the bids of
one auction given those estimates, so it need not make this gain <= 0; the table shows
where it does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean

from themis.experiments.runner import RunRequest
from themis.reports.record import RunRecord


@dataclass(frozen=True)
class LieOutcome:
    policy: str
    liar: str
    factor: float
    liar_honest_s: float  # the liar's completion time when every app is honest
    liar_lying_s: float
    others_honest_s: float  # the other apps' mean completion time
    others_lying_s: float

    @property
    def gain(self) -> float:
        """Share of its completion time the liar saves by lying (> 0: lying paid off)."""
        return 1.0 - self.liar_lying_s / self.liar_honest_s

    @property
    def others_loss(self) -> float:
        """How much longer the honest apps take on average (> 0: they lose)."""
        return self.others_lying_s / self.others_honest_s - 1.0


def honest_label(policy: str) -> str:
    return f"{policy} honest"


def lie_label(policy: str, factor: float) -> str:
    return f"{policy} lies x{factor:g}"


def requests(base: Sequence[RunRequest], liar: str, factors: Sequence[float]) -> list[RunRequest]:
    """For each policy's run in ``base`` (honest conditions): that run, then one per lie."""
    out = []
    for request in base:
        if request.conditions.misreport:
            raise ValueError("the base runs must be honest")
        out.append(replace(request, label=honest_label(request.policy)))
        for factor in factors:
            lie = replace(request.conditions, misreport=((liar, factor),))
            out.append(
                replace(
                    request,
                    label=lie_label(request.policy, factor),
                    conditions=lie,
                    out_dir=None,
                )
            )
    return out


def outcomes(
    records: Mapping[str, RunRecord], policies: Sequence[str], liar: str, factors: Sequence[float]
) -> list[LieOutcome]:
    result = []
    for policy in policies:
        honest = {r.app_id: r.completion_s for r in records[honest_label(policy)].rows}
        for factor in factors:
            lying = {r.app_id: r.completion_s for r in records[lie_label(policy, factor)].rows}
            others = [a for a in honest if a != liar]
            result.append(
                LieOutcome(
                    policy,
                    liar,
                    factor,
                    honest[liar],
                    lying[liar],
                    fmean(honest[a] for a in others) if others else float("nan"),
                    fmean(lying[a] for a in others) if others else float("nan"),
                )
            )
    return result


def markdown(rows: Sequence[LieOutcome]) -> str:
    lines = [
        "| policy | liar declares | liar's completion honest -> lying (h) | liar's gain "
        "| honest apps' mean completion change |",
        "|---|---|---|---|---|",
    ]
    for o in rows:
        lines.append(
            f"| {o.policy} | {o.factor:g}x its work | {o.liar_honest_s / 3600:,.1f} -> "
            f"{o.liar_lying_s / 3600:,.1f} | {100 * o.gain:+.1f}% | {100 * o.others_loss:+.1f}% |"
        )
    return "\n".join(lines) + "\n"
