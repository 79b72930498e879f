"""The CLI's side of the API: plain HTTP(S) with the standard library.

Why not httpx or requests: the client needs five calls and no connection pool, and with
``urllib`` a user's machine needs nothing beyond themis itself to submit (no runtime
extra, no Ray). Every failure is one :class:`ThemisError` line: the arbiter's own
``detail`` when it answered, or what went wrong reaching it.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from themis.errors import ThemisError
from themis.runtime.state.appfile import read_app_text

#: Where ``themis serve`` listens unless told otherwise (``--listen``).
DEFAULT_SERVER = "http://127.0.0.1:7878"
#: A 429 (over the token's rate) is waited out and asked again this many times, each
#: wait its ``Retry-After`` capped at ``MAX_RETRY_AFTER`` seconds.
RATE_RETRIES = 5
MAX_RETRY_AFTER = 10.0


#: Attempts of one submit whose connection failed (the same idempotency key each time:
#: a retry of a submit the arbiter did take gets that app back, not a second one), and
#: the pause before each retry.
SUBMIT_ATTEMPTS = 3
RETRY_PAUSE = 1.0


class Unreachable(ThemisError):
    """No answer: the connection failed, before or after the arbiter read the request."""


class Client:
    def __init__(self, server: str, token: str | None, timeout: float = 60.0) -> None:
        server = server.rstrip("/")
        if not server.startswith(("http://", "https://")):
            raise ThemisError(f"not an http(s) URL: {server!r}", field="--server")
        self.server = server
        self.token = token
        self.timeout = timeout
        ca = os.environ.get("THEMIS_CA_FILE")
        self.context = ssl.create_default_context(cafile=ca) if server.startswith("https") else None

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        for _ in range(RATE_RETRIES):
            try:
                return self._call_once(method, path, body, timeout, headers)
            except _RateLimited as exc:
                time.sleep(exc.wait)
        return self._call_once(method, path, body, timeout, headers, retry=False)

    def _call_once(
        self,
        method: str,
        path: str,
        body: Any,
        timeout: float | None,
        headers: dict[str, str] | None = None,
        retry: bool = True,
    ) -> Any:
        if not self.token:
            raise ThemisError("a token is needed (--token or THEMIS_TOKEN)", field="--token")
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                **(headers or {}),
            },
        )
        try:
            # The scheme is http(s), checked in __init__ (no file:// or custom ones).
            with urllib.request.urlopen(  # nosec B310
                request, timeout=timeout or self.timeout, context=self.context
            ) as response:
                payload = response.read()
                kind = response.headers.get("content-type", "")
        except urllib.error.HTTPError as exc:
            if exc.code == 429 and retry:
                raise _RateLimited(_retry_after(exc.headers.get("retry-after"))) from None
            raise ThemisError(_detail(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(
                f"no arbiter answers at {self.server} ({reason}); is 'themis serve' running "
                "there? (--server or THEMIS_SERVER)"
            ) from None
        if kind.startswith("application/json"):
            return json.loads(payload)
        return payload.decode("utf-8")

    def status(self, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        query = f"?offset={offset}" + ("" if limit is None else f"&limit={limit}")
        return self._call("GET", "/v1/status" + query)

    def submit(
        self, app_file: str | Path, key: str | None = None, attempts: int = SUBMIT_ATTEMPTS
    ) -> dict[str, Any]:
        """Submit an app file. Sent with an ``Idempotency-Key`` (``key``, else a random
        UUID) and sent again with the same key when the connection failed, up to
        ``attempts`` times: if the arbiter took the first, the retry gets that app (with
        a new token, the first answer's being lost), not a refusal of a taken name."""
        text = read_app_text(app_file)  # refused unread when too large
        base = str(Path(app_file).resolve().parent)
        body = {"text": text, "source": str(app_file), "base_dir": base}
        headers = {"Idempotency-Key": key or str(uuid.uuid4())}
        for attempt in range(1, attempts + 1):
            try:
                return self._call("POST", "/v1/apps", body, headers=headers)
            except Unreachable:
                if attempt == attempts:
                    raise
                time.sleep(RETRY_PAUSE * attempt)
        raise AssertionError("unreachable")  # the loop returns or raises

    def cancel(self, app_id: str, wait: float) -> str:
        path = f"/v1/apps/{_quote(app_id)}/cancel?wait={wait:g}"
        return self._call("POST", path, {}, timeout=wait + 30.0)["reply"]

    def release(self, app_id: str, trial: str) -> str:
        return self._call("POST", f"/v1/apps/{_quote(app_id)}/release", {"trial": trial})["reply"]

    def logs(self, app_id: str, after: int = 0) -> dict[str, Any]:
        return self._call("GET", f"/v1/apps/{_quote(app_id)}/logs?after={after}")

    def rotate(self, which: str) -> dict[str, Any]:
        return self._call("POST", "/v1/tokens/rotate", {"which": which})

    def metrics(self) -> str:
        return self._call("GET", "/metrics")


class _RateLimited(Exception):
    def __init__(self, wait: float) -> None:
        self.wait = wait


def _retry_after(value: str | None) -> float:
    try:
        wait = float(value or 1.0)
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.1), MAX_RETRY_AFTER) if wait == wait else 1.0


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(exc.read()).get("detail")
    except (ValueError, AttributeError, OSError):
        detail = None
    if not isinstance(detail, str):
        detail = f"the arbiter answered HTTP {exc.code} {exc.reason}"
    if exc.code in (401, 403):
        return f"refused: {detail}"
    return detail
