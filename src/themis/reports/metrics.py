"""The numbers a run is judged by: one row per app and one summary per run.

Every metric is defined once, in ``docs/metrics.md``; this module is that definition in
code. Nothing here reads a clock or a file: a summary is a function of the result.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from themis.fairness.ftf import RemainingWork, posthoc_rho, posthoc_rho_over, t_cluster
from themis.fairness.ideal import PAPER, SLICE, ideal_time
from themis.model.state import AppState, GangWork
from themis.model.workload import AppSpec
from themis.simulator.engine import SimulationResult


@dataclass(frozen=True)
class AppRow:
    """One app's outcome; ``rho`` is its rho by the run's ideal time: ``rho_paper``
    (``posthoc_rho(arrival_s, finish_s, t_cluster_s, n_avg)``) or ``rho_slice``
    (``completion_s / t_slice_s``), docs/metrics.md, "Two ideal times".

    ``model``, ``gangs`` and ``wait_s`` are what a user reads when an app's rho is bad:
    which model it trains, how big its gangs are (``gang_text``), and how long it waited
    from arrival to its first GPU. ``t_slice_s`` is its time on a private slice of
    ``G / n_avg`` GPUs (the slice's ideal time), and ``shared`` whether another app was
    active at some moment between its arrival and its finish (an app that ran alone has
    ``N_avg`` 1: by either definition its time over ``T_cluster``).
    NaN for rows saved before these columns existed.
    """

    app_id: str
    arrival_s: float
    finish_s: float
    completion_s: float
    t_cluster_s: float
    n_avg: float
    rho: float
    model: str = ""
    gangs: str = ""
    wait_s: float = 0.0
    t_slice_s: float = math.nan
    rho_paper: float = math.nan
    rho_slice: float = math.nan
    shared: bool = True


@dataclass(frozen=True)
class RunSummary:
    """One run in a line of numbers (definitions: ``docs/metrics.md``)."""

    policy: str
    apps: int
    jobs: int
    max_rho: float
    jain_rho: float
    mean_completion_s: float
    median_completion_s: float
    makespan_s: float
    gpu_hours: float
    utilization: float
    placement_score: float
    offered_load: float
    rounds: int
    #: Percentiles of rho over apps (linear interpolation between order statistics).
    rho_p50: float = 1.0
    rho_p90: float = 1.0
    rho_p99: float = 1.0
    #: Apps that finished later than on their private 1/N cluster (rho > 1), and their share.
    apps_rho_over_1: int = 0
    share_rho_over_1: float = 0.0
    #: GPU-hours a policy kept idle on purpose (Themis's reservations for waiting gangs).
    reserved_idle_gpu_hours: float = 0.0
    #: Job-level figures (``job_rows``), over the jobs that held a GPU: the wait from
    #: arrival to a job's first GPU, its slowdown (completion over its isolated time at
    #: its best placement), and how many times its gang was started.
    job_wait_mean_s: float = 0.0
    job_wait_p50_s: float = 0.0
    job_wait_p99_s: float = 0.0
    job_wait_max_s: float = 0.0
    job_slowdown_p50: float = 1.0
    job_slowdown_p99: float = 1.0
    job_slowdown_max: float = 1.0
    starts_per_job_mean: float = 0.0
    starts_per_job_max: int = 0
    #: The same per gang size: ``{gang: {"jobs", "wait_p50_s", ..., "starts_max"}}``
    #: (``JOB_FIGURES``), smallest gang first.
    jobs_by_gang: dict[int, dict[str, float]] = field(default_factory=dict)

    #: Themis: auctions that stopped on their node limit or deadline before proving their
    #: allocation optimal, and the largest certified gap among them (log-utility units:
    #: the optimum's product of utilities is at most exp(gap) times the one granted).
    auctions_limited: int = 0
    auction_gap_max: float = 0.0

    #: Which ideal time the rho figures above divide by ("paper" or "slice": the policy's
    #: ``--ideal-time``), and the tail that does not saturate: the max rho over the apps
    #: that shared the cluster (``AppRow.shared``; 0 when every app ran alone), and how
    #: many did.
    ideal_time: str = PAPER
    max_rho_shared: float = 0.0
    apps_shared: int = 0
    #: Both definitions' figures whichever drove the run (NaN in summaries saved before
    #: they existed): max rho, p99, the share of apps above 1, max over shared apps.
    max_rho_paper: float = math.nan
    rho_p99_paper: float = math.nan
    share_rho_over_1_paper: float = math.nan
    max_rho_shared_paper: float = math.nan
    max_rho_slice: float = math.nan
    rho_p99_slice: float = math.nan
    share_rho_over_1_slice: float = math.nan
    max_rho_shared_slice: float = math.nan


@dataclass(frozen=True)
class JobRow:
    """One job that held a GPU: when it arrived (with its app), first held a GPU and
    finished, its isolated time (its work alone on the cluster at its best placement,
    ``isolated_time``) and how many times its gang was started (its rows in
    ``allocations.csv``: a preemption, a migration or a resume after a rung adds one)."""

    app_id: str
    job_id: str
    gang: int
    arrival_s: float
    first_gpu_s: float
    finish_s: float
    isolated_s: float
    starts: int

    @property
    def wait_s(self) -> float:
        return self.first_gpu_s - self.arrival_s

    @property
    def completion_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def slowdown(self) -> float:
        """Completion over isolated time: 1 when the job ran at once, without a break, at
        its best placement; 1 for a job with no isolated time."""
        if self.isolated_s <= 0:
            return 1.0
        return self.completion_s / self.isolated_s


def gang_text(gangs: Sequence[int]) -> str:
    """Gang sizes as ``GxN`` groups, largest gang first: ``8x20`` is twenty 8-GPU trials,
    ``4x2 1x3`` two 4-GPU and three 1-GPU ones; empty for an app without jobs."""
    counts = Counter(gangs)
    return " ".join(f"{g}x{counts[g]}" for g in sorted(counts, reverse=True))


def first_gpu_times(result: SimulationResult) -> dict[str, float]:
    """When each app first held a GPU, from the run's allocation intervals (apps that
    never held one are absent): derived here so the simulator records nothing extra."""
    first: dict[str, float] = {}
    for interval in result.intervals:
        known = first.get(interval.app_id)
        if known is None or interval.start < known:
            first[interval.app_id] = interval.start
    return first


def app_rows(result: SimulationResult) -> list[AppRow]:
    """One row per app, in the order the simulator admitted them (arrival order)."""
    first = first_gpu_times(result)
    rows = []
    shape = result.cluster.shape
    spans = []
    for app in result.apps:
        if app.finish is None:
            raise AssertionError(f"app {app.app_id} has no finish time in a finished run")
        spans.append((app.arrival, app.finish))
    shared = shared_cluster(spans)
    truth = {a.app_id: a for a in result.workload.apps}
    for app, was_shared in zip(result.apps, shared, strict=True):
        assert app.finish is not None
        n_avg = result.n_avg[app.app_id]
        spec = app.spec
        # An app that never held a GPU (no work) waited until it finished.
        started = first.get(app.app_id, app.finish)
        work = true_work(result, app, truth.get(app.app_id))
        t_slice = ideal_time(SLICE, app.t_cluster, work, shape, n_avg)
        rho_paper = posthoc_rho(app.arrival, app.finish, app.t_cluster, n_avg)
        rho_slice = posthoc_rho_over(app.arrival, app.finish, t_slice)
        rows.append(
            AppRow(
                app.app_id,
                app.arrival,
                app.finish,
                app.finish - app.arrival,
                app.t_cluster,
                n_avg,
                rho_paper if result.ideal_time == PAPER else rho_slice,
                spec.model,
                gang_text([j.gang for j in spec.jobs]),
                started - app.arrival,
                t_slice,
                rho_paper,
                rho_slice,
                was_shared,
            )
        )
    return rows


def true_work(result: SimulationResult, app: AppState, spec: AppSpec | None) -> RemainingWork:
    """The work the app really did, ready to time: its true jobs (those of the workload,
    not what it declared) at the iterations they really ran (``work_done``: a search's
    trials stopped at a rung count to the rung), on its model's true profile. The same
    work the simulator's final ``T_cluster`` is of (``engine._t_cluster_of``), so the
    slice's ideal time and the paper's are of one amount of work. ``spec``: the app's in
    the workload (None for a part of an app that split itself)."""
    if spec is None or len(spec.jobs) != len(app.jobs):
        spec = app.spec  # a part of an app that split itself: its parts' own jobs
    did = tuple(
        replace(job, work=result.work_done.get((app.app_id, state.job_id), job.work))
        for job, state in zip(spec.jobs, app.jobs, strict=True)
    )
    profile = result.workload.profiles[spec.model]
    fresh = AppState(replace(spec, jobs=did), profile, 0.0).remaining_by_gang(app.arrival)
    return RemainingWork(profile, fresh)


def shared_cluster(spans: Sequence[tuple[float, float]]) -> list[bool]:
    """Per (arrival, finish): whether another app was active at some moment strictly
    between them (its own span overlaps), in the order given.

    An app that ran alone from arrival to finish has ``N_avg`` 1 and rho 1 under any
    policy that runs it as ``T_cluster``'s estimate assumes, so the max rho of a run
    saturates at 1 wherever such an app is the worst; the max over the others does not.
    An app with no work (finished at its arrival) shares nothing and counts for no one."""
    order = sorted(range(len(spans)), key=lambda k: spans[k][0])
    live = [k for k in order if spans[k][1] > spans[k][0]]
    out = [False] * len(spans)
    latest = -math.inf  # the latest finish of the live apps before in arrival order
    for pos, k in enumerate(live):
        arrival, finish = spans[k]
        after = live[pos + 1] if pos + 1 < len(live) else None
        out[k] = latest > arrival or (after is not None and spans[after][0] < finish)
        latest = max(latest, finish)
    return out


def isolated_time(result: SimulationResult, model: str, gang: int, work: float) -> float:
    """Seconds ``work`` iterations of ``model`` take on a ``gang`` alone on the run's
    cluster, at the best placement the cluster has for the gang (the fastest GPU type on
    a typed cluster): the same estimator as ``T_cluster``, for one job."""
    profile = result.workload.profiles[model]
    return t_cluster(profile, {gang: GangWork(work, work, 1)}, result.cluster.shape)


def job_rows(result: SimulationResult) -> list[JobRow]:
    """One row per job that held a GPU, in app order then job order. Jobs that never
    held one (no work to do) are left out: they neither waited nor ran."""
    first: dict[tuple[str, str], float] = {}
    starts: Counter[tuple[str, str]] = Counter()
    for interval in result.intervals:
        key = (interval.app_id, interval.job_id)
        starts[key] += 1
        known = first.get(key)
        if known is None or interval.start < known:
            first[key] = interval.start
    truth = {a.app_id: a for a in result.workload.apps}
    rows = []
    for app in result.apps:
        spec = truth.get(app.app_id, app.spec)
        for job, true_job in zip(app.jobs, spec.jobs, strict=True):
            key = (app.app_id, job.job_id)
            started = first.get(key)
            if started is None:
                continue
            if job.finished_at is None:
                raise AssertionError(f"job {job.job_id} has no finish time in a finished run")
            work = result.work_done.get(key, true_job.work)
            rows.append(
                JobRow(
                    app.app_id,
                    job.job_id,
                    job.gang,
                    app.arrival,
                    started,
                    job.finished_at,
                    isolated_time(result, app.spec.model, job.gang, work),
                    starts[key],
                )
            )
    return rows


#: The per-gang figures of ``RunSummary.jobs_by_gang``, in order.
JOB_FIGURES = (
    "jobs",
    "wait_mean_s",
    "wait_p50_s",
    "wait_p99_s",
    "wait_max_s",
    "slowdown_p50",
    "slowdown_p99",
    "slowdown_max",
    "starts_mean",
    "starts_max",
)


def job_figures(jobs: Sequence[JobRow]) -> dict[str, float]:
    """``JOB_FIGURES`` over ``jobs`` (at least one)."""
    waits = [j.wait_s for j in jobs]
    slowdowns = [j.slowdown for j in jobs]
    starts = [j.starts for j in jobs]
    return {
        "jobs": len(jobs),
        "wait_mean_s": statistics.fmean(waits),
        "wait_p50_s": percentile(waits, 50),
        "wait_p99_s": percentile(waits, 99),
        "wait_max_s": max(waits),
        "slowdown_p50": percentile(slowdowns, 50),
        "slowdown_p99": percentile(slowdowns, 99),
        "slowdown_max": max(slowdowns),
        "starts_mean": statistics.fmean(starts),
        "starts_max": max(starts),
    }


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation between the closest
    order statistics (numpy's default): well defined for any non-empty sample, and
    p50 is the median."""
    if not values:
        raise ValueError("a percentile of no values is undefined")
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 when all values are equal,
    ``1/n`` when one value holds everything. All zeros count as equal (1.0)."""
    if not values:
        raise ValueError("Jain's index of no values is undefined")
    square_sum = sum(x * x for x in values)
    if square_sum == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square_sum)


def summarize(
    result: SimulationResult,
    rows: Sequence[AppRow] | None = None,
    jobs: Sequence[JobRow] | None = None,
) -> RunSummary:
    """The run's summary; pass ``rows`` and ``jobs`` if already computed by
    :func:`app_rows` and :func:`job_rows`."""
    rows = list(rows) if rows is not None else app_rows(result)
    jobs = list(jobs) if jobs is not None else job_rows(result)
    if not rows:
        raise ValueError("a run with no apps has no summary")
    rhos = [r.rho for r in rows]
    shared_rhos = [r.rho for r in rows if r.shared]
    tails = {
        name: rho_tail([getattr(r, f"rho_{name}") for r in rows], [r.shared for r in rows])
        for name in (PAPER, SLICE)
    }
    completions = [r.completion_s for r in rows]
    makespan = max(r.finish_s for r in rows) - min(r.arrival_s for r in rows)
    gpu_seconds = 0.0
    best_seconds = 0.0
    for interval in result.intervals:
        held = (interval.end - interval.start) * len(interval.gpus)
        gpu_seconds += held
        if interval.best_span:
            best_seconds += held
    capacity = result.cluster.size * makespan
    over = sum(1 for rho in rhos if rho > 1.0)
    figures: dict[str, float] = job_figures(jobs) if jobs else {}
    by_gang: dict[int, list[JobRow]] = {}
    for job in jobs:
        by_gang.setdefault(job.gang, []).append(job)
    return RunSummary(
        policy=result.policy,
        apps=len(rows),
        jobs=result.workload.job_count,
        max_rho=max(rhos),
        jain_rho=jain_index(rhos),
        mean_completion_s=statistics.fmean(completions),
        median_completion_s=statistics.median(completions),
        makespan_s=makespan,
        gpu_hours=gpu_seconds / 3600.0,
        utilization=gpu_seconds / capacity if capacity > 0 else 0.0,
        placement_score=best_seconds / gpu_seconds if gpu_seconds > 0 else 1.0,
        offered_load=result.workload.offered_load(result.cluster.size),
        rounds=result.rounds,
        rho_p50=percentile(rhos, 50),
        rho_p90=percentile(rhos, 90),
        rho_p99=percentile(rhos, 99),
        apps_rho_over_1=over,
        share_rho_over_1=over / len(rhos),
        reserved_idle_gpu_hours=sum(e - s for s, e, gpus in result.held_idle for _ in gpus)
        / 3600.0,
        job_wait_mean_s=figures.get("wait_mean_s", 0.0),
        job_wait_p50_s=figures.get("wait_p50_s", 0.0),
        job_wait_p99_s=figures.get("wait_p99_s", 0.0),
        job_wait_max_s=figures.get("wait_max_s", 0.0),
        job_slowdown_p50=figures.get("slowdown_p50", 1.0),
        job_slowdown_p99=figures.get("slowdown_p99", 1.0),
        job_slowdown_max=figures.get("slowdown_max", 1.0),
        starts_per_job_mean=figures.get("starts_mean", 0.0),
        starts_per_job_max=int(figures.get("starts_max", 0)),
        jobs_by_gang={g: job_figures(by_gang[g]) for g in sorted(by_gang)},
        auctions_limited=int(result.policy_report.get("auctions_limited", 0)),
        auction_gap_max=result.policy_report.get("auction_gap_max", 0.0),
        ideal_time=result.ideal_time,
        max_rho_shared=max(shared_rhos, default=0.0),
        apps_shared=len(shared_rhos),
        max_rho_paper=tails[PAPER][0],
        rho_p99_paper=tails[PAPER][1],
        share_rho_over_1_paper=tails[PAPER][2],
        max_rho_shared_paper=tails[PAPER][3],
        max_rho_slice=tails[SLICE][0],
        rho_p99_slice=tails[SLICE][1],
        share_rho_over_1_slice=tails[SLICE][2],
        max_rho_shared_slice=tails[SLICE][3],
    )


def rho_tail(rhos: Sequence[float], shared: Sequence[bool]) -> tuple[float, float, float, float]:
    """Of one definition's rhos (at least one): the max, the p99, the share above 1, and
    the max over the apps that shared the cluster (0 when none did)."""
    return (
        max(rhos),
        percentile(rhos, 99),
        sum(1 for r in rhos if r > 1.0) / len(rhos),
        max((r for r, s in zip(rhos, shared, strict=True) if s), default=0.0),
    )
