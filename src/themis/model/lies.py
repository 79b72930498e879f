"""Lies an app can tell a scheduler, as data (DESIGN §12).

A scheduler that shares GPUs by what apps report invites apps to report what pays. Each
kind of lie here is one a real tenant can tell without changing what its training does:

- ``work:F`` declares ``F`` times its true work (budget, iterations); the simulator still
  runs the truth. Understating inflates the rho a finish-time-fair policy computes
  (elapsed time does not shrink with the lie); overstating steepens its bids.
- ``placement:flat`` claims the app's model does not slow down across machines;
  ``placement:sensitive`` claims it slows down as much as the most placement-sensitive
  model of the workload. The simulator runs the true speeds.
- ``gang:F`` resubmits every trial with ``F`` times its gang (rounded, at least 1 GPU, at
  most ``max_gang``) and the same iterations, so each trial runs ``1/F`` times as long on
  its best placement: the same GPU-time, restructured. Not a false report but a strategy.
- ``ask:F`` asks for ``F`` times the GPUs per trial and runs no faster: the gang grows
  (rounded, 1..``max_gang``), the extra GPUs idle (modelled as iterations scaled by the
  same ratio, so each trial lasts as long on its best placement and holds more GPU-time).
  What a tenant does to look bigger.
- ``split:K`` submits the app as ``K`` apps arriving together, its trials dealt round-robin
  (a successive-halving search then halves within each part): the tenant splits its sweep
  to get more shares. Its completion is the last part's.
- ``order:F`` is not a lie but the part of ``work:F`` that is the app's own business: its
  scheduler orders its trials as a ``work:F`` liar's would (by ``F`` times each trial's
  declared work, minus what it made) while the app declares the truth. It is the order
  an honest app declares with ``progress_weight`` ``1/F`` (``AppSpec``). Beside
  ``work:F`` it splits a lie's gain into what the app's trial order buys and what the
  false report buys from the arbiter (docs/knowledge.md).
- ``weight:W`` is not a lie either: the app declares ``progress_weight`` ``W`` in its
  submission (0 depth first, 1 the default, above 1 breadth first): the strategy an honest
  app has, beside which the experiment measures every lie. ``order:F`` is ``weight:1/F``
  told to the app's scheduler instead of written into the submission; ``weight`` also
  reaches 0, which no ``order:F`` does.
- ``stagger:S`` is ``split:2`` with the second part submitted ``S`` seconds after the first:
  a split that does not look like one submission (with ``split:K`` too, each part ``S``
  seconds after the one before). Its completion runs from the first part's arrival.

A *coalition* is several lies at once (``--misreport`` repeated). ``work`` and
``placement`` lies are declarations and ``order`` a strategy of the app's own scheduler
(the simulator's :class:`Conditions` carries them);
``gang``, ``ask``, ``split`` and ``stagger`` change what is submitted (:func:`apply_lies`
rewrites the workload).
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from themis.errors import ThemisError
from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, Workload

T = TypeVar("T")

#: The kinds of lie, in the order the experiment lists them.
LIE_KINDS = ("work", "placement", "gang", "ask", "split", "stagger", "order", "weight")
#: The kinds that are an honest app's own strategy, not a lie: the liar's best truthful run
#: is the best of its honest run and these (``over_best_honest`` of the experiment).
TRUTHFUL_KINDS = ("order", "weight")
#: The kinds that submit an app as several apps (``app~1``...), complete with the last part.
PARTING_KINDS = ("split", "stagger")
#: Lie told by two apps together in ``themis experiment truthfulness`` (a coalition).
PAIR = "pair:"
#: The lies ``themis experiment truthfulness`` measures by default: each kind, both
#: directions where there are two.
DEFAULT_LIES = (
    "work:0.5",
    "work:2",
    "placement:flat",
    "placement:sensitive",
    "gang:0.5",
    "ask:2",
    "split:2",
    "pair:work:0.5",
)
#: Who lies by default: the app arriving in the middle, the two worst-off apps of the
#: first policy's honest run, and the first multi-GPU app of a VGG model.
DEFAULT_LIARS = ("middle", "worst:2", "vgg-gang")
#: The contexts of ``themis experiment truthfulness`` (``experiments/truthfulness.py``).
#: The estimate error every app's declarations carry in a context (``contexts`` > 1) when
#: the run states none: as small as a declaration is ever exact to.
CONTEXT_ERROR = 0.01
#: The most an app's arrival is delayed in a context (``contexts`` > 1), in seconds: a
#: tenth of the default lease, enough to meet the lease cycle at another point, too little
#: to change what the workload is.
CONTEXT_JITTER = 60.0
#: The contexts ``themis experiment truthfulness`` runs by default: the fewest that tell a
#: lie that gains in most contexts from one that gained once.
DEFAULT_CONTEXTS = 4
#: The lie that changes nothing material: 1% more declared work, inside any estimate's
#: error. Its gains are the noise floor of a table.
PLACEBO = "work:1.01"
PLACEMENT_CLAIMS = ("flat", "sensitive")
#: Separates a split app's id from its part number (``app~2``): a character no trace
#: format puts in an app id here.
PART_MARK = "~"


@dataclass(frozen=True)
class Lie:
    """One app's lie: ``kind`` with ``value`` (a factor, a part count or a claim)."""

    app_id: str
    kind: str
    value: float | str

    def __post_init__(self) -> None:
        check_lie(self.kind, self.value)

    @property
    def text(self) -> str:
        """``KIND:VALUE``, as the command line takes it."""
        return f"{self.kind}:{_value_text(self.value)}"


