"""The click group every ``themis`` command group is built on.

A group run with no arguments shows its help on stdout and exits 0, whatever click
version is installed: click 8.1 did that itself, click 8.2 and later raise
``NoArgsIsHelpError`` (a usage error, exit 2), which ``main.run`` would fold into one
"error" line. Deciding it here, before click parses, keeps the behaviour ours.

A mistyped command gets the closest names (``No such command 'simulte'. Did you mean
'simulate'?``) from every command, including those not imported yet: click 8.1 suggests
nothing and later versions only among the commands already loaded.
"""

from __future__ import annotations

import difflib

import click


class HelpGroup(click.Group):
    """A group that answers a bare invocation (``themis``, ``themis trace``) with its
    help and exit code 0."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if (
            name
            and not name.startswith("-")
            and not ctx.resilient_parsing
            and self.get_command(ctx, name) is None
        ):
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)
