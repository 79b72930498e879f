"""What an app's jobs carry to prove who they are: a report credential and the key that
seals the app's checkpoints.

The app's own token is known only to its submitter (the store keeps its hash), so its
jobs get one of their own: random, per app and per arbiter process, kept in memory only.
Job actors die with the arbiter process that started them, so a restarted arbiter never
needs an old one. The checkpoint key is derived from a secret in the state directory and
the app's submission, so it is the same across restarts (``workers.checkpoint``)."""

from __future__ import annotations

import hmac

from themis.runtime.state.store import Store
from themis.runtime.state.tokens import new_token
from themis.runtime.workers import checkpoint


class JobCredentials:
    """Per-app job tokens and checkpoint keys."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._tokens: dict[str, str] = {}
        self._secret = checkpoint.load_or_create_secret(store.state_dir)
        self._checkpoint_keys: dict[str, str] = {}

    def token_for(self, app_id: str) -> str:
        """The credential this app's job actors report with."""
        token = self._tokens.get(app_id)
        if token is None:
            token = self._tokens[app_id] = new_token()
        return token

    def accepts(self, app_id: str, token: str) -> bool:
        """Whether ``token`` is the job credential handed to ``app_id``'s jobs."""
        issued = self._tokens.get(app_id)
        return issued is not None and hmac.compare_digest(token, issued)

    def checkpoint_key(self, app_id: str) -> str:
        """The key that seals this app's checkpoints: handed to its jobs only."""
        key = self._checkpoint_keys.get(app_id)
        if key is None:
            row = self.store.app(app_id)
            if row is None:
                raise KeyError(app_id)
            key = checkpoint.app_key(self._secret, app_id, row.submitted_at)
            self._checkpoint_keys[app_id] = key
        return key