def _value_text(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def check_lie(kind: str, value: float | str) -> None:
    """A clear error for a lie that cannot be told."""
    where = "--misreport"
    if kind not in LIE_KINDS:
        raise ThemisError(
            f"unknown kind of lie '{kind}' (known: {', '.join(LIE_KINDS)})", field=where
        )
    if kind == "placement":
        if value not in PLACEMENT_CLAIMS:
            raise ThemisError(
                f"placement claims are {' or '.join(PLACEMENT_CLAIMS)}, got '{value}'", field=where
            )
        return
    if kind == "weight":
        if isinstance(value, str) or not (math.isfinite(value) and value >= 0):
            raise ThemisError(
                f"weight: the progress_weight must be a number >= 0, got {value}", field=where
            )
        if value == 1.0:
            raise ThemisError("weight:1 is the default order, not a strategy", field=where)
        return
    if isinstance(value, str) or not (math.isfinite(value) and value > 0):
        raise ThemisError(f"{kind}: the value must be a number > 0, got {value}", field=where)
    if kind in ("work", "gang", "ask", "order") and value == 1.0:
        raise ThemisError(f"{kind}:1 is the truth, not a lie", field=where)
    if kind == "split" and (value != int(value) or value < 2):
        raise ThemisError(
            f"split: the part count must be an integer >= 2, got {value:g}", field=where
        )


def parse_lie_value(kind: str, text: str) -> float | str:
    if kind == "placement":
        return text.strip()
    try:
        return float(text)
    except ValueError:
        raise ThemisError(f"'{text}' is not a number", field="--misreport") from None


def parse_lie(item: str) -> Lie:
    """``APP=KIND:VALUE`` (or ``APP=FACTOR``, a lie about work, as before kinds existed)."""
    app_id, sep, text = item.partition("=")
    app_id = app_id.strip()
    if not sep or not app_id:
        raise ThemisError(
            f"'{item}' is not APP=KIND:VALUE (e.g. app3=work:2, app3=split:2)", field="--misreport"
        )
    kind, colon, value = text.partition(":")
    if not colon:
        kind, value = "work", text
    kind = kind.strip()
    return Lie(app_id, kind, parse_lie_value(kind, value))


def parse_lies(items: Sequence[str]) -> tuple[Lie, ...]:
    """Every ``--misreport``; an app may tell one lie of each kind."""
    lies = tuple(parse_lie(item) for item in items)
    seen: set[tuple[str, str]] = set()
    for lie in lies:
        if (lie.app_id, lie.kind) in seen:
            raise ThemisError(
                f"app '{lie.app_id}' tells two lies of kind '{lie.kind}'", field="--misreport"
            )
        seen.add((lie.app_id, lie.kind))
    return lies


def claimed_profile(
    true: ModelProfile, claim: str, profiles: Sequence[ModelProfile]
) -> ModelProfile:
    """The profile an app claims: its own iteration times with the placement factors of
    ``claim`` ("flat": none lost across machines; "sensitive": the most sensitive model's
    of ``profiles``)."""
    if claim == "flat":
        return replace(true, cross_machine=1.0, cross_rack=1.0)
    if claim == "sensitive":
        return replace(
            true,
            cross_machine=min(p.cross_machine for p in profiles),
            cross_rack=min(p.cross_rack for p in profiles),
        )
    raise ThemisError(f"unknown placement claim '{claim}'", field="--misreport")


@dataclass(frozen=True)
class Submitted:
    """A workload as the liars submitted it, and which submitted apps each liar is."""

    workload: Workload
    #: Each liar's submitted apps (its parts after a split, else itself).
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)


