"""Every default of the command line, in one place, with why it is what it is.

The library's own defaults (``PolicyOptions``, ``load_workload``) agree with these where
they overlap; a test keeps them in step.
"""

from __future__ import annotations

from themis.simulator.engine import DEFAULT_BATCH_WINDOW
from themis.workload.loader import DEFAULT_APP_INTERVAL as _LOADER_APP_INTERVAL

#: The paper's workload: the Philly HyperDrive trace bundled with the package.
TRACE = "hyperdrive"

#: The policy this project is about.
POLICY = "themis"

#: 2 racks x 4 machines x 8 GPUs = 64 GPUs: small enough to simulate in seconds, with all
#: three placement spans (machine, rack, cluster) present.
CLUSTER = "2x4x8"

#: Fairness knob f (0 <= f < 1): the worst ceil((1 - f) * n) apps bid in each auction.
#: 0.8 lets the worst fifth bid: between efficiency (f = 0, everyone bids) and fairness
#: (f near 1, only the worst-off app bids).
FAIRNESS_KNOB = 0.8

#: Lease length in seconds. The paper evaluates minutes to tens of minutes; 10 minutes
#: keeps preemptions rare next to hour-long jobs while letting rho be revisited often.
LEASE_S = 600.0

#: Lease ends this close (seconds) are batched into one auction round (the simulator's
#: default, re-exported here).
BATCH_WINDOW_S = DEFAULT_BATCH_WINDOW

#: Seed of the model draw for traces without a model column, and of the policy's choices.
SEED = 0

#: ``--arrivals`` has no single default: HyperDrive apps arrive one every
#: ``APP_INTERVAL_S`` seconds in trace order (``interval``; at their own start times the
#: cluster is uncontended), every other format at its trace times (``trace``), since a
#: generated or production trace's arrival times are the point of it
#: (``themis.workload.default_arrivals``).

#: Seconds between arrivals in ``interval`` mode: about 1.4x the 64-GPU cluster's capacity
#: with the HyperDrive trace (the loader's default, re-exported here).
APP_INTERVAL_S = _LOADER_APP_INTERVAL

#: Where runs are written: ``OUT_DIR/<policy>`` for simulate, ``OUT_DIR/compare`` for compare.
OUT_DIR = "out"
