"""A submit retried with its idempotency key gets the app it created, not a second one.

A submit whose answer was lost (the connection cut, the arbiter killed after the app
was stored) could not be retried: the name was taken, and the app's token, shown once
in the lost answer, was gone. The client sends an ``Idempotency-Key`` with each submit
(a random UUID, the same on every retry of that submit); the store keeps its SHA-256
with the principal that sent it and the SHA-256 of the request, beside the app.

A repeat from the same principal with the same key and the same request is answered
with the same app and a **new token**: the store keeps only token hashes, so the first
token cannot be shown again, and the app's token is replaced (the old one is refused
from then on). That is safe because whoever sends the key holds the answer's token
either way: the first answer never arrived, or the same client got both and uses the
last. The same key with another request is a :class:`Conflict` (409); another
principal's key is another key (a fresh submit, refused if the name is taken).
"""

from __future__ import annotations

from typing import Any

from themis.runtime.loop.commands import Conflict
from themis.runtime.state.store import Store, SubmitKey


def replay(store: Store, payload: dict[str, Any], now: float) -> dict[str, Any] | None:
    """The answer to a repeated submit (the app's token replaced by the payload's), or
    None when the payload's key is new (or absent): then it is a submit like any."""
    key: SubmitKey | None = payload.get("key")
    if key is None:
        return None
    known = store.submitted_with(key.principal, key.key_hash)
    if known is None:
        return None
    if known.body_hash != key.body_hash:
        raise Conflict(
            "this Idempotency-Key was sent before with another request; a new submit "
            "needs a new key",
            field="Idempotency-Key",
        )
    row = store.app(known.app_id)
    if row is None:  # the store holds keys only with their app: never
        return None
    store.set_app_token(known.app_id, payload["token_hash"])
    store.log(now, known.app_id, None, "submit repeated with its idempotency key: new app token")
    return {"app_id": known.app_id, "trials": row.spec.trials, "replayed": True}
