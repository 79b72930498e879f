"""Who may do what through the API: the operator's tokens and the apps' tokens.

- **admin** (``<state>/admin.token``): everything, on every app, and ``/metrics``.
- **submit** (``<state>/submit.token``): submit apps and read the status table (names,
  states, GPUs, rho; no text an app's trials wrote); hand it to the users of the cluster.
- **app** (printed once by submit): act on that one app (cancel it, release its leases,
  read its logs and its status row) and nothing else.

The two operator tokens are made at ``serve --init`` (or when their file is missing),
written 0600 into the state directory, and only their SHA-256 is kept in memory. The
admin can rotate either while ``serve`` runs (``POST /v1/tokens/rotate``, ``themis token
rotate``): the new token replaces the file's atomically, and the old one is refused from
that moment on. App
tokens are stored hashed too (``runtime.tokens``). A token is 256 random bits, so a fast
hash is enough and a lookup by hash leaks nothing useful by its timing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from themis.runtime.state.tokens import new_token, token_hash, token_matches

ADMIN_TOKEN_FILE = "admin.token"
SUBMIT_TOKEN_FILE = "submit.token"
#: The operator tokens by name, and their files in the state directory.
OPERATOR_TOKEN_FILES = {"admin": ADMIN_TOKEN_FILE, "submit": SUBMIT_TOKEN_FILE}


@dataclass(frozen=True)
class Principal:
    role: str  # "admin", "submit" or "app"
    app_id: str | None = None

    def may_act_on(self, app_id: str) -> bool:
        return self.role == "admin" or (self.role == "app" and self.app_id == app_id)

    def may_read_text_of(self, app_id: str) -> bool:
        """Whether this token may read what ``app_id``'s trials wrote (log lines, errors,
        tracebacks, metric names, reasons quoting them): the admin and the app itself.
        The submit token is shared by every user, so it sees names, states, GPUs and rho
        of all apps but none of their text."""
        return self.may_act_on(app_id)

    @property
    def may_submit(self) -> bool:
        return self.role in ("admin", "submit")


@dataclass(frozen=True)
class OperatorTokens:
    admin_hash: str
    submit_hash: str

    @classmethod
    def load_or_create(cls, state_dir: str | Path) -> OperatorTokens:
        state = Path(state_dir)
        return cls(_token_file(state / ADMIN_TOKEN_FILE), _token_file(state / SUBMIT_TOKEN_FILE))

    def with_token(self, which: str, token: str) -> OperatorTokens:
        """These tokens with ``which`` ("admin" or "submit") replaced by ``token``."""
        if which == "admin":
            return OperatorTokens(token_hash(token), self.submit_hash)
        return OperatorTokens(self.admin_hash, token_hash(token))

    def identify(self, token: str | None) -> Principal | None:
        if token_matches(token, self.admin_hash):
            return Principal("admin")
        if token_matches(token, self.submit_hash):
            return Principal("submit")
        return None


def _token_file(path: Path) -> str:
    """The hash of the token in ``path``, made (0600) if the file does not exist."""
    try:
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = new_token()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    return token_hash(token)


def write_new_token(path: Path) -> str:
    """A new token, written over ``path`` atomically (0600, fsynced, then renamed): a
    crash leaves the old file or the new one, whole."""
    token = new_token()
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return token


def read_token_file(path: str | Path) -> str:
    return Path(path).read_text(encoding="ascii").strip()
