"""The ``tuner:`` section of an app file: a study declared as data.

An app may be driven by a tuner of the user's (Optuna) instead of the app file's own
search space and successive halving::

    tuner:
      kind: optuna
      direction: minimize                       # or maximize
      sampler: {TPESampler: {seed: 0}}          # a name, or {name: {keyword: value}}
      pruner: {MedianPruner: {n_warmup_steps: 5}}
      metric: loss                              # the name intermediate values get
      study_name: mlp                           # optional: the app's name by default
      storage: sqlite:///mlp-study.db           # optional: an Optuna RDB URL

Why data and not objects: the arbiter never runs, imports or unpickles tenant code
(``docs/runtime.md``, threat model), so the sampler and the pruner are named and their
keyword arguments are plain values. The study is built and driven (ask, report, prune,
tell) by ``workers/optuna_trial.py`` inside each trial's own process, under the trial's
lease, with the study's storage shared between them as Optuna's distributed
optimisation does; the arbiter only sees the trial's steps and how it ended.

Only names from the lists below are accepted, so that what ``status`` shows of the tuner
(its kind, sampler and pruner) is words of ours, never a tenant's text. The storage URL
may carry a password: it is kept in the app's spec (which only the admin and the app's
own token read) and never shown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from themis.errors import ThemisError

#: Tuners an app may name.
KINDS = ("optuna", "ray-tune")
#: Ray Tune's searchers (``ray.tune.search``) built from ``space``, ``metric`` and
#: ``mode``; all but OptunaSearch need their own package installed in the trials.
SEARCHERS = (
    "OptunaSearch",
    "HyperOptSearch",
    "BayesOptSearch",
    "HEBOSearch",
    "AxSearch",
)
#: Ray Tune's trial schedulers whose decisions need nothing but a trial's id and its
#: results (``on_trial_add``, ``on_trial_result``, ``on_trial_complete``): ASHA. The
#: synchronous HyperBand and the median stopping rule ask Tune's controller for its
#: live trials, which exist only inside ``Tuner.fit``.
SCHEDULERS = ("ASHAScheduler", "AsyncHyperBandScheduler", "FIFOScheduler")
#: A Ray Tune search space as data: ``{name: {kind: arguments}}``.
SPACE_KINDS = ("uniform", "loguniform", "randint", "choice", "quniform")
MODES = ("min", "max")
#: Optuna's single-objective samplers (``optuna.samplers``).
SAMPLERS = (
    "TPESampler",
    "RandomSampler",
    "CmaEsSampler",
    "GPSampler",
    "QMCSampler",
    "GridSampler",
    "BruteForceSampler",
    "NSGAIISampler",
)
#: Optuna's pruners (``optuna.pruners``) that take plain values.
PRUNERS = (
    "MedianPruner",
    "PercentilePruner",
    "SuccessiveHalvingPruner",
    "HyperbandPruner",
    "ThresholdPruner",
    "WilcoxonPruner",
    "NopPruner",
)
DIRECTIONS = ("minimize", "maximize")
_FIELDS = ("kind", "direction", "sampler", "pruner", "metric", "study_name", "storage")
_TUNE_FIELDS = ("kind", "searcher", "scheduler", "space", "metric", "mode")
_NAME_RE = re.compile(r"^[A-Za-z_]\w{0,63}$")
_STUDY_RE = re.compile(r"^[\w.-]{1,128}$")
#: Bounds of what a keyword argument may hold: real ones are a few numbers.
MAX_KWARGS = 16
MAX_LIST = 256
MAX_STRING = 256
MAX_URL = 2048


@dataclass(frozen=True)
class TunerSpec:
    """A study declared in an app file (see the module's docstring)."""

    kind: str
    direction: str
    sampler: str
    pruner: str
    sampler_args: dict[str, Any] = field(default_factory=dict)
    pruner_args: dict[str, Any] = field(default_factory=dict)
    metric: str = "value"
    study_name: str = ""
    storage: str | None = None  # None: a SQLite file in the app's storage directory
    #: Ray Tune's search space as data (``SPACE_KINDS``); empty for Optuna, whose
    #: objective suggests its own parameters.
    space: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """What ``status`` and the dashboard show: names from our lists only."""
        return f"{self.kind} {self.sampler}/{self.pruner}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "direction": self.direction,
            "sampler": self.sampler,
            "pruner": self.pruner,
            "sampler_args": dict(self.sampler_args),
            "pruner_args": dict(self.pruner_args),
            "metric": self.metric,
            "study_name": self.study_name,
            "storage": self.storage,
            "space": dict(self.space),
            "label": self.label,  # read by the store's status query (json_extract)
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TunerSpec:
        """Inverse of :meth:`to_dict` (for what the store kept; not for user input)."""
        return cls(
            raw["kind"],
            raw["direction"],
            raw["sampler"],
            raw["pruner"],
            dict(raw.get("sampler_args") or {}),
            dict(raw.get("pruner_args") or {}),
            raw.get("metric", "value"),
            raw.get("study_name", ""),
            raw.get("storage"),
            dict(raw.get("space") or {}),
        )


def parse_tuner(raw: Any, app_name: str, source: str) -> TunerSpec:
    """Check an app file's ``tuner`` mapping; every refusal names its field."""

    def fail(key: str, message: str) -> ThemisError:
        return ThemisError(message, source=source, field=f"tuner.{key}" if key else "tuner")

    if not isinstance(raw, dict):
        raise fail("", f"must be a mapping (known fields: {', '.join(_FIELDS)})")
    if raw.get("kind") == "ray-tune":
        return _parse_tune(raw, fail)
    for key in raw:
        if key not in _FIELDS:
            raise fail(str(key)[:40], f"unknown field (known: {', '.join(_FIELDS)})")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise fail("kind", f"must be one of {', '.join(KINDS)}, got {_short(kind)}")
    direction = raw.get("direction", "minimize")
    if direction not in DIRECTIONS:
        raise fail("direction", f"must be minimize or maximize, got {_short(direction)}")
    sampler, sampler_args = _named(raw.get("sampler", "TPESampler"), SAMPLERS, "sampler", fail)
    pruner, pruner_args = _named(raw.get("pruner", "MedianPruner"), PRUNERS, "pruner", fail)
    metric = raw.get("metric", "value")
    if not isinstance(metric, str) or not _NAME_RE.fullmatch(metric):
        raise fail("metric", f"must be an identifier, got {_short(metric)}")
    study_name = raw.get("study_name", app_name)
    if not isinstance(study_name, str) or not _STUDY_RE.fullmatch(study_name):
        raise fail("study_name", "must be 1-128 letters, digits, '.', '-' or '_'")
    storage = raw.get("storage")
    if storage is not None and (
        not isinstance(storage, str)
        or not storage.isprintable()
        or len(storage) > MAX_URL
        or "://" not in storage
    ):
        raise fail("storage", "must be an Optuna RDB URL (e.g. sqlite:///study.db)")
    return TunerSpec(
        kind, direction, sampler, pruner, sampler_args, pruner_args, metric, study_name, storage
    )


def _parse_tune(raw: dict[str, Any], fail: Any) -> TunerSpec:
    """A Ray Tune search: ``searcher`` and ``scheduler`` by name, ``space`` as data, the
    ``metric`` both read and its ``mode``. Kept in the same record as a study: the
    searcher in ``sampler``, the scheduler in ``pruner``, the mode as a direction."""
    for key in raw:
        if key not in _TUNE_FIELDS:
            raise fail(str(key)[:40], f"unknown field (known: {', '.join(_TUNE_FIELDS)})")
    searcher, searcher_args = _named(
        raw.get("searcher", "OptunaSearch"), SEARCHERS, "searcher", fail
    )
    scheduler, scheduler_args = _named(
        raw.get("scheduler", "FIFOScheduler"), SCHEDULERS, "scheduler", fail
    )
    metric = raw.get("metric")
    if not isinstance(metric, str) or not _NAME_RE.fullmatch(metric):
        raise fail("metric", f"must be the name of a reported metric, got {_short(metric)}")
    mode = raw.get("mode", "min")
    if mode not in MODES:
        raise fail("mode", f"must be min or max, got {_short(mode)}")
    space = raw.get("space")
    if not isinstance(space, dict) or not space or len(space) > MAX_KWARGS * 2:
        raise fail("space", f"must map 1 to {MAX_KWARGS * 2} parameters to their draws")
    for name, draw in space.items():
        where = f"space.{str(name)[:40]}"
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise fail(where, "must be an identifier")
        if not isinstance(draw, dict) or len(draw) != 1 or next(iter(draw)) not in SPACE_KINDS:
            raise fail(where, f"must be {{kind: arguments}}, kind one of {', '.join(SPACE_KINDS)}")
        kind, args = next(iter(draw.items()))
        if not isinstance(args, list) or not args:
            raise fail(where, f"{kind} needs a list of arguments")
        _check_value(args, where, fail, depth=1)
    direction = "minimize" if mode == "min" else "maximize"
    return TunerSpec(
        "ray-tune",
        direction,
        searcher,
        scheduler,
        searcher_args,
        scheduler_args,
        metric,
        "",
        None,
        dict(space),
    )


def _named(raw: Any, known: tuple[str, ...], key: str, fail: Any) -> tuple[str, dict[str, Any]]:
    """A sampler or pruner: ``Name`` or ``{Name: {keyword: value}}``."""
    args: Any = {}
    if isinstance(raw, dict) and len(raw) == 1:
        raw, args = next(iter(raw.items()))
        args = {} if args is None else args
    if raw not in known:
        raise fail(key, f"must be one of {', '.join(known)}, got {_short(raw)}")
    if not isinstance(args, dict) or len(args) > MAX_KWARGS:
        raise fail(key, f"{raw}'s arguments must be a mapping of at most {MAX_KWARGS} keywords")
    for name, value in args.items():
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise fail(f"{key}.{raw}", f"keyword {_short(name)} is not an identifier")
        _check_value(value, f"{key}.{raw}.{name}", fail, depth=0)
    return raw, dict(args)


def _check_value(value: Any, where: str, fail: Any, depth: int) -> None:
    """A keyword's value: a finite number, a short string, a boolean, None, or a short
    list or mapping of those (a grid's search space) two levels deep at most."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or abs(value) > 2**53:
            raise fail(where, f"must be a finite number of at most 2**53, got {_short(value)}")
        return
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise fail(where, f"a string is at most {MAX_STRING} characters")
        return
    if depth < 2 and isinstance(value, list) and len(value) <= MAX_LIST:
        for item in value:
            _check_value(item, where, fail, depth + 1)
        return
    if depth < 2 and isinstance(value, dict) and len(value) <= MAX_KWARGS:
        for name, item in value.items():
            if not isinstance(name, str) or len(name) > MAX_STRING:
                raise fail(where, "keys must be short strings")
            _check_value(item, where, fail, depth + 1)
        return
    raise fail(where, f"must be plain data (numbers, strings, lists), got {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
