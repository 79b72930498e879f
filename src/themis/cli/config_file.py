"""``--config FILE``: a command's options read from a file, flags on the command line win.

The file is TOML (``run.toml``) whose keys are the command's long option names, with
dashes or underscores (``fairness-knob = 0.5`` or ``fairness_knob = 0.5``), or a
``summary.json`` written by ``themis simulate`` (or by one run of ``compare`` or
``replay``): its ``options`` are the ``themis simulate`` options that reproduce that run.

The values become click's ``default_map`` (set by this eager option before any other is
read), so each still goes through its option's own type and checks, and anything given
on the command line overrides it. Before that, each key is checked here against the
command's options and each value's TOML type against the option's type, so that an
unknown key or a wrong type is one line naming the file, the line and the key.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from themis.errors import ThemisError

#: Options a file never sets: what to do with the output rather than what to run.
NOT_IN_FILES = frozenset({"config", "help"})
#: Options that take a comma-separated list: a file may give a TOML array instead (so may
#: a knob whose text is parsed: ``comma_lists``).
COMMA_LISTS = frozenset({"policies", "seeds"})
#: What ``summary.json``'s ``options`` leave out: where and how the run was shown.
NOT_RECORDED = frozenset({"out", "quiet", "as_json", "config"})
#: The key of a summary's ``options`` that holds its trace file's SHA-256 (not an option:
#: checked, with a warning if the file changed, when the summary is read back).
TRACE_DIGEST = "trace-sha256"
#: Options whose value is a file path, recorded absolute so that a summary replays from
#: any working directory.
PATH_OPTIONS = ("trace", "profiles", "throughputs")


def config_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--config FILE`` to a click command."""
    return click.option(
        "--config",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        is_eager=True,
        expose_value=False,
        callback=_load,
        metavar="FILE",
        help="Read options from FILE: TOML with the long option names as keys, or a "
        "summary.json a run wrote (its run again); flags given here win.",
    )(command)


#: Where each option a file set came from, by flag (``--lease``): the command's context,
#: the parameter's name and ``FILE:LINE``; read by :func:`origin`.
_ORIGINS: dict[str, tuple[click.Context, str, str]] = {}


