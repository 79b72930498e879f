"""Every default of the command line, in one place, with why it is what it is.

The library's own defaults (``PolicyOptions``, ``load_workload``) agree with these where
they overlap; a test keeps them in step.
"""

from __future__ import annotations

from themis.mechanism.view import DEFAULT_BATCH_WINDOW
from themis.workload.loader import DEFAULT_APP_INTERVAL as _LOADER_APP_INTERVAL

#: The paper's workload: the Philly HyperDrive trace bundled with the package.
TRACE = "hyperdrive"

#: The policy this project is about.
POLICY = "themis"

#: 2 racks x 4 machines x 8 GPUs = 64 GPUs: small enough to simulate in seconds, with all
#: three placement spans (machine, rack, cluster) present.
CLUSTER = "2x4x8"

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

#: Estimate error E of what policies know about job lengths (DESIGN §9): 0, each policy
#: sees every job's true work, which keeps every earlier result reproducible. Realistic
#: values are 0.2 to 0.5 (users' declared budgets); see docs/knowledge.md.
ESTIMATE_ERROR = 0.0

#: Seconds each (re)start of a gang costs (checkpoint load, process start, CUDA and NCCL
#: set-up). 0 keeps every earlier result reproducible. RESTART_COST_REALISTIC_S is what we
#: would pick for deep-learning jobs: the runtime measured 1.5-3 s per hand-over for a
#: numpy MLP on a 2-core machine (docs/runtime.md, "Measured"); a CNN adds loading its
#: checkpoint, CUDA context and data-loader warm-up, typically tens of seconds.
RESTART_COST_S = 0.0
RESTART_COST_REALISTIC_S = 30.0
