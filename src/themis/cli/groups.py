"""The click group every ``themis`` command group is built on.

A group run with no arguments shows its help on stdout and exits 0, whatever click
version is installed: click 8.1 did that itself, click 8.2 and later raise
``NoArgsIsHelpError`` (a usage error, exit 2), which ``main.run`` would fold into one
"error" line. Deciding it here, before click parses, keeps the behaviour ours.
"""

from __future__ import annotations

import click


class HelpGroup(click.Group):
    """A group that answers a bare invocation (``themis``, ``themis trace``) with its
    help and exit code 0."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)
