"""Cleans up a local Ray cluster after ``themis serve`` dies, however it dies.

``serve`` stops its local cluster by handle when it exits; a ``kill -9`` skips that, and
Ray's processes (raylets, agents: about 340 MB) lingered for up to 2.5 minutes, and the
run's temporary directory for ever. So ``serve`` starts this small process
beside the cluster, holding the read end of a pipe whose write end only ``serve`` has.
When ``serve`` is gone, for any reason, the pipe reads EOF: the reaper then ends every
process of *this run*, with SIGTERM then SIGKILL after a grace, and removes the
directory. A process is of this run when

- it descends from ``serve`` (the reaper's parent): the reaper notes serve's process tree
  (pid and start time, so a reused pid is never taken for one of ours) every
  :data:`WATCH_EVERY` seconds while it waits; or
- it descends from a process so noted (a worker a raylet started in the last second); or
- its command line or environment names the run's own temporary directory
  (``thr-<random>``).

Never a process found by a broad name, never ``ray stop``. The marker alone missed
processes: Ray's agents rename themselves (``setproctitle``), which on some starts wipes
the memory ``/proc/<pid>/environ`` reads, so the second node's ``ray::DashboardAgent``
and ``ray::RuntimeEnvAgent`` carried no trace of the run and lived on for 40-90 s.

It runs in its own session (a Ctrl-C or a signal to serve's process group does not reach
it) and reads nothing but the pipe. Linux only (``/proc``); elsewhere it only removes the
directory.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

#: Seconds between SIGTERM and SIGKILL.
GRACE = 3.0
#: Seconds between two notes of serve's process tree while serve lives.
WATCH_EVERY = 1.0

#: A process as noted: its pid and its start time (``psutil``), which tells it from a
#: later process given the same pid.
Noted = dict[int, float]


def start(temp_root: str) -> subprocess.Popen[bytes]:
    """Start the reaper of the run whose temporary directory is ``temp_root``; keep the
    returned handle (its stdin is the pipe) for as long as the cluster runs."""
    return subprocess.Popen(
        [sys.executable, "-m", "themis.runtime.workers.reaper", temp_root, str(os.getpid())],
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


def tree_of(pid: int) -> Noted:
    """``pid``'s descendants now, each with its start time (nothing if it is gone)."""
    import psutil

    noted: Noted = {}
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return noted
    for child in children:
        with contextlib.suppress(psutil.Error):
            noted[child.pid] = child.create_time()
    return noted


def still_ours(noted: Noted) -> list[int]:
    """The noted processes still alive (same pid, same start time) and their descendants
    now: what the run's processes started since the last note."""
    import psutil

    alive: Noted = {}
    for pid, created in noted.items():
        try:
            if psutil.Process(pid).create_time() == created:
                alive[pid] = created
        except psutil.Error:
            continue
    found = set(alive)
    for pid in alive:
        found.update(tree_of(pid))
    found.discard(os.getpid())
    return sorted(found)


def reap(temp_root: str, grace: float = GRACE, noted: Noted | None = None) -> int:
    """End the run's processes (TERM, then KILL after ``grace``): those ``noted`` (and
    their descendants) and those naming ``temp_root``; then remove its directory.
    Returns how many processes were signalled."""
    signalled: set[int] = set()
    deadline = time.monotonic() + grace
    while True:
        pids = set(processes_of(temp_root)) if Path("/proc").is_dir() else set()
        if noted:
            pids.update(still_ours(noted))
        if not pids:
            break
        late = time.monotonic() >= deadline
        for pid in pids - {0, 1, os.getpid(), os.getppid()}:
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


def watch(serve: int, noted: Noted) -> None:
    """Note serve's process tree every :data:`WATCH_EVERY` seconds until the pipe from
    serve reads EOF (serve is gone). Each note replaces the last (a long-lived serve
    starts a worker per lease: the notes must not grow with them); what started since
    the last one descends from a noted process and is found by :func:`still_ours`.

    A tree is noted only while serve is still this process's parent, checked before and
    after the note: once serve is gone its pid names nothing of ours (orphans go to
    init, whose tree is every process of the machine)."""
    stdin = sys.stdin.fileno()
    while True:
        if os.getppid() == serve:
            now = tree_of(serve)
            if now and os.getppid() == serve:
                noted.clear()
                noted.update(now)
        ready, _, _ = select.select([stdin], [], [], WATCH_EVERY)
        if ready and not os.read(stdin, 4096):  # serve never writes: EOF is its end
            return


def main(argv: list[str]) -> int:
    temp_root, serve_pid = argv
    serve = int(serve_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    noted: Noted = {}
    try:
        watch(serve, noted)
    except ImportError:  # no psutil (the runtime extra): the marker alone
        while sys.stdin.buffer.read(4096):
            pass
    reap(temp_root, noted=noted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
