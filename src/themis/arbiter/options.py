"""The choices of Themis's arbiter that the command line offers by name: how it ranks apps
and how a bid values a bundle. Here, not in ``round.py``, so that the policy options and
the CLI can list them without importing the arbiter's round."""

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