def _load(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is None or ctx.resilient_parsing:
        return
    values, lines = read_config(value, ctx.command)
    ctx.default_map = {**(ctx.default_map or {}), **values}
    for option in ctx.command.params:
        if isinstance(option, click.Option) and option.name in values:
            line = lines.get(option.name)
            where = f"{value}:{line}" if line is not None else str(value)
            _ORIGINS["--" + long_name(option)] = (ctx, option.name, where)


def forget() -> None:
    """Drop the origins of an earlier command (the CLI runs several in one process in
    tests)."""
    _ORIGINS.clear()


def origin(flag: str) -> str:
    """`` (set in FILE:LINE)`` when the value of ``flag`` the command ran with came from a
    configuration file, else ``""``: for errors the command itself raises about it."""
    entry = _ORIGINS.get(flag)
    if entry is None:
        return ""
    ctx, name, where = entry
    if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT_MAP:
        return ""
    return f" (set in {where})"


def long_name(option: click.Option) -> str:
    """The option's long name without dashes (``--fairness-knob``: ``fairness-knob``)."""
    longs = [o for o in option.opts if o.startswith("--")]
    return (longs[0] if longs else option.opts[0]).lstrip("-")


def _options_by_key(command: click.Command) -> dict[str, click.Option]:
    """Each option under its long name, with dashes and with underscores."""
    out: dict[str, click.Option] = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.name not in NOT_IN_FILES:
            name = long_name(param)
            out[name] = out[name.replace("-", "_")] = param
    return out


def read_config(path: Path, command: click.Command) -> tuple[dict[str, Any], dict[str, int | None]]:
    """The file's values by parameter name, checked against ``command``'s options, and
    the line that set each."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ThemisError("no such configuration file", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemisError(f"cannot read: {exc}", source=source) from None
    raw, first = _parse(text, path)
    options = _options_by_key(command)
    values: dict[str, Any] = {}
    lines: dict[str, int | None] = {}
    for key, value in raw.items():
        line = _line_of(text, key, first)
        option = options.get(key)
        if option is None:
            close = difflib.get_close_matches(key, sorted(options), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ThemisError(
                f"unknown option for 'themis {command.name}'{hint}",
                source=source,
                line=line,
                field=key,
            )
        if value is None:  # a summary's "not given": the option's default
            continue
        assert option.name is not None
        if option.name in values:
            raise ThemisError("given twice (with dashes and with underscores)", source=source,
                              line=line, field=key)  # fmt: skip
        values[option.name] = _checked(option, value, source, line, key)
        lines[option.name] = line
    return values, lines


def _parse(text: str, path: Path) -> tuple[dict[str, Any], int]:
    """A TOML table, or a JSON object (a ``summary.json``: its ``options``), and the line
    where its keys start (a summary's ``config`` repeats some of them above)."""
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ThemisError(f"not valid JSON ({exc})", source=str(path)) from None
        if not isinstance(data, dict):
            raise ThemisError("must be a JSON object", source=str(path))
        if "options" in data and "policy" in data:  # a run's summary.json
            options = data["options"]
            if not isinstance(options, dict):
                raise ThemisError("'options' must be an object", source=str(path))
            _check_digest(options, str(path))
            return options, _line_of(text, "options", 1) or 1
        if "policy" in data and "config" in data:
            raise ThemisError(
                "this summary.json records no options (written by an older themis): run "
                "again with the flags in its 'config'",
                source=str(path),
            )
        return data, 1
    import tomllib

    try:
        return tomllib.loads(text), 1
    except tomllib.TOMLDecodeError as exc:
        raise ThemisError(f"not valid TOML ({exc})", source=str(path)) from None


def _line_of(text: str, key: str, first: int = 1) -> int | None:
    """The line that sets ``key`` (TOML ``key =`` or ``[key]``, JSON ``"key":``), from line
    ``first`` on, if found."""
    quoted = rf"[\"']?{re.escape(key)}[\"']?"
    pattern = re.compile(rf"^\s*(?:{quoted}\s*[=:]|\[+\s*{quoted}\s*\])")
    for number, line in enumerate(text.splitlines(), 1):
        if number >= first and pattern.search(line):
            return number
    return None


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _expected(option: click.Option) -> tuple[str, Callable[[Any], bool]]:
    """What a value of this option must be in a file, and a check of it."""
    kind = option.type
    if option.is_flag:
        return "true or false", lambda v: isinstance(v, bool)
    if isinstance(kind, (click.types.IntParamType, click.IntRange)):
        return "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
    if isinstance(kind, (click.types.FloatParamType, click.FloatRange)):
        return "a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    return "a string", lambda v: isinstance(v, str)


def _checked(option: click.Option, value: Any, source: str, line: int | None, key: str) -> Any:
    """``value`` as click's default for ``option``, or one error naming file and key."""
    assert option.name is not None
    if option.name in comma_lists():
        if isinstance(value, list) and all(
            isinstance(v, (str, int)) and not isinstance(v, bool) for v in value
        ):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
    what, ok = _expected(option)
    if option.multiple:
        if not (isinstance(value, list) and all(ok(v) for v in value)):
            raise ThemisError(
                f"must be an array of {what.removeprefix('a ').removeprefix('an ')}s, "
                f"got {_type_name(value)}",
                source=source,
                line=line,
                field=key,
            )
    elif not ok(value):
        raise ThemisError(
            f"must be {what}, got {_type_name(value)}", source=source, line=line, field=key
        )
    try:
        option.type_cast_value(click.Context(click.Command(None)), value)
    except click.BadParameter as exc:
        raise ThemisError(exc.format_message(), source=source, line=line, field=key) from None
    return value


def _a_file(value: str) -> bool:
    """A path to a file, not a bundled trace's name nor a generated workload's spec."""
    from themis.workload.loader import BUNDLED_TRACES

    return value not in BUNDLED_TRACES and ":" not in value and Path(value).is_file()


def recorded_options(
    params: Sequence[click.Parameter], values: Mapping[str, Any], **overrides: Any
) -> dict[str, Any]:
    """The options among ``params`` (a command's, ``themis simulate``'s for a run's
    ``summary.json``) that reproduce one run, by long option name: those of ``values``
    (a command's parameters), then ``overrides`` (the run's policy and seed, or a replay's
    workload); file paths made absolute."""
    out: dict[str, Any] = {}
    for param in params:
        if not isinstance(param, click.Option) or param.name in NOT_RECORDED:
            continue
        assert param.name is not None
        if param.name in overrides:
            value = overrides[param.name]
        elif param.name in values:
            value = values[param.name]
        else:
            continue
        if isinstance(value, tuple):
            value = list(value)
        if param.name in PATH_OPTIONS and isinstance(value, str) and _a_file(value):
            value = str(Path(value).resolve())
            if param.name == "trace":
                out[TRACE_DIGEST] = _digest(value, *_stamp(value))
        out[long_name(param)] = value
    return out


def _stamp(path: str) -> tuple[int, int]:
    st = Path(path).stat()
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=16)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    """SHA-256 of a file (cached per version: compare records it once per run)."""
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_digest(options: dict[str, Any], source: str) -> None:
    """Warn when the trace a summary names is no longer the file it ran on."""
    recorded = options.pop(TRACE_DIGEST, None)
    trace = options.get("trace")
    if not isinstance(recorded, str) or not isinstance(trace, str) or not _a_file(trace):
        return
    if _digest(trace, *_stamp(trace)) != recorded:
        click.echo(
            f"themis: warning: {source}: {trace} has changed since this run (SHA-256 "
            "differs); the run will not be the same",
            err=True,
        )


def comma_lists() -> frozenset[str]:
    """Options that take a comma-separated list: ``COMMA_LISTS`` and the knobs whose text
    is parsed (``--tiresias-queues 3250,7200``)."""
    from themis.policies.registry import knobs

    return COMMA_LISTS | {knob.name for knob in knobs() if knob.parse is not None}
