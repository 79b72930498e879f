"""Load what the auction's solvers import lazily, before an auction's clock starts.

The solvers import numpy and HiGHS's bindings (``highspy``) on first use, so that
``themis --help`` and small simulations start without them. Under a deadline that first
use would fall inside the auction's own time: importing them takes ~0.2-0.5 s of a 1 s
deadline, more on a loaded machine, and was measured to leave gaps of 76-78% at 1,000
bidders. A caller that will run auctions under a deadline calls ``load_solvers`` first.
"""

from __future__ import annotations


def load_solvers() -> None:
    """Import numpy, highspy and the solver modules that use them (idempotent)."""
    import themis.auction.lp_path  # noqa: F401 - numpy and highspy, at import
    import themis.auction.mip  # noqa: F401
