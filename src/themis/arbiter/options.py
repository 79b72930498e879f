"""The choices of Themis's arbiter that the command line offers by name: how it ranks apps
and how a bid values a bundle. Here, not in ``round.py``, so that the policy options and
the CLI can list them without importing the arbiter's round; and the one value the round's
knobs come in (``ArbiterOptions``)."""

from __future__ import annotations

from dataclasses import dataclass

from themis.fairness.ideal import PAPER

#: How Themis's arbiter ranks apps for the offer, the leftover and reservations: by the
#: rho of the work they have done (``verified_rho``: observed progress only, so no
#: declaration moves it; an app that has made nothing by its standing), with N the larger
#: of the app's N_avg and the apps sharing the cluster now (``verified``) or its N_avg
#: alone (``verified-avg-n``, the previous default), the latter with the apps that
#: cannot run on what they hold first (``verified-tiered``, 0.2's default), or by the rho
#: their declared remaining work gives (the paper's), or (``prospective``) by the rho each
#: would reach holding the GPUs it would get this round, as PCS's Themis ranks
#: (``Arbiter._prospective_ranks``).
RANKINGS = ("verified", "verified-avg-n", "verified-tiered", "declared", "prospective")
#: The ranking by the rho an app would reach with the GPUs it would get (``--ranking``).
PROSPECTIVE = "prospective"
#: How a Themis bid values a bundle (``--valuation``): the paper's rho ratio, or the ratio of
#: the remaining times alone, which no uniform misstatement of work can move.
VALUATIONS = ("paper", "remaining")


@dataclass(frozen=True)
class ArbiterOptions:
    """What Themis's round reads, as its policy made it once from its knobs (the Themis
    policy, from ``PolicyOptions``, whose rules they kept): the arbiter takes one value,
    not a parameter per knob, and reads each knob off it.

    ``renew_within_share`` is resolved (on, off), not the knob's "when restarts cost";
    ``reservation_bound`` None is one lease. Defaults are the library's, for callers that
    make an arbiter without the policy (tests, benchmarks)."""

    fairness_knob: float = 0.8
    lease: float = 600.0
    max_menu: int = 32
    reservation_bound: float | None = None
    lease_align: float = 0.0
    ranking: str = "verified"
    renewal_share: float = 0.0
    valuation: str = "paper"
    renew_within_share: bool = False
    gang_at_once: bool = True
    ideal: str = PAPER
