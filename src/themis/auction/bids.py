"""What an agent tells the arbiter: its rho with nothing more, and with each GPU bundle."""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple


class MenuEntry(NamedTuple):
    """If the app also got ``gpus``, its rho would be ``rho``. ``gpus`` is ordered by the
    app's preference, which the whole-GPU rounding rule uses to decide what to keep.

    Named tuples, this and ``Bid``, not frozen dataclasses: every agent makes them every
    round, and a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``."""

    gpus: tuple[Hashable, ...]
    rho: float


class Bid(NamedTuple):
    """One app's bid: its rho if it won nothing this round (``rho_none``) and a menu of
    GPU bundles with the rho each would give it. The auction values a bundle by the
    improvement ``rho_none / rho``."""

    app_id: str
    rho_none: float
    menu: tuple[MenuEntry, ...]
