"""Reader of ``themis auction`` input files.

Format::

    {"gpus": {"<id>": {"machine": "<name>", "rack": "<name>"}, ...},
     "bids": {"<app>": {"none": <rho if it wins nothing>,
                        "menu": [{"gpus": ["<id>", ...], "rho": <rho with them>}, ...]}}}

Everything is checked before the auction runs; the first problem is raised as a
:class:`ThemisError` naming the file and the JSON path of the bad field (``bids.a.menu[1].rho``).
``machine`` and ``rack`` must be strings but the auction does not use them: a bid's rho
already prices its placement.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themis.auction import Bid, MenuEntry
from themis.errors import ThemisError


@dataclass(frozen=True)
class AuctionInput:
    gpus: list[str]  # offered GPU ids, in file order
    bids: list[Bid]  # in file order


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_auction_file(path: str) -> AuctionInput:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ThemisError("not a UTF-8 text file", source=path) from None
    except OSError as exc:
        raise ThemisError(f"cannot read auction file: {exc.strerror}", source=path) from None
    try:
        raw = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ThemisError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", source=path, line=exc.lineno
        ) from None
    except _DuplicateKey as exc:
        raise ThemisError(f"invalid JSON: key '{exc.args[0]}' appears twice", source=path) from None
    return parse_auction(raw, path)


def parse_auction(raw: Any, source: str) -> AuctionInput:
    """Check decoded JSON and turn it into GPUs and bids."""
    check = _Checker(source)
    top = check.obj(raw, "", {"gpus", "bids"})
    gpus_raw = check.obj(check.key(top, "gpus", ""), "gpus")
    if not gpus_raw:
        raise ThemisError("no GPUs: the auction needs at least one", source=source, field="gpus")
    for gpu_id, info in gpus_raw.items():
        where = f"gpus.{gpu_id}"
        if not gpu_id:
            raise ThemisError("empty GPU id", source=source, field=where)
        info = check.obj(info, where, {"machine", "rack"})
        for key in ("machine", "rack"):
            check.string(check.key(info, key, where), f"{where}.{key}")
    known = set(gpus_raw)
    bids = []
    for app_id, bid_raw in check.obj(check.key(top, "bids", ""), "bids").items():
        where = f"bids.{app_id}"
        if not app_id:
            raise ThemisError("empty app id", source=source, field=where)
        bid_raw = check.obj(bid_raw, where, {"none", "menu"})
        rho_none = check.rho(check.key(bid_raw, "none", where), f"{where}.none")
        menu_raw = check.key(bid_raw, "menu", where)
        if not isinstance(menu_raw, list):
            raise ThemisError(
                f"expected a list of menu entries, got {_kind(menu_raw)}",
                source=source,
                field=f"{where}.menu",
            )
        menu = []
        for e, entry_raw in enumerate(menu_raw):
            at = f"{where}.menu[{e}]"
            entry_raw = check.obj(entry_raw, at, {"gpus", "rho"})
            gpus = check.gpu_list(check.key(entry_raw, "gpus", at), f"{at}.gpus", known)
            menu.append(MenuEntry(gpus, check.rho(check.key(entry_raw, "rho", at), f"{at}.rho")))
        bids.append(Bid(app_id, rho_none, tuple(menu)))
    return AuctionInput(list(gpus_raw), bids)


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str, field: str) -> ThemisError:
        return ThemisError(message, source=self.source, field=field or None)

    def obj(self, value: Any, field: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"expected an object, got {_kind(value)}", field)
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    known = ", ".join(sorted(allowed))
                    raise self.fail(f"unknown key (expected {known})", _join(field, key))
        return value

    def key(self, obj: dict[str, Any], key: str, field: str) -> Any:
        if key not in obj:
            raise self.fail("missing", _join(field, key))
        return obj[key]

    def string(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"expected a string, got {_kind(value)}", field)
        return value

    def rho(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"rho must be a number, got {_kind(value)}", field)
        if not math.isfinite(value) or value <= 0:
            raise self.fail(f"rho must be finite and > 0, got {value}", field)
        return float(value)

    def gpu_list(self, value: Any, field: str, known: set[str]) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(f"expected a list of GPU ids, got {_kind(value)}", field)
        if not value:
            raise self.fail("a menu entry needs at least one GPU", field)
        seen: set[str] = set()
        for k, gpu in enumerate(value):
            at = f"{field}[{k}]"
            if not isinstance(gpu, str):
                raise self.fail(f"a GPU id is a string (a key of 'gpus'), got {_kind(gpu)}", at)
            if gpu not in known:
                raise self.fail(f"unknown GPU '{gpu}' (not in 'gpus')", at)
            if gpu in seen:
                raise self.fail(f"GPU '{gpu}' listed twice", at)
            seen.add(gpu)
        return tuple(value)


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)}"
    if isinstance(value, list):
        return "a list"
    return "an object"
