"""Cleans up a local Ray cluster after ``themis serve`` dies, however it dies.

``serve`` stops its local cluster by handle when it exits; a ``kill -9`` skips that, and
Ray's processes (raylets, agents: about 340 MB) lingered for up to 2.5 minutes, and the
run's temporary directory for ever (issue 20). So ``serve`` starts this small process
beside the cluster, holding the read end of a pipe whose write end only ``serve`` has.
When ``serve`` is gone, for any reason, the pipe reads EOF: the reaper then ends every
process of *this run* (those whose command line or environment names the run's own
temporary directory, ``thr-<random>``: never a process found by a broad name, never
``ray stop``), with SIGTERM then SIGKILL after a grace, and removes the directory.

It runs in its own session (a Ctrl-C or a signal to serve's process group does not reach
it) and reads nothing but the pipe. Linux only (``/proc``); elsewhere it only removes the
directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

#: Seconds between SIGTERM and SIGKILL.
GRACE = 3.0


def start(temp_root: str) -> subprocess.Popen[bytes]:
    """Start the reaper of the run whose temporary directory is ``temp_root``; keep the
    returned handle (its stdin is the pipe) for as long as the cluster runs."""
    return subprocess.Popen(
        [sys.executable, "-m", "themis.runtime.workers.reaper", temp_root],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def processes_of(temp_root: str) -> list[int]:
    """Pids of this user's processes whose command line or environment names
    ``temp_root`` (the reaper itself excluded)."""
    marker = temp_root.encode()
    own = {os.getpid()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            if (
                marker in (entry / "cmdline").read_bytes()
                or marker in (entry / "environ").read_bytes()
            ):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def reap(temp_root: str, grace: float = GRACE) -> int:
    """End the run's processes (TERM, then KILL after ``grace``) and remove its
    directory; returns how many processes were signalled."""
    signalled: set[int] = set()
    deadline = time.monotonic() + grace
    while True:
        pids = processes_of(temp_root) if Path("/proc").is_dir() else []
        if not pids:
            break
        late = time.monotonic() >= deadline
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
            except OSError:
                continue
            signalled.add(pid)
        time.sleep(0.2)
        if late and time.monotonic() > deadline + grace:
            break  # what SIGKILL did not end is not ours to end
    shutil.rmtree(temp_root, ignore_errors=True)
    return len(signalled)


def main(argv: list[str]) -> int:
    (temp_root,) = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):  # serve never writes: this returns at its end
        pass
    reap(temp_root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
