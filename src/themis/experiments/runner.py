"""Many independent simulations, run in worker processes, with live progress.

Runs share nothing and each is deterministic, so they parallelize perfectly over processes
(threads would share one interpreter lock). Results come back as :class:`RunRecord`, small
enough to pickle; workers report each finished app through a queue, so one progress bar
can follow every run at once. ``workers=1`` runs everything in this process, in order:
what tests and debuggers want.

Stopping: workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent alone
decides) and die with the parent (Linux's parent-death signal), and when the batch stops
early for any reason (an error, Ctrl-C, SIGTERM turned into an exception by the caller)
the parent terminates the workers at once rather than waiting for their runs to finish,
so nothing is left running.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from themis.model.cluster import Cluster
from themis.model.workload import Workload
from themis.policies import PolicyOptions, make_policy
from themis.reports.files import write_run
from themis.reports.record import RunRecord, record_run
from themis.simulator import simulate
from themis.simulator.engine import DEFAULT_BATCH_WINDOW, Conditions


@dataclass(frozen=True)
class RunRequest:
    """One simulation to do; ``label`` must be unique within a batch."""

    label: str
    policy: str
    workload: Workload
    cluster: str
    options: PolicyOptions = PolicyOptions()
    batch_window: float = DEFAULT_BATCH_WINDOW
    params: Mapping[str, Any] = field(default_factory=dict)
    #: If set, the run's files (``summary.json``, ``apps.csv``, ``allocations.csv``) are
    #: written there by whichever process ran it, with ``config`` recorded in the summary.
    out_dir: Path | None = None
    config: Mapping[str, Any] | None = None
    #: Estimate error and restart cost (the simulator's, applied to every policy alike).
    conditions: Conditions = Conditions()
    #: The ``themis simulate`` options that reproduce the run, recorded in its summary.
    simulate_options: Mapping[str, Any] | None = None


#: Called with (label, apps finished, apps in the run) as runs progress.
ProgressFn = Callable[[str, int, int], None]

_progress_queue: Any = None  # set in each worker by _init_worker


def _init_worker(progress_queue: Any, parent: int | None = None) -> None:
    global _progress_queue
    _progress_queue = progress_queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (see the docstring)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the parent
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # held while forked
    _die_with_parent(parent)


def _die_with_parent(parent: int | None) -> None:
    """Linux: SIGKILL this process when the parent dies, even by SIGKILL, so that no
    worker outlives it. Elsewhere nothing (the parent's own clean-up still applies)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:  # it died before prctl: go too
        os._exit(1)


#: The signals that stop a batch: held while worker processes are forked.
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the pool forks its workers, then deliver them.

    A Python signal handler that raises while a fork runs its at-fork hooks (logging's
    lock release) has its exception printed as "ignored" and the batch carries on as if
    never signalled; held, the signal raises here, after the forks, and stops the batch.
    The workers inherit the held mask; ``_init_worker`` releases it.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's processes now (SIGTERM, then SIGKILL after a grace period).

    ``shutdown`` alone would wait for every running simulation to finish; Python 3.11 has
    no public way to end them (``terminate_workers`` comes in 3.14), hence the private
    ``_processes``.
    """
    handles = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in handles:
        with contextlib.suppress(OSError, ValueError):
            process.terminate()
    for process in handles:
        with contextlib.suppress(OSError, ValueError):
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)


def execute(request: RunRequest, on_progress: ProgressFn | None = None) -> RunRecord:
    """Run one request here and now."""

    def finished(done: int, total: int) -> None:
        if on_progress is not None:
            on_progress(request.label, done, total)

    started = time.process_time()
    result = simulate(
        request.workload,
        Cluster.from_spec(request.cluster),
        make_policy(request.policy, request.options),
        batch_window=request.batch_window,
        on_app_finished=finished,
        conditions=request.conditions,
    )
    cpu_s = time.process_time() - started
    record = replace(record_run(result, request.label, request.params), cpu_s=cpu_s)
    if request.out_dir is not None:
        write_run(
            request.out_dir,
            result,
            record.summary,
            record.rows,
            request.config,
            request.simulate_options,
        )
    return record


def _execute_in_worker(request: RunRequest) -> RunRecord:
    def report(label: str, done: int, total: int) -> None:
        _progress_queue.put((label, done, total))

    return execute(request, report)


def default_workers(runs: int) -> int:
    return max(1, min(runs, os.cpu_count() or 1))


def run_many(
    requests: Sequence[RunRequest],
    workers: int | None = None,
    on_progress: ProgressFn | None = None,
) -> list[RunRecord]:
    """Every request's record, in the order of ``requests``.

    A run that raises makes this raise the same error once the other runs have been
    cancelled and the workers stopped (not waited for): a batch is all or nothing.
    """
    labels = [r.label for r in requests]
    if len(set(labels)) != len(labels):
        raise ValueError("run labels must be unique within a batch")
    workers = default_workers(len(requests)) if workers is None else workers
    if workers <= 1 or len(requests) <= 1:
        return [execute(r, on_progress) for r in requests]
    context = multiprocessing.get_context("spawn" if os.name != "posix" else "fork")
    progress_queue = context.Queue()
    records: dict[str, RunRecord] = {}
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(progress_queue, os.getpid()),
    )
    futures: dict[Future[RunRecord], str] = {}
    try:
        with _signals_held():  # a signal during a fork would be lost (see _signals_held)
            for r in requests:
                futures[pool.submit(_execute_in_worker, r)] = r.label
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            _drain(progress_queue, on_progress)
            for future in done:
                records[futures[future]] = future.result()
    except BaseException:
        for future in futures:
            future.cancel()
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True)
    # The workers have exited, so their queue feeder threads have flushed: the last
    # reports are in the pipe, if not yet readable at once.
    _drain(progress_queue, on_progress, wait=0.1)
    return [records[label] for label in labels]


def _drain(progress_queue: Any, on_progress: ProgressFn | None, wait: float = 0.0) -> None:
    while True:
        try:
            if wait > 0:
                label, done, total = progress_queue.get(timeout=wait)
            else:
                label, done, total = progress_queue.get_nowait()
        except queue.Empty:
            return
        if on_progress is not None:
            on_progress(label, done, total)
