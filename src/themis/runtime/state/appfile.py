"""Reader of ``app.yaml``: what one submitted app (a hyperparameter sweep) asks for.

Format (``docs/runtime.md`` has the long version)::

    name: mlp-sweep                 # the app id: letters, digits, '-', '_' (max 64)
    entrypoint: mlp:train           # module:function, imported on the job's node
    trials: 8                       # how many configurations to train
    gpus_per_trial: 1               # rigid gang of every trial
    steps: 200                      # step budget of every trial
    step_time: 0.05                 # estimated seconds per step, gang in one machine
    search_space:                   # a list is a choice (grid, cycled); a mapping a draw
      lr: {loguniform: [0.001, 0.3]}
      hidden: [16, 32, 64]
    early_stopping:                 # optional: successive halving
      rule: successive_halving
      metric: loss
      mode: min                     # or max
      eta: 2                        # keep the best 1/eta at each rung
      min_steps: 20                 # first rung; then min_steps * eta^k
    placement: {cross_machine: 1.0, cross_rack: 1.0}   # optional slowdowns (<= 1)
    checkpoint_every: 20            # optional: steps between periodic checkpoints
    ranks: gpu                      # optional: one process per GPU of the gang (gpu,
                                    # the default) or per machine (node)
    progress_weight: 1              # optional: the sweep's own trial order; 0 runs its
                                    # first trials to the end first (fewest restarts)
    seed: 0                         # optional: seed of the search-space draws
    workdir: .                      # optional: where the module lives (default: the
                                    # file's folder)
    tuner: {kind: optuna, ...}      # optional: a study draws and prunes instead of
                                    # search_space and early_stopping (state/tuner.py)

Every field is checked before anything is submitted; the first problem is raised as a
:class:`ThemisError` naming the file and the field (``early_stopping.eta``), so that the
CLI prints one line. Trial configurations are drawn here, once, so that a restarted
arbiter and every node see the same ones.

The file comes from users the arbiter does not trust, so what it may cost is bounded
before it is parsed: at most ``MAX_APP_BYTES`` (checked before reading), no YAML anchors
or aliases (a 500-byte "billion laughs" file otherwise expands to gigabytes), at most
``MAX_DEPTH`` levels of nesting, and bounded trials and search space. Each refusal takes
milliseconds.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themis.errors import ThemisError
from themis.runtime.state.tuner import TunerSpec, parse_tuner

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_ENTRY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_PARAM_RE = re.compile(r"^[A-Za-z_]\w*$")
_FIELDS = frozenset(
    {
        "name",
        "entrypoint",
        "trials",
        "gpus_per_trial",
        "steps",
        "step_time",
        "search_space",
        "early_stopping",
        "placement",
        "checkpoint_every",
        "ranks",
        "progress_weight",
        "seed",
        "workdir",
        "tuner",
    }
)
_DISTRIBUTIONS = ("uniform", "loguniform", "randint")
#: How a gang's processes are laid out: one per GPU (as torchrun does), or one per machine.
RANKS = ("gpu", "node")
#: Largest ``progress_weight``: beyond a few, every weight gives the same order.
MAX_PROGRESS_WEIGHT = 100.0
#: Largest app file accepted: real ones are a few hundred bytes.
MAX_APP_BYTES = 64 * 1024
#: Deepest nesting of YAML collections accepted (real files use 3).
MAX_DEPTH = 16
#: Most trials per app, parameters per search space, choices per parameter, and
#: characters per string value: they bound what one app stores and schedules.
MAX_TRIALS = 1000
MAX_PARAMS = 32
MAX_CHOICES = 256
MAX_STRING = 256
#: Bounds of every number of an app file. Python reads integers of any size and SQLite
#: stores 64 bits: an unbounded ``steps`` once stopped the arbiter, so each
#: field has a bound far above any real app and far below what breaks the arithmetic.
MAX_STEPS = 10**12  # steps, min_steps, checkpoint_every
MAX_GPUS_PER_TRIAL = 4096
MAX_ETA = 1024
MAX_SEED = 2**63 - 1
MAX_STEP_TIME = 1e6  # seconds (11.6 days per step)
#: Smallest step time and placement factor: below them a rate or a rho is infinite.
MIN_STEP_TIME = 1e-6
MIN_PLACEMENT = 1e-3
#: Largest magnitude of a number in the search space: integers stay exact in JSON (2**53)
#: and a draw's range ``high - low`` stays finite.
MAX_SEARCH_NUMBER = 2**53
#: Periodic checkpoints by default: a crash loses at most this many steps of work.
DEFAULT_CHECKPOINT_EVERY = 20


@dataclass(frozen=True)
class Halving:
    """Successive halving: at each rung (``min_steps * eta**k`` steps) keep the best
    ``ceil(n / eta)`` of the ``n`` trials that reached it (see ``runtime.halving``)."""

    metric: str
    mode: str  # "min" or "max"
    eta: int
    min_steps: int

    def rungs(self, budget: int) -> list[int]:
        """Rung step counts below the step budget, ascending."""
        out = []
        step = self.min_steps
        while step < budget:
            out.append(step)
            step *= self.eta
        return out


@dataclass(frozen=True)
class AppFile:
    name: str
    entrypoint: str
    trials: int
    gpus_per_trial: int
    steps: int
    step_time: float
    configs: tuple[dict[str, Any], ...]  # one per trial, drawn from the search space
    halving: Halving | None
    cross_machine: float
    cross_rack: float
    checkpoint_every: int
    seed: int
    workdir: str  # absolute
    ranks: str = "gpu"  # one process (rank) per GPU of the gang, or per machine ("node")
    #: The app's own trial order (``AppSpec.progress_weight``): 0 runs the first trials to
    #: the end before the others start (fewest restarts); above 0, least made first.
    progress_weight: float = 1.0
    #: A study of the user's tuner that asks the trials' configurations and prunes them
    #: (``state/tuner.py``); None: the search space and successive halving above.
    tuner: TunerSpec | None = None

    def to_dict(self) -> dict[str, Any]:
        """The resolved app, as stored: configs drawn, workdir absolute."""
        return {
            "name": self.name,
            "entrypoint": self.entrypoint,
            "trials": self.trials,
            "gpus_per_trial": self.gpus_per_trial,
            "steps": self.steps,
            "step_time": self.step_time,
            "configs": [dict(c) for c in self.configs],
            "halving": None if self.halving is None else vars(self.halving).copy(),
            "cross_machine": self.cross_machine,
            "cross_rack": self.cross_rack,
            "checkpoint_every": self.checkpoint_every,
            "seed": self.seed,
            "workdir": self.workdir,
            "ranks": self.ranks,
            "progress_weight": self.progress_weight,
            "tuner": None if self.tuner is None else self.tuner.to_dict(),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> AppFile:
        """Inverse of :meth:`to_dict` (for what the store kept; not for user input)."""
        halving = raw["halving"]
        tuner = raw.get("tuner")  # apps stored before the field have none
        return cls(
            raw["name"],
            raw["entrypoint"],
            raw["trials"],
            raw["gpus_per_trial"],
            raw["steps"],
            raw["step_time"],
            tuple(dict(c) for c in raw["configs"]),
            None if halving is None else Halving(**halving),
            raw["cross_machine"],
            raw["cross_rack"],
            raw["checkpoint_every"],
            raw["seed"],
            raw["workdir"],
            raw.get("ranks", "gpu"),  # apps stored before the field: one rank per GPU
            raw.get("progress_weight", 1.0),
            None if tuner is None else TunerSpec.from_dict(tuner),
        )


class _Fields:
    """Typed reads of one mapping, each failure naming its field."""

    def __init__(self, raw: dict[str, Any], source: str, prefix: str = "") -> None:
        self.raw = raw
        self.source = source
        self.prefix = prefix

    def fail(self, key: str, message: str) -> ThemisError:
        return ThemisError(message, source=self.source, field=f"{self.prefix}{key}")

    def get(self, key: str, default: Any = ...) -> Any:
        if key not in self.raw or self.raw[key] is None:
            if default is ...:
                raise self.fail(key, "is required")
            return default
        return self.raw[key]

    def integer(self, key: str, default: Any = ..., minimum: int = 1, maximum: int = 0) -> int:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {_short(value)}")
        if value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {_short(value)}")
        if value > maximum:
            raise self.fail(key, f"must be at most {maximum}, got {_short(value)}")
        return value

    def number(
        self,
        key: str,
        default: Any = ...,
        minimum: float = 0.0,
        maximum: float = 1.0,
        positive: bool = True,
    ) -> float:
        """A finite number in ``[minimum, maximum]``, and above 0 if ``positive``."""
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"must be a number, got {_short(value)}")
        if isinstance(value, int) and value > maximum:
            raise self.fail(key, f"must be at most {maximum:g}, got {_short(value)}")
        if not math.isfinite(value) or (positive and value <= 0):
            above = " > 0" if positive else ""
            raise self.fail(key, f"must be a finite number{above}, got {value}")
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum:g}, got {value:g}")
        if value > maximum:
            raise self.fail(key, f"must be at most {maximum:g}, got {value:g}")
        return float(value)

    def string(self, key: str, pattern: re.Pattern[str], what: str, default: Any = ...) -> str:
        value = self.get(key, default)
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise self.fail(key, f"must be {what}, got {value!r}")
        return value

    def mapping(self, key: str, default: Any = ...) -> dict[str, Any]:
        value = self.get(key, default)
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a mapping, got {type(value).__name__}")
        return value


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader without anchors and aliases, and with a depth limit."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused("YAML anchors and aliases are not allowed", event.start_mark.line)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep", event.start_mark.line)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are unique: YAML lets the last of two win silently."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: SafeLoader refuses it below
                continue
            if duplicate:
                raise _Refused(f"duplicate key {_short(key)}", key_node.start_mark.line)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


class _Refused(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line + 1


def read_app_text(path: str | Path) -> str:
    """The text of an app file, refused unread when larger than ``MAX_APP_BYTES``."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_APP_BYTES:
                raise _too_big(size, source)
            data = f.read(MAX_APP_BYTES + 1)
    except OSError as exc:
        raise ThemisError(f"cannot read app file: {exc.strerror}", source=source) from None
    if len(data) > MAX_APP_BYTES:  # grew while read, or not a regular file
        raise _too_big(len(data), source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ThemisError("not a UTF-8 text file", source=source) from None


def _too_big(size: int, source: str) -> ThemisError:
    return ThemisError(
        f"the app file is {size / 2**20:.1f} MiB; at most {MAX_APP_BYTES // 1024} KiB",
        source=source,
    )


def load_app_file(path: str | Path) -> AppFile:
    """Read and check an ``app.yaml``."""
    return parse_app_text(read_app_text(path), str(path), Path(path).resolve().parent)


def parse_app_text(text: str, source: str, base_dir: Path) -> AppFile:
    """Check an app file's text (as the arbiter's API receives it)."""
    if len(text.encode("utf-8")) > MAX_APP_BYTES:
        raise _too_big(len(text.encode("utf-8")), source)
    try:
        # A SafeLoader subclass (bandit and ruff see only the name yaml.load).
        raw = yaml.load(text, Loader=_BoundedLoader)  # noqa: S506  # nosec B506
    except _Refused as exc:
        raise ThemisError(exc.message, source=source, line=exc.line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise ThemisError(f"invalid YAML: {problem}", source=source, line=line) from None
    return parse_app(raw, source, base_dir)


#: Where a ``workdir`` may never lead: the kernel's views of processes, devices and
#: itself (``/proc/self/fd/N`` is the server's own open files; ``/proc/1/root`` another
#: process's root), whether written so or reached through a link.
FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")
#: The longest ``workdir`` accepted.
MAX_WORKDIR = 4096


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)


def resolve_workdir(raw: str, base_dir: Path, f: Any) -> Path:
    """The app's ``workdir``, resolved on the server: a directory serve may read, never
    under ``/proc``, ``/sys`` or ``/dev`` (as written or once links are followed). Every
    refusal quotes only what the user wrote: the server's own paths, file descriptors
    and process ids stay out of the answer, and no failure of the file system becomes
    a server error."""
    shown = repr(raw[:200])
    if not raw or len(raw) > MAX_WORKDIR or "\0" in raw:
        raise f.fail("workdir", f"must be a directory path, got {shown}")
    lexical = os.path.normpath(os.path.join(str(base_dir), raw))
    refused = f"{shown} is not allowed: the app's code must live in a directory of its own"
    if _under(lexical, FORBIDDEN_ROOTS):
        raise f.fail("workdir", refused)
    try:
        resolved = Path(lexical).resolve(strict=True)
        readable = resolved.is_dir() and os.access(resolved, os.R_OK | os.X_OK)
    except (OSError, RuntimeError, ValueError):  # a loop of links, a permission, ...
        readable = False
        resolved = Path(lexical)
    if _under(str(resolved), FORBIDDEN_ROOTS):
        raise f.fail("workdir", refused)
    if not readable:
        raise f.fail("workdir", f"{shown} is not a directory the arbiter can read")
    return resolved


def parse_app(raw: Any, source: str, base_dir: Path) -> AppFile:
    """Check a parsed app file; ``base_dir`` resolves a relative ``workdir``."""
    if not isinstance(raw, dict):
        raise ThemisError("expected a mapping of fields (name, entrypoint, ...)", source=source)
    for key in raw:
        if key not in _FIELDS:
            known = ", ".join(sorted(_FIELDS))
            raise ThemisError(f"unknown field (known: {known})", source=source, field=_key(key))
    f = _Fields(raw, source)
    name = f.string("name", _NAME_RE, "letters, digits, '-' or '_' (at most 64)")
    entrypoint = f.string("entrypoint", _ENTRY_RE, "'module:function'")
    trials = f.integer("trials", maximum=MAX_TRIALS)
    gpus = f.integer("gpus_per_trial", maximum=MAX_GPUS_PER_TRIAL)
    steps = f.integer("steps", maximum=MAX_STEPS)
    step_time = f.number("step_time", minimum=MIN_STEP_TIME, maximum=MAX_STEP_TIME)
    seed = f.integer("seed", 0, minimum=0, maximum=MAX_SEED)
    checkpoint_every = f.integer("checkpoint_every", DEFAULT_CHECKPOINT_EVERY, maximum=MAX_STEPS)
    configs = _draw_configs(f.mapping("search_space", {}), trials, seed, source)
    halving = _halving(f, source)
    placement = _Fields(f.mapping("placement", {}), source, "placement.")
    for key in placement.raw:
        if key not in ("cross_machine", "cross_rack"):
            raise placement.fail(_key(key), "unknown field (known: cross_machine, cross_rack)")
    cross_machine = placement.number("cross_machine", 1.0, minimum=MIN_PLACEMENT)
    cross_rack = placement.number("cross_rack", cross_machine, minimum=MIN_PLACEMENT)
    ranks = f.get("ranks", "gpu")
    if ranks not in RANKS:
        raise f.fail("ranks", f"one of {', '.join(RANKS)}, got {ranks!r}")
    weight = f.number(
        "progress_weight", 1.0, minimum=0.0, maximum=MAX_PROGRESS_WEIGHT, positive=False
    )
    workdir_raw = f.get("workdir", ".")
    if not isinstance(workdir_raw, str):
        raise f.fail("workdir", f"must be a path, got {workdir_raw!r}")
    workdir = resolve_workdir(workdir_raw, base_dir, f)
    tuner = _tuner(f, name, gpus, halving is not None, bool(raw.get("search_space")))
    return AppFile(
        name,
        entrypoint,
        trials,
        gpus,
        steps,
        step_time,
        configs,
        halving,
        cross_machine,
        cross_rack,
        checkpoint_every,
        seed,
        str(workdir),
        ranks,
        weight,
        tuner,
    )


def _tuner(f: _Fields, name: str, gpus: int, halving: bool, search_space: bool) -> TunerSpec | None:
    """The ``tuner`` section, which replaces the search space and the halving: the
    tuner's sampler draws the configurations and its pruner stops trials."""
    raw = f.get("tuner", None)
    if raw is None:
        return None
    if search_space:
        raise f.fail("search_space", "a tuner app draws its configurations: leave it out")
    if halving:
        raise f.fail("early_stopping", "a tuner app is pruned by its tuner: leave it out")
    if gpus != 1:
        # One process drives one tuner trial; the ranks of a gang would each ask the
        # study for a trial of their own.
        raise f.fail("gpus_per_trial", f"a tuner app runs 1 GPU per trial, got {gpus}")
    return parse_tuner(raw, name, f.source)


def _halving(f: _Fields, source: str) -> Halving | None:
    raw = f.get("early_stopping", None)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise f.fail("early_stopping", "must be a mapping (rule, metric, mode, eta, min_steps)")
    h = _Fields(raw, source, "early_stopping.")
    for key in raw:
        if key not in ("rule", "metric", "mode", "eta", "min_steps"):
            raise h.fail(_key(key), "unknown field (known: rule, metric, mode, eta, min_steps)")
    rule = h.get("rule")
    if rule != "successive_halving":
        raise h.fail("rule", f"must be 'successive_halving', got {rule!r}")
    metric = h.string("metric", _PARAM_RE, "a metric name")
    mode = h.get("mode", "min")
    if mode not in ("min", "max"):
        raise h.fail("mode", f"must be 'min' or 'max', got {mode!r}")
    eta = h.integer("eta", 2, minimum=2, maximum=MAX_ETA)
    min_steps = h.integer("min_steps", maximum=MAX_STEPS)
    return Halving(metric, mode, eta, min_steps)


def _draw_configs(
    space: dict[str, Any], trials: int, seed: int, source: str
) -> tuple[dict[str, Any], ...]:
    """One configuration per trial: lists are a grid walked in order (and cycled), each
    ``{uniform|loguniform|randint: [lo, hi]}`` is drawn from a generator seeded by ``seed``."""
    grid: dict[str, list[Any]] = {}
    draws: dict[str, tuple[str, float, float]] = {}
    if len(space) > MAX_PARAMS:
        raise ThemisError(
            f"at most {MAX_PARAMS} parameters, got {len(space)}",
            source=source,
            field="search_space",
        )
    for key, value in space.items():
        field = f"search_space.{_key(key)}"
        if not isinstance(key, str) or not _PARAM_RE.fullmatch(key) or len(key) > MAX_STRING:
            raise ThemisError("must be an identifier", source=source, field=field)
        if isinstance(value, list):
            if not value:
                raise ThemisError("an empty list of choices", source=source, field=field)
            if len(value) > MAX_CHOICES:
                raise ThemisError(
                    f"at most {MAX_CHOICES} choices, got {len(value)}", source=source, field=field
                )
            for choice in value:
                _check_choice(choice, source, field)
            grid[key] = value
        elif isinstance(value, dict) and len(value) == 1:
            kind, bounds = next(iter(value.items()))
            if kind not in _DISTRIBUTIONS:
                known = ", ".join(_DISTRIBUTIONS)
                raise ThemisError(
                    f"unknown distribution '{kind}' (known: {known})", source=source, field=field
                )
            if (
                not isinstance(bounds, list)
                or len(bounds) != 2
                or any(isinstance(b, bool) or not isinstance(b, (int, float)) for b in bounds)
            ):
                raise ThemisError(
                    f"{kind} needs [low, high] with low < high", source=source, field=field
                )
            for bound in bounds:
                _check_number(bound, source, field)
            if not bounds[0] < bounds[1]:
                raise ThemisError(
                    f"{kind} needs [low, high] with low < high", source=source, field=field
                )
            if kind == "loguniform" and bounds[0] <= 0:
                raise ThemisError("loguniform needs low > 0", source=source, field=field)
            draws[key] = (kind, float(bounds[0]), float(bounds[1]))
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            _check_choice(value, source, field)
            grid[key] = [value]
        else:
            raise ThemisError(
                "must be a list of choices, a value, or {uniform|loguniform|randint: [lo, hi]}",
                source=source,
                field=field,
            )
    rng = random.Random(seed)
    points = itertools.cycle(itertools.product(*grid.values())) if grid else itertools.repeat(())
    configs = []
    for _ in range(trials):
        config: dict[str, Any] = dict(zip(grid, next(points), strict=True))
        for key, (kind, low, high) in draws.items():
            if kind == "uniform":
                config[key] = rng.uniform(low, high)
            elif kind == "loguniform":
                config[key] = math.exp(rng.uniform(math.log(low), math.log(high)))
            else:
                config[key] = rng.randint(int(low), int(high))
        configs.append(config)
    return tuple(configs)


def _check_choice(value: Any, source: str, field: str) -> None:
    """A choice is a scalar of bounded size: configs are stored once per trial."""
    if not isinstance(value, (int, float, str, bool)):
        raise ThemisError(
            f"choices must be numbers, strings or booleans, got {type(value).__name__}",
            source=source,
            field=field,
        )
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise ThemisError(
            f"a string choice is at most {MAX_STRING} characters", source=source, field=field
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_number(value, source, field)


def _check_number(value: float, source: str, field: str) -> None:
    """A number of the search space: finite (JSON has no infinity or NaN), not subnormal
    (its inverse or logarithm overflows) and at most ``MAX_SEARCH_NUMBER`` in magnitude."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ThemisError(f"numbers must be finite, got {value}", source=source, field=field)
    if isinstance(value, float) and 0 < abs(value) < sys.float_info.min:
        raise ThemisError(
            f"a subnormal number ({value:g}) is not allowed; use 0 or a normal number",
            source=source,
            field=field,
        )
    if abs(value) > MAX_SEARCH_NUMBER:
        raise ThemisError(
            f"a number is at most {MAX_SEARCH_NUMBER} in magnitude, got {_short(value)}",
            source=source,
            field=field,
        )


def _key(key: Any) -> str:
    """A key as written, unless showing it would break the one-line error."""
    return key if isinstance(key, str) and key.isprintable() else repr(key)


def _short(value: Any) -> str:
    """A value for an error message, cut so that the message stays one short line."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
