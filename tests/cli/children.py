"""Starting the CLI as a child process whose signal handling is under test."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence


def default_sigint() -> None:
    """``preexec_fn`` for such a child: SIGINT back to its default. A shell without job
    control starts background jobs with SIGINT ignored, children inherit that, and Python
    then installs no Ctrl-C handler, so a test run from such a job would see the CLI ignore
    the SIGINT it sends instead of testing what the CLI does with it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(
    command: Sequence[str], env: Mapping[str, str], new_session: bool = False
) -> subprocess.Popen[str]:
    """``command`` running, its output captured as text, SIGINT at its default."""
    return subprocess.Popen(
        list(command),
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
        preexec_fn=default_sigint,
    )
