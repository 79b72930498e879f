"""The Partial Allocation auction (Cole, Gkatzelis, Goel 2013) over concrete GPU bundles."""

from themis.auction.bids import Bid, MenuEntry
from themis.auction.partial_allocation import AuctionOutcome, partial_allocation

__all__ = ["AuctionOutcome", "Bid", "MenuEntry", "partial_allocation"]
