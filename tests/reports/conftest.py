"""A hand-made SimulationResult: two apps on a 1x2x2 cluster with known numbers."""

from __future__ import annotations

import pytest

from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.state import AppState
from themis.model.workload import AppSpec, JobSpec, Workload
from themis.simulator.engine import Interval, SimulationResult

PROFILE = ModelProfile("toy", time_per_iteration=1.0, cross_machine=0.5, cross_rack=0.25)


def make_result(
    apps: list[tuple[str, float, float, float, float]],
    intervals: list[Interval],
    cluster: str = "1x2x2",
    rounds: int = 7,
) -> SimulationResult:
    """``apps``: (app_id, arrival, finish, t_cluster, n_avg) each, with one 2-GPU job of
    ``t_cluster`` iterations."""
    specs = tuple(
        AppSpec(app_id, arrival, "toy", (JobSpec(f"{app_id}-j", 2, t_cl),))
        for app_id, arrival, _, t_cl, _ in apps
    )
    states = []
    for spec, (_, _, finish, t_cl, _) in zip(specs, apps, strict=True):
        state = AppState(spec, PROFILE, t_cl)
        state.finish = finish
        for job in state.jobs:
            job.finished_at = finish
        states.append(state)
    workload = Workload(specs, {"toy": PROFILE}, "hand-made")
    n_avg = {app_id: n for app_id, _, _, _, n in apps}
    return SimulationResult(
        "hand", workload, Cluster.from_spec(cluster), states, intervals, rounds, n_avg
    )


@pytest.fixture
def result() -> SimulationResult:
    # a: arrives 0, finishes 100, alone-time 50, N_avg 2   -> rho 1.0
    # b: arrives 40, finishes 340, alone-time 100, N_avg 1.5 -> rho 2.0
    return make_result(
        [("a", 0.0, 100.0, 50.0, 2.0), ("b", 40.0, 340.0, 100.0, 1.5)],
        [
            # Machines: GPUs 0,1 and 2,3. Listed out of start order on purpose.
            # b moved across machines at 100: not its best span (a 2-GPU gang fits in one).
            Interval(100.0, 340.0, "b", "b-j", (1, 2), False),
            Interval(0.0, 100.0, "a", "a-j", (0, 1), True),
            Interval(40.0, 100.0, "b", "b-j", (2, 3), True),
        ],
    )


def _browser_skips(terminalreporter) -> int:
    return sum(
        "chromium is not installed" in str(report.longrepr)
        for report in terminalreporter.stats.get("skipped", [])
    )


def pytest_unconfigure(config) -> None:
    """Say it last, after the counts, when the browser tests were skipped: in a run of
    the whole suite the skip reasons are easy to miss among the other lines."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = _browser_skips(reporter)
    if skipped:
        reporter.write_line(
            f"NOTE: {skipped} screenshot tests of report.html did not run: chromium is not "
            "installed (apt-get install -y chromium; .ci/run installs it)",
            yellow=True,
            bold=True,
        )
