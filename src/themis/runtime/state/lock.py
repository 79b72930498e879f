"""One arbiter per state directory: an exclusive ``flock`` on ``<state>/arbiter.lock``.

Two arbiters on one state would each start every trial (every trial ran twice). The lock
is taken before the database is opened and held for the life of the process; the kernel
drops it when the process dies, however it dies (SIGKILL included), so a crashed arbiter
never leaves a stale lock behind. The file also names the holder's pid for the error a
second ``themis serve`` prints. ``flock`` works on local filesystems; keep the state
directory on local disk (NFS locks are not reliable).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from themis.errors import ThemisError

LOCK_NAME = "arbiter.lock"


class StateLock:
    """The held lock; ``release`` (or process exit) gives it up."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / LOCK_NAME
        try:
            Path(state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ThemisError(
                f"cannot open the lock: {exc.strerror}", source=str(self.path)
            ) from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 64, 0).decode("ascii", "replace").strip() or "?"
            os.close(self.fd)
            raise ThemisError(
                f"another arbiter (pid {holder}) already serves this state directory",
                source=str(state_dir),
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1
