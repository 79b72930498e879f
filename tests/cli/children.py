"""Starting the CLI as a child process whose signal handling is under test."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn`` for such a child: SIGINT back to its default. A shell without job
    control starts background jobs with SIGINT ignored, children inherit that, and Python
    then installs no Ctrl-C handler, so a test run from such a job would see the CLI ignore
    the SIGINT it sends instead of testing what the CLI does with it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
