"""The runtime's /metrics carries the policy's auction figures (docs/auction.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client")

from themis.runtime.loop.metrics import ArbiterMetrics  # noqa: E402


def test_auction_figures_are_exported() -> None:
    metrics = ArbiterMetrics()
    metrics.auction_figures({"auctions_limited": 3.0, "auction_gap_max": 0.25})
    text = metrics.render().decode()
    assert "themis_auctions_limited 3.0" in text
    assert "themis_auction_gap_max 0.25" in text


def test_policies_without_auctions_set_nothing() -> None:
    metrics = ArbiterMetrics()
    metrics.auction_figures({})
    assert "themis_auctions_limited 0.0" in metrics.render().decode()
