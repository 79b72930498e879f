"""App tokens: each app gets a random token at submit and acts only for itself with it.

Only a token's SHA-256 is stored, so reading the state database does not reveal tokens;
comparison is constant-time. Why a hash and not a password KDF: tokens are 256 random
bits, not human passwords, so a fast hash cannot be brute-forced.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets


def new_token() -> str:
    """A fresh URL-safe token (256 random bits)."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: str | None, stored_hash: str) -> bool:
    """Whether ``token`` is the one whose hash is stored (False for None)."""
    if not token:
        return False
    return hmac.compare_digest(token_hash(token), stored_hash)
