"""Many independent simulations, run in worker processes or as Ray tasks, with live
progress; each finished run saved as it finishes, and reused by the next batch that asks
for it with the same inputs (``experiments/saved.py``).

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

Failures: a run that raises is reported (its label and the error) and the batch goes on;
:func:`run_batch` returns what finished and what failed, :func:`run_many` raises
:class:`RunsFailed` once the others are done (and saved).

Files: a worker computes a run's files as text and the process that owns the output
folder writes them (:mod:`themis.experiments.saved`), the same bytes whichever engine
ran it: a Ray task may run on another machine.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import time
import traceback
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from themis.errors import ThemisError
from themis.experiments.request import RunRequest
from themis.model.cluster import Cluster
from themis.policies import make_policy
from themis.reports.files import run_texts
from themis.reports.record import RunRecord, record_run
from themis.simulator import simulate


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back: the record and the run's files as text, or why it failed."""

    label: str
    record: RunRecord | None
    texts: Mapping[str, str] = field(default_factory=dict)
    #: ``None`` when the run finished; else the error, one line, and its traceback.
    error: str | None = None
    details: str = ""
    #: Digest of the themis code that ran it (``saved.code_digest``): a Ray worker with
    #: other code than the driver's would break the results' reproducibility.
    code: str = ""
    #: Whether the error is a bug (anything but a ThemisError): its traceback is shown.
    bug: bool = False
    #: The exception itself, for a run done in this process (never sent between
    #: processes): a batch of one run raises it, as a single command would.
    exception: BaseException | None = field(default=None, compare=False, repr=False)


class RunsFailed(ThemisError):
    """Some runs of a batch failed; the others finished (and were saved)."""

    def __init__(self, failures: Sequence[Outcome], runs: int) -> None:
        self.failures = list(failures)
        first = self.failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        super().__init__(
            f"{len(failures)} of {runs} simulations failed, first '{first.label}': "
            f"{first.error}{more}"
        )


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
    """Run one request here and now (its files written to ``out_dir``, if set); raise its
    error if it fails."""
    from themis.experiments import saved

    record, texts = _simulate(request, on_progress)
    saved.save(request, record, texts)
    return record


def _simulate(
    request: RunRequest, on_progress: ProgressFn | None = None
) -> tuple[RunRecord, dict[str, str]]:
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
    texts = {}
    if request.out_dir is not None:
        texts = run_texts(
            result,
            record.summary,
            record.rows,
            request.config,
            request.files,
            options=request.simulate_options,
        )
    return record, texts


def compute(
    request: RunRequest, on_progress: ProgressFn | None = None, here: bool = False
) -> Outcome:
    """Run one request and return its outcome, a failure included (never raises but for
    KeyboardInterrupt and its kind): what a worker process or a Ray task runs. ``here``:
    the outcome stays in this process and may carry the exception itself."""
    from themis.experiments.saved import code_digest

    try:
        record, texts = _simulate(request, on_progress)
    except Exception as exc:  # any error of this run is this run's, not the batch's
        return Outcome(
            request.label,
            None,
            error=failure_text(exc),
            details="".join(traceback.format_exception(exc)),
            code=code_digest(),
            bug=not isinstance(exc, ThemisError),
            exception=exc if here else None,
        )
    return Outcome(request.label, record, texts, code=code_digest())


def failure_text(exc: BaseException) -> str:
    """``ValueError: message`` on one line (a ThemisError: its message alone)."""
    if isinstance(exc, ThemisError):
        return " ".join(exc.format().split())
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _compute_in_worker(request: RunRequest) -> Outcome:
    def report(label: str, done: int, total: int) -> None:
        _progress_queue.put((label, done, total))

    return compute(request, report)


def default_workers(runs: int) -> int:
    return max(1, min(runs, os.cpu_count() or 1))


#: An engine runs requests and yields each one's outcome as it finishes, in any order.
Outcomes = Generator["Outcome", None, None]
Engine = Callable[[Sequence[RunRequest], ProgressFn | None], Outcomes]


@dataclass
class Batch:
    """What a batch did: every finished run's record (run now or reused), the failures."""

    records: dict[str, RunRecord]
    failures: list[Outcome]
    #: Runs found finished in their folder with the same inputs, not run again.
    reused: int
    #: Runs asked for.
    runs: int

    def ordered(self, requests: Sequence[RunRequest]) -> list[RunRecord]:
        """The records in the order of ``requests``; :class:`RunsFailed` if any failed."""
        if self.failures:
            raise RunsFailed(self.failures, self.runs)
        return [self.records[r.label] for r in requests]