def apply_lies(workload: Workload, lies: Sequence[Lie], max_gang: int) -> Submitted:
    """The workload with every ``gang``, ``ask``, ``split``, ``stagger`` and ``weight``
    made (the others are declarations, told to the simulator); lies about apps the workload
    lacks are errors."""
    known = {a.app_id for a in workload.apps}
    for lie in lies:
        if lie.app_id not in known:
            raise ThemisError(f"no app '{lie.app_id}' in the workload", field="--misreport")
    by_app: dict[str, list[Lie]] = {}
    for lie in lies:
        by_app.setdefault(lie.app_id, []).append(lie)
    apps: list[AppSpec] = []
    parts: dict[str, tuple[str, ...]] = {}
    curves = dict(workload.curves)
    for app in workload.apps:
        told = {lie.kind: lie.value for lie in by_app.get(app.app_id, ())}
        if "weight" in told:
            app = replace(app, progress_weight=float(told["weight"]))
        if "gang" in told:
            app = resize_gangs(app, float(told["gang"]), max_gang)
        if "ask" in told:
            app = resize_gangs(app, float(told["ask"]), max_gang, same_duration=True)
        if any(kind in told for kind in PARTING_KINDS):
            count = int(told.get("split", 2))
            pieces = split_app(app, count, float(told.get("stagger", 0.0)))
        else:
            pieces = [app]
        if len(pieces) > 1:  # each part's search keeps its trials' loss curves
            for piece in pieces:
                for job in piece.jobs:
                    curve = workload.curves.get((app.app_id, job.job_id))
                    if curve is not None:
                        curves[(piece.app_id, job.job_id)] = curve
        apps.extend(pieces)
        if app.app_id in by_app:
            parts[app.app_id] = tuple(p.app_id for p in pieces)
    unchanged = len(apps) == len(workload.apps) and all(
        a is b for a, b in zip(apps, workload.apps, strict=True)
    )
    rewritten = workload if unchanged else replace(workload, apps=tuple(apps))
    if len(curves) != len(workload.curves):
        rewritten = replace(rewritten, curves=curves)
    return Submitted(rewritten, parts)


@dataclass(frozen=True)
class Declarations:
    """The lies the simulator is told rather than shown (the fields of ``Conditions`` of
    the same names): (app, work factor), (app, placement claim), (app, order factor)."""

    misreport: tuple[tuple[str, float], ...]
    claims: tuple[tuple[str, str], ...]
    orders: tuple[tuple[str, float], ...]


def declarations(lies: Sequence[Lie]) -> Declarations:
    """The lies of ``lies`` that are declarations or app-side strategies, not rewrites
    of what is submitted."""
    return Declarations(
        misreport=tuple((x.app_id, float(x.value)) for x in lies if x.kind == "work"),
        claims=tuple((x.app_id, str(x.value)) for x in lies if x.kind == "placement"),
        orders=tuple((x.app_id, float(x.value)) for x in lies if x.kind == "order"),
    )


def resize_gangs(
    app: AppSpec, factor: float, max_gang: int, same_duration: bool = False
) -> AppSpec:
    """Every trial on ``factor`` times its gang (rounded, 1..``max_gang``): the same
    iterations (so the same GPU-time), or with ``same_duration`` the iterations scaled by
    the gang's ratio (the same duration on the best placement: the extra GPUs idle)."""
    jobs = []
    ratio = 1.0
    for j in app.jobs:
        gang = min(max_gang, max(1, round(j.gang * factor)))
        if same_duration:
            ratio = gang / j.gang
        jobs.append(replace(j, gang=gang, work=j.work * ratio if same_duration else j.work))
    search = app.search
    if search is not None and same_duration and app.jobs:
        # the trials share one budget and gang: rungs stay at the same fractions of it
        search = replace(search, min_work=search.min_work * ratio)
    return replace(app, jobs=tuple(jobs), search=search)


def split_app(app: AppSpec, parts: int, stagger: float = 0.0) -> list[AppSpec]:
    """``app`` as ``parts`` apps (at most one per trial), trials dealt round-robin in
    submission order, each part arriving ``stagger`` seconds after the one before (0:
    together). The parts keep the app's owner (or have the app as their owner): a tenant
    that splits is still one tenant (``fairness/shares.py``)."""
    parts = min(parts, len(app.jobs))
    if parts <= 1:
        return [app]
    return [
        replace(
            app,
            app_id=f"{app.app_id}{PART_MARK}{k + 1}",
            arrival=app.arrival + k * stagger,
            jobs=app.jobs[k::parts],
            owner=app.tenant,
        )
        for k in range(parts)
    ]


def liar_of(app_id: str, liars: Container[str]) -> str | None:
    """Which of ``liars`` submitted app ``app_id``: itself, or the app it is a part of
    after a split (``app~2``)."""
    if app_id in liars:
        return app_id
    whole, mark, _ = app_id.rpartition(PART_MARK)
    return whole if mark and whole in liars else None


def by_submitted_app(told: Sequence[tuple[str, T]], submitted: Iterable[str]) -> dict[str, T]:
    """``told`` (liar, value) for each submitted app: a split liar's value holds for each
    of its parts. Raises for a liar that submitted nothing."""
    values = dict(told)
    out: dict[str, T] = {}
    found: set[str] = set()
    for app_id in submitted:
        liar = liar_of(app_id, values)
        if liar is not None:
            out[app_id] = values[liar]
            found.add(liar)
    missing = [liar for liar in values if liar not in found]
    if missing:
        raise ThemisError(f"no app '{missing[0]}' in the workload", field="--misreport")
    return out
