"""The ``themis`` command group and its entry point.

``main`` runs the group in click's non-standalone mode so that every user error, whether
raised by themis (:class:`ThemisError`) or by click (a bad flag, a missing argument),
ends the same way: one line ``themis: error: <message>`` on stderr and exit code 2, with
no traceback. Ctrl-C exits with 130, SIGTERM with 143 after the same clean-up (worker
processes stopped). Any other exception is a bug and shows its traceback.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

import click

from themis import __version__
from themis.cli.groups import HelpGroup
from themis.errors import ThemisError

#: Exit code of every user error (ThemisError or a usage error).
EXIT_USER_ERROR = 2
#: Exit code after Ctrl-C, as shells report SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: Exit code after SIGTERM (128 + 15).
EXIT_TERMINATED = 143

PROG = "themis"

#: Each command: where it lives, and its one-line help for ``themis --help``. A command's
#: module (and what it imports: numpy, scipy, matplotlib, ray) is loaded only when that
#: command runs or shows its own help, so that ``themis --help`` and a usage error start
#: in a fraction of a second (docs/benchmarks.md). tests/cli/test_main.py checks that each
#: line here is the command's own short help.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("themis.cli.simulate:simulate", "Replay a trace under one policy."),
    "compare": (
        "themis.cli.compare:compare",
        "Replay a trace under several policies, one table.",
    ),
    "replay": (
        "themis.cli.replay:replay",
        "Simulate what the runtime ran, under any policy.",
    ),
    "auction": (
        "themis.cli.auction:auction",
        "Run one Partial Allocation auction from a JSON file.",
    ),
    "policies": ("themis.cli.policies:policies", "List the registered policies."),
    "experiment": (
        "themis.cli.experiment:experiment",
        "Run a predefined experiment (the paper's evaluation).",
    ),
    "trace": ("themis.cli.trace:trace", "Generate, inspect and convert workload traces."),
    "serve": ("themis.cli.runtime:serve", "Run the arbiter on a Ray cluster."),
    "submit": ("themis.cli.runtime:submit", "Submit an app (app.yaml)."),
    "status": ("themis.cli.runtime:status", "Show the arbiter's liveness and every app."),
    "cancel": ("themis.cli.runtime:cancel", "Cancel an app."),
    "logs": ("themis.cli.runtime:logs", "Show an app's event log."),
    "token": ("themis.cli.runtime:token", "Rotate the operator's API tokens."),
    "state": ("themis.cli.state:state", "Back up the arbiter's state database."),
}


class LazyGroup(HelpGroup):
    """A click group whose subcommands are imported on first use (``LAZY_COMMANDS``).

    Commands added with ``add_command`` (tests do) take precedence over the table.
    """

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]], **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = self.lazy.get(cmd_name)
        if entry is None:
            return None
        module, attr = entry[0].split(":")
        command = getattr(importlib.import_module(module), attr)
        self.commands[cmd_name] = command
        return command  # type: ignore[no-any-return]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table, so that ``--help`` imports no command."""
        rows = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            if loaded is not None:
                if loaded.hidden:
                    continue
                text = loaded.get_short_help_str(formatter.width)
            else:
                text = self.lazy[name][1]
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def version_line() -> str:
    """``themis 0.2.0 (pure Python)``, or ``(compiled core: N modules)``: a compiled
    install (``THEMIS_COMPILE=1``) decides the same, faster, so a user reporting a speed or
    a crash says which one ran. Read from the files beside the package, nothing imported."""
    from themis.compiled import core_status

    return f"{PROG} {__version__} ({core_status().describe()})"


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(version_line())
    ctx.exit()


@click.group(
    cls=LazyGroup,
    lazy=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version, and whether the core is compiled, and exit.",
)
def cli() -> None:
    """Finish-time fair GPU cluster scheduling (Themis, NSDI 2020): simulate policies on
    a trace, compare them, reproduce the paper, or run the scheduler on a Ray cluster
    (serve, submit, status, cancel, logs)."""


def one_line(message: str) -> str:
    """A message folded onto one line, inert: an error may quote the arbiter's answer or
    a file's content (``cli.inert``)."""
    from themis.cli.inert import inert

    return inert(" ".join(part.strip() for part in message.splitlines() if part.strip()))


def _error(message: str) -> int:
    click.echo(f"{PROG}: error: {one_line(message)}", err=True)
    return EXIT_USER_ERROR


def _is_no_args_help(exc: click.exceptions.UsageError) -> bool:
    """Whether ``exc`` is click's "no arguments: here is the help" (click >= 8.2 only)."""
    kind = getattr(click.exceptions, "NoArgsIsHelpError", None)
    return kind is not None and isinstance(exc, kind)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Warnings meant for users (a plug-in of any kind skipped) as one line; others as
    Python shows them."""
    from themis.registry import PluginWarning

    if issubclass(category, PluginWarning):
        click.echo(f"{PROG}: warning: {one_line(str(message))}", err=True)
    else:
        _PYTHON_SHOW_WARNING(message, category, filename, lineno, file, line)


_PYTHON_SHOW_WARNING = warnings.showwarning


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it unwinds as after Ctrl-C: worker
    processes stopped (``experiments.runner``), files closed, exit code 143."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the CLI runs (main thread only: Python
    delivers signals there); the previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    with warnings.catch_warnings(), _sigterm_unwinds():
        warnings.showwarning = _show_warning
        try:
            return _run(list(sys.argv[1:] if argv is None else argv))
        except Terminated:  # raised after _run's handlers, e.g. while an error is shown
            click.echo(f"{PROG}: terminated", err=True)
            return EXIT_TERMINATED


#: The arguments of the command running (``run``'s), for reports to record.
_running: list[str] = []


def command_line() -> str:
    """The running command as typed: ``themis compare --seeds 5 ...`` (quoted for a shell)."""
    import shlex

    return shlex.join([PROG, *_running])


def _config_origin(exc: ThemisError) -> str:
    """Where a bad option's value came from, when a ``--config`` file set it."""
    loaded = sys.modules.get("themis.cli.config_file")  # only if a command imported it
    if loaded is None or exc.field is None or exc.source is not None:
        return ""
    return str(loaded.origin(exc.field))


def _run(args: list[str]) -> int:
    _running[:] = args
    loaded = sys.modules.get("themis.cli.config_file")
    if loaded is not None:
        loaded.forget()
    try:
        code = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except ThemisError as exc:
        return _error(exc.format() + _config_origin(exc))
    except click.exceptions.UsageError as exc:
        if _is_no_args_help(exc):  # a command with no_args_is_help=True, click >= 8.2
            click.echo(exc.format_message())
            return 0
        message = exc.format_message()
        if exc.ctx is not None:
            message += f" (see '{exc.ctx.command_path} --help')"
        return _error(message)
    except click.ClickException as exc:
        return _error(exc.format_message())
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        # click turns KeyboardInterrupt (Terminated included) into Abort, from it.
        if isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated):
            click.echo(f"{PROG}: terminated", err=True)
            return EXIT_TERMINATED
        click.echo(f"{PROG}: interrupted", err=True)
        return EXIT_INTERRUPTED
    # A command returns None; --help and --version return their exit code (0).
    return code if isinstance(code, int) else 0


def main() -> None:
    """Console entry point (``themis = "themis.cli.main:main"``)."""
    sys.exit(run())


if __name__ == "__main__":
    main()