def run_batch(
    requests: Sequence[RunRequest],
    workers: int | None = None,
    on_progress: ProgressFn | None = None,
    engine: Engine | None = None,
    on_failure: Callable[[Outcome], None] | None = None,
    resume: bool = True,
) -> Batch:
    """Run ``requests`` (on ``engine``, else a local pool of ``workers`` processes), each
    saved as it finishes; a request whose folder holds a run with the same inputs is
    reused (and reported to ``on_progress`` as finished at once). Without ``resume`` every run
    runs and only its files are written (``simulate``: one run, its three files)."""
    from themis.experiments import saved

    labels = [r.label for r in requests]
    if len(set(labels)) != len(labels):
        raise ValueError("run labels must be unique within a batch")
    records: dict[str, RunRecord] = {}
    keys: dict[str, str] = {}
    todo = []
    for r in requests:
        if r.out_dir is not None and resume:
            keys[r.label] = saved.inputs_key(r)
            found = saved.load(r, keys[r.label])
            if found is not None:
                records[r.label] = found
                if on_progress is not None:
                    on_progress(r.label, found.summary.apps, found.summary.apps)
                continue
        todo.append(r)
    batch = Batch(records, [], len(requests) - len(todo), len(requests))
    if not todo:
        return batch
    if engine is None:
        engine = local_engine(workers)
    by_label = {r.label: r for r in todo}
    with contextlib.closing(engine(todo, on_progress)) as outcomes:
        for outcome in outcomes:
            request = by_label[outcome.label]
            if outcome.record is not None and outcome.code != saved.code_digest():
                outcome = replace(
                    outcome,
                    record=None,
                    error="the worker that ran it has other themis code than this process "
                    "(install the same themis on every node)",
                )
            if outcome.record is None:
                batch.failures.append(outcome)
                if on_failure is not None:
                    on_failure(outcome)
                continue
            saved.save(request, outcome.record, outcome.texts, keys.get(request.label), resume)
            records[request.label] = outcome.record
    return batch


def run_many(
    requests: Sequence[RunRequest],
    workers: int | None = None,
    on_progress: ProgressFn | None = None,
    engine: Engine | None = None,
) -> list[RunRecord]:
    """Every request's record, in the order of ``requests``.

    A run that raises does not stop the others; once they are done (and saved) this
    raises :class:`RunsFailed`, which names it.
    """
    return run_batch(requests, workers, on_progress, engine).ordered(requests)


def local_engine(workers: int | None) -> Engine:
    """This machine: ``workers`` processes (default one per core); one runs here, in order."""

    def run(requests: Sequence[RunRequest], on_progress: ProgressFn | None) -> Outcomes:
        count = default_workers(len(requests)) if workers is None else workers
        if count <= 1 or len(requests) <= 1:
            return _serial(requests, on_progress)
        return _pool(requests, count, on_progress)

    return run


def _serial(requests: Sequence[RunRequest], on_progress: ProgressFn | None) -> Outcomes:
    for r in requests:
        outcome = compute(r, on_progress, here=True)
        if outcome.record is None and on_progress is not None:
            on_progress(outcome.label, 1, 1)
        yield outcome


def _pool(requests: Sequence[RunRequest], workers: int, on_progress: ProgressFn | None) -> Outcomes:
    context = multiprocessing.get_context("spawn" if os.name != "posix" else "fork")
    progress_queue = context.Queue()
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(progress_queue, os.getpid()),
    )
    futures: dict[Future[Outcome], str] = {}
    try:
        with _signals_held():  # a signal during a fork would be lost (see _signals_held)
            for r in requests:
                futures[pool.submit(_compute_in_worker, r)] = r.label
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            _drain(progress_queue, on_progress)
            for future in done:
                try:
                    outcome = future.result()
                except Exception as exc:  # the worker died (a crash, the OOM killer)
                    outcome = Outcome(futures[future], None, error=failure_text(exc), bug=True)
                if outcome.record is None and on_progress is not None:
                    on_progress(outcome.label, 1, 1)  # done, if not well
                yield outcome
    except BaseException:  # GeneratorExit included: the consumer stopped early
        for future in futures:
            future.cancel()
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True)
    # The workers have exited, so their queue feeder threads have flushed: the last
    # reports are in the pipe, if not yet readable at once.
    _drain(progress_queue, on_progress, wait=0.1)


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
