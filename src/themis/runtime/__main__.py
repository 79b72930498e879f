"""``python -m themis.runtime serve|submit|status|cancel|logs``: the runtime commands with
the ``themis`` CLI's error handling, usable before (and besides) the main group."""

from __future__ import annotations

import sys

from themis.cli.main import cli, run
from themis.cli.runtime import COMMANDS

for command in COMMANDS:
    if command.name not in cli.commands:
        cli.add_command(command)

if __name__ == "__main__":
    sys.exit(run())
