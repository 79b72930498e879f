"""With no estimate error, no restart cost and no online search, every schedule is the one
the simulator made before policies saw estimates instead of the truth, bit for bit.

The fingerprints were recorded with the code before that change (commit 56872c1) on the
first 12 apps of the bundled HyperDrive trace with the CLI's defaults: a hash of every
allocation interval and every app's finish and T_cluster, as exact float reprs. The full
trace was checked the same way (summary.json, apps.csv, allocations.csv of ``themis
simulate`` for every policy; see the branch's report).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from themis.cli.run_options import load_inputs, make_config
from themis.model.cluster import Cluster
from themis.model.workload import Workload
from themis.policies import make_policy
from themis.simulator.engine import Conditions, simulate

#: policy -> (rounds, fingerprint, makespan) before estimates existed.
RECORDED = {
    "fifo": (105, "9daa65ad21f9803c", 140295.0),
    "max-min": (104, "4c2c101ec84aea7f", 137990.0),
    "srtf": (105, "f4ec441c7ef006db", 137912.0),
    # themis's 0.2 ranking (``--ranking verified-tiered``) without ``--gang-at-once``,
    # set by the test: neither is the default any more
    "themis": (327, "21e1e8c4c18bb988", 139112.0),
    "optimus": (308, "12b2c27117b6cd08", 137912.0),
    "slaq": (307, "fb21843f3134eee2", 137912.0),
    # the authors' defaults, promotion rule and preemption choice
    "tiresias": (314, "744ed19a0b33862d", 137912.0),
    "las": (307, "78ac96bae176d1a1", 137912.0),
    # its own 60 s time slice instead of the lease
    "gandiva": (2277, "b108983bcd38d1ee", 139465.0),
    # recorded before gavel knew GPU types (a350dcb): typed clusters leave it unchanged;
    # gavel-mmf is that policy renamed (gavel's max-min program), bit for bit
    "gavel-mmf": (468, "77b9c0002d427b90", 138632.0),
    # gavel with Gavel's fixed finish-time-fairness denominator
    "gavel": (467, "354a545834c50c9d", 138272.0),
}


@pytest.fixture(scope="module")
def bundled() -> tuple[Workload, Cluster, object]:
    config = make_config()
    workload, cluster = load_inputs(config)
    return replace(workload, apps=workload.apps[:12]), cluster, config.options


@pytest.mark.parametrize("policy", sorted(RECORDED))
def test_schedule_unchanged_bit_for_bit(policy: str, bundled: tuple) -> None:
    workload, cluster, options = bundled
    if policy == "themis":
        options = replace(options, ranking="verified-tiered", gang_at_once=False)
    r = simulate(workload, cluster, make_policy(policy, options), conditions=Conditions(0.0, 0.0))
    text = repr(sorted((i.start, i.end, i.job_id, i.gpus) for i in r.intervals)) + repr(
        [(a.app_id, a.finish, a.t_cluster) for a in r.apps]
    )
    makespan = max(a.finish for a in r.apps if a.finish is not None)
    got = (r.rounds, hashlib.sha256(text.encode()).hexdigest()[:16], makespan)
    assert got == RECORDED[policy]


def test_estimate_error_changes_what_policies_see_not_the_truth(bundled: tuple) -> None:
    """A control for the test above: with error the schedule changes (the fingerprint can
    fail), while every app's T_cluster in the report stays the truth."""
    workload, cluster, options = bundled
    exact = simulate(workload, cluster, make_policy("srtf", options))
    noisy = simulate(
        workload, cluster, make_policy("srtf", options), conditions=Conditions(0.5, 0.0)
    )
    assert [a.t_cluster for a in noisy.apps] == [a.t_cluster for a in exact.apps]
    assert sorted((i.start, i.job_id) for i in noisy.intervals) != sorted(
        (i.start, i.job_id) for i in exact.intervals
    )


def test_gandiva_with_the_lease_as_its_slice_is_the_gandiva_recorded_before(bundled: tuple) -> None:
    """Gandiva has its own 60 s time slice; with the slice set to the lease it makes
    exactly the schedule recorded before the slice existed (only the slice changed)."""
    workload, cluster, options = bundled
    policy = make_policy("gandiva", replace(options, gandiva_slice=options.lease))
    r = simulate(workload, cluster, policy, conditions=Conditions(0.0, 0.0))
    text = repr(sorted((i.start, i.end, i.job_id, i.gpus) for i in r.intervals)) + repr(
        [(a.app_id, a.finish, a.t_cluster) for a in r.apps]
    )
    makespan = max(a.finish for a in r.apps if a.finish is not None)
    got = (r.rounds, hashlib.sha256(text.encode()).hexdigest()[:16], makespan)
    assert got == (310, "acef44aa027d2a62", 139112.0)
