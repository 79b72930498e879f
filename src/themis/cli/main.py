"""The ``themis`` command group and its entry point.

``main`` runs the group in click's non-standalone mode so that every user error, whether
raised by themis (:class:`ThemisError`) or by click (a bad flag, a missing argument),
ends the same way: one line ``themis: error: <message>`` on stderr and exit code 2, with
no traceback. Ctrl-C exits with 130. Any other exception is a bug and shows its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from themis import __version__
from themis.cli.auction import auction
from themis.cli.experiment import experiment
from themis.cli.policies import policies
from themis.cli.runtime import cancel, logs, serve, status, submit
from themis.cli.simulate import compare, simulate
from themis.cli.trace import trace
from themis.errors import ThemisError

#: Exit code of every user error (ThemisError or a usage error).
EXIT_USER_ERROR = 2
#: Exit code after Ctrl-C, as shells report SIGINT (128 + 2).
EXIT_INTERRUPTED = 130

PROG = "themis"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name=PROG, message="%(prog)s %(version)s")
def cli() -> None:
    """Finish-time fair GPU cluster scheduling (Themis, NSDI 2020): simulate policies on
    a trace, compare them, reproduce the paper, or run the scheduler on a Ray cluster
    (serve, submit, status, cancel, logs)."""


cli.add_command(simulate)
cli.add_command(compare)
cli.add_command(auction)
cli.add_command(policies)
cli.add_command(experiment)
cli.add_command(trace)
for _runtime_command in (serve, submit, status, cancel, logs):
    cli.add_command(_runtime_command)


def one_line(message: str) -> str:
    """A message folded onto one line."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def _error(message: str) -> int:
    click.echo(f"{PROG}: error: {one_line(message)}", err=True)
    return EXIT_USER_ERROR


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except ThemisError as exc:
        return _error(exc.format())
    except click.exceptions.UsageError as exc:
        message = exc.format_message()
        if exc.ctx is not None:
            message += f" (see '{exc.ctx.command_path} --help')"
        return _error(message)
    except click.ClickException as exc:
        return _error(exc.format_message())
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo(f"{PROG}: interrupted", err=True)
        return EXIT_INTERRUPTED
    # A command returns None; --help and --version return their exit code (0).
    return code if isinstance(code, int) else 0


def main() -> None:
    """Console entry point (``themis = "themis.cli.main:main"``)."""
    sys.exit(run())


if __name__ == "__main__":
    main()
