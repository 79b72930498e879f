"""A job-level baseline is one rule: a rank (and, if it leases, a grant end) on the
rank-and-pack engine (``policies/_ranked.py``), with no incremental code of its own; the
engine makes it incremental for the simulator and the runtime alike. Shown here with a
rule no module has, "the largest gang first", on a hand-derived schedule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.simulator.test_hand_schedule import approx, assert_intervals, finishes, workload
from themis.model.cluster import Cluster
from themis.model.state import JobState
from themis.policies import PolicyOptions, SchedulingView
from themis.policies._ranked import RankedPolicy
from themis.policies.base import Schedule
from themis.policies.fifo import FifoPolicy
from themis.policies.las import LasPolicy
from themis.policies.srtf import SrtfPolicy
from themis.simulator.engine import simulate


class LargestGangFirst(RankedPolicy):
    """The whole policy: its name and its rank (smaller runs first)."""

    name = "largest-gang-first"

    def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
        return -float(job.gang)


class AskedAsTheRuntimeAsks(LargestGangFirst):
    """The same rule asked for the full schedule of views without the simulator's books
    (the base class fills them, as ``themis serve`` does: ``mechanism/books.py``)."""

    incremental = False

    def schedule(self, view: SchedulingView) -> Schedule:
        bare = replace(view, free=None, changed=None, order=None, ending_grants=None)
        return super().schedule(bare)


APPS = [("a", 0.0, [(1, 10.0)]), ("b", 0.0, [(2, 20.0)]), ("c", 5.0, [(1, 5.0)])]


def test_a_rule_of_one_rank_schedules_as_derived_by_hand() -> None:
    # 1x1x2. 0: b0 (2 GPUs) outranks a0 and takes both GPUs; a0 waits (does not fit).
    # 5: c0 arrives; b0 still outranks it and a0 (each round ranks the running jobs too).
    # 10: b0 ends (20 iterations on 2 GPUs); a0 and c0 tie, the earlier app first, both
    # fit: a0 on GPU 0, c0 on GPU 1; c0 ends at 15, a0 at 20.
    for policy in (LargestGangFirst(PolicyOptions()), AskedAsTheRuntimeAsks(PolicyOptions())):
        r = simulate(workload(APPS), Cluster.from_spec("1x1x2"), policy, batch_window=0.0)
        assert finishes(r) == {"a": approx(20.0), "b": approx(10.0), "c": approx(15.0)}
        assert_intervals(
            r, [(0.0, 10.0, "b0", (0, 1)), (10.0, 20.0, "a0", (0,)), (10.0, 15.0, "c0", (1,))]
        )


def test_the_rules_are_incremental_without_code_of_their_own() -> None:
    """This one, and the baselines written this way: FIFO, LAS, SRTF."""
    for rule in (LargestGangFirst, FifoPolicy, LasPolicy, SrtfPolicy):
        assert issubclass(rule, RankedPolicy) and rule.incremental
        assert "changes" not in vars(rule) and "schedule" not in vars(rule)


def test_a_first_fit_rule_that_would_preempt_is_refused() -> None:
    with pytest.raises(TypeError, match="never preempts"):

        class Preempting(RankedPolicy):  # noqa: F841 - refused as it is made
            name = "preempting-first-fit"
            first_fit = True

            def rank(self, job: JobState, now: float, cluster: Cluster) -> float:
                return 0.0
