"""The cooperative lease API that training code runs under.

An app's entrypoint is ``module:function``; the runtime calls ``function(trial)`` in a
job actor on the GPUs of a lease. The training loop asks the runtime whether to go on at
every step, and checkpoints when its lease ends::

    import themis

    def train(trial):
        state = trial.restore() or init(trial.config)   # last checkpoint, or a fresh start
        for step in themis.lease(trial, save=lambda: state):
            state = sgd_step(state)
            trial.report(loss=loss(state))               # what successive halving ranks

``lease`` yields step numbers from where the last checkpoint left off. It stops when the
step budget is spent or the arbiter ends the lease (the lease was not renewed, the trial
was stopped early, the app was cancelled); either way it writes a checkpoint of
``save()`` and returns, and the function should return. A step counts as done once it is
in a checkpoint; checkpoints are also written every ``checkpoint_every`` steps so that a
crash loses little work. A job that ignores its lease is killed after a grace period and
resumes later from its last checkpoint.

Nothing here imports Ray: the job actor (``runtime.actors``) drives :func:`run_trial`
and reads :class:`LeaseControl` from another thread.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import math
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themis.runtime.workers import checkpoint

#: 1 was a pickle (refused now: it could carry code); 2 is ``runtime.checkpoint``'s.
CHECKPOINT_FORMAT = 2
#: What one trial keeps for the arbiter between two polls (the arbiter polls every tick,
#: 0.2 s by default): a trial that logs or reports in a tight loop grows its own actor's
#: memory and each poll's transfer to the arbiter's driver without bound otherwise. Past
#: these, lines and reports are counted and dropped, and one line says how many; the
#: arbiter's own per-app log limits (``state/log_writer.py``) apply after.
BUFFERED_LINES = 2000
BUFFERED_REPORTS = 2000
#: Characters kept of one line in that buffer (the arbiter keeps at most 4,000).
BUFFERED_LINE_CHARS = 8000
POLL_NOTE = "one poll of the arbiter"
#: Characters kept of a trial's note on how it ended (``Trial.prune``).
NOTE_CHARS = 500


# -- checkpoints ------------------------------------------------------------------------


def write_checkpoint(
    path: str | Path, step: int, state: Any, key: str, app_id: str, trial_id: str
) -> None:
    """Write ``state`` after ``step`` completed steps, sealed with the app's checkpoint
    key and atomically (``runtime.checkpoint``: data only, never a pickle)."""
    tree = {"format": CHECKPOINT_FORMAT, "step": step, "state": state, "wall": time.time()}
    checkpoint.write(path, key, app_id, trial_id, tree)


def read_checkpoint(
    path: str | Path, key: str, app_id: str, trial_id: str
) -> tuple[int, Any] | None:
    """(steps completed, state) of the last checkpoint, or None if there is none yet;
    :class:`~themis.runtime.workers.checkpoint.CheckpointRefused` if it is not this trial's."""
    tree = checkpoint.read(path, key, app_id, trial_id)
    if tree is None:
        return None
    if not isinstance(tree, dict) or tree.get("format") != CHECKPOINT_FORMAT:
        raise checkpoint.CheckpointRefused("not a themis checkpoint of this version")
    return int(tree["step"]), tree["state"]


def _restore(spec: TrialSpec, control: LeaseControl) -> tuple[int, Any] | None:
    """The trial's checkpoint, if it is this trial's and as fresh as the arbiter's count.

    Refused (moved aside, kept for the operator, never loaded; said in the trial's log
    and in ``control.refused`` for the arbiter to count), and the trial starts from step
    0: a file that is not a regular file within the size limit, fails its seal, or is
    sealed but holds fewer steps than the arbiter knows were checkpointed
    (``spec.expected_step``: an older checkpoint of this very trial put back, a replay)
    or more than the budget. A checkpoint *newer* than the arbiter's count is genuine
    (only this trial's jobs hold its key) and kept: its job wrote it, then was stopped
    or lost before it could report it. Starting from 0 rather than from a stale state
    keeps the arbiter's count honest: it learns the step the job resumed from
    (``Progress.start_step``) and resets its durable count to it, so no step is counted
    twice and the lost ones are said to be lost."""
    for note in control.dir_notes:
        control.log(f"checkpoint directory: {note}")
    try:
        restored = read_checkpoint(
            spec.checkpoint_path, spec.checkpoint_key, spec.app_id, spec.trial_id
        )
        if restored is not None and restored[0] < spec.expected_step:
            raise checkpoint.CheckpointRefused(
                f"it holds step {restored[0]} and the arbiter counts {spec.expected_step} "
                "checkpointed: an older checkpoint of this trial (replayed or rolled back)",
                "stale",
            )
        if restored is not None and restored[0] > spec.budget:
            raise checkpoint.CheckpointRefused(
                f"it holds step {restored[0]}, past the budget of {spec.budget}", "newer"
            )
        return restored
    except checkpoint.CheckpointRefused as exc:
        aside = f"{spec.checkpoint_path}.refused-{int(time.time())}"
        try:
            os.replace(spec.checkpoint_path, aside)
            where = f"moved to {aside}"
        except OSError as move:
            where = f"left in place ({move.strerror})"
        control.refused = exc.why
        control.log(f"checkpoint refused ({exc}); {where}; starting from step 0")
        return None


# -- what the job actor and the arbiter exchange ----------------------------------------


@dataclass(frozen=True)
class TrialSpec:
    """Everything a job actor needs to run one lease of one trial."""

    app_id: str
    trial_id: str
    token: str  # the app's token: every report back carries it
    entrypoint: str  # module:function
    workdir: str
    config: dict[str, Any]
    budget: int
    checkpoint_path: str
    checkpoint_every: int
    gang: tuple[tuple[str, int], ...] = ()  # (node id, GPUs) of every node of the gang
    stop_at: int | None = None  # pause here (a successive-halving rung); None: the budget
    rank: int = 0  # this process's rank in the gang (0 reports and saves)
    master_addr: str = ""  # rank 0's node address, for torch.distributed
    rank_per_gpu: bool = True  # one process per GPU (else one per node of the gang)
    local_rank: int = 0  # this process's rank among the gang's processes on its node
    local_world_size: int = 1  # the gang's processes on this process's node
    checkpoint_key: str = field(default="", repr=False)  # the app's seal (hex), its jobs' only
    #: Steps the arbiter counts as checkpointed (``trials.steps_done``): the restore
    #: refuses a checkpoint holding fewer (``_restore``).
    expected_step: int = 0
    #: The app's declared study or search (``state.tuner.TunerSpec.to_dict``, where its
    #: state lives resolved), as data: the job wraps the entrypoint, the user's Optuna
    #: objective or Tune function, in ``workers.optuna_trial`` or ``workers.tune_trial``.
    #: None: the entrypoint is a training function.
    tuner: dict[str, Any] | None = None

    @property
    def stop(self) -> int:
        return self.budget if self.stop_at is None else min(self.stop_at, self.budget)

    @property
    def world_size(self) -> int:
        return max(1, len(self.members()))

    def members(self) -> list[tuple[str, int, int, int]]:
        """(node id, GPUs, local rank, local world size) of every process of the gang, in
        rank order: one per GPU (``rank_per_gpu``), else one per node with that node's
        GPUs; the node with most GPUs of the gang first (``gang``'s order)."""
        if not self.rank_per_gpu:
            return [(node, count, 0, 1) for node, count in self.gang]
        return [(node, 1, k, count) for node, count in self.gang for k in range(count)]


def rendezvous_env(spec: TrialSpec, port: int) -> dict[str, str]:
    """What ``torch.distributed.init_process_group(init_method="env://")`` (and torchrun's
    conventions) read: one rank per GPU of the gang (or per node), rank 0 the master."""
    return {
        "MASTER_ADDR": spec.master_addr or "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(spec.rank),
        "WORLD_SIZE": str(spec.world_size),
        "LOCAL_RANK": str(spec.local_rank),
        "LOCAL_WORLD_SIZE": str(spec.local_world_size),
    }


@dataclass(frozen=True)
class Progress:
    """What a job reported since the last poll."""

    app_id: str
    trial_id: str
    token: str
    steps: int  # steps completed so far (checkpointed or not)
    checkpoint_step: int  # steps in the last checkpoint written
    reports: tuple[tuple[int, dict[str, float]], ...]  # (steps completed, metrics)
    logs: tuple[str, ...]
    started: bool = False  # the training function is running (the lease clock starts)
    start_step: int = 0  # the step it resumed from (0: no checkpoint, or one refused)
    refused: str = ""  # why its checkpoint was refused (``checkpoint.REFUSALS``), or ""


@dataclass(frozen=True)
class Outcome:
    """How one lease of a trial ended."""

    app_id: str
    trial_id: str
    token: str
    # "done": the budget (or the rung it was to pause at) is reached or the function
    # returned by itself; "paused": the lease ended first; "error": the function raised;
    # "pruned": the trial's own tuner stopped it for good (``Trial.prune``).
    status: str
    steps: int
    checkpoint_step: int
    last: Progress  # what was reported since the last poll
    error: str | None = None
    #: The trial's own words on how it ended (``Trial.prune``, ``Trial.completed``), or "".
    note: str = ""


@dataclass
class LeaseControl:
    """State shared between the training thread and the actor's poll/stop calls."""

    start_step: int = 0
    stop_requested: bool = False
    started: bool = False
    steps: int = 0
    checkpoint_step: int = 0
    reports: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    refused: str = ""
    dir_notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    dropped_lines: int = 0
    dropped_reports: int = 0
    pruned: bool = False
    end_note: str = ""

    def log(self, line: str) -> None:
        with self.lock:
            self.add_line(line)

    def add_line(self, line: str) -> None:
        """Buffer a line for the next poll (the lock held): bounded, see BUFFERED_LINES."""
        if len(self.logs) >= BUFFERED_LINES:
            self.dropped_lines += 1
        else:
            self.logs.append(line[:BUFFERED_LINE_CHARS])

    def add_report(self, report: tuple[int, dict[str, float]]) -> None:
        """Buffer a report for the next poll (the lock held): the last ones count most
        (rungs read the last value at a step), so past the bound the oldest is dropped."""
        if len(self.reports) >= BUFFERED_REPORTS:
            del self.reports[0]
            self.dropped_reports += 1
        self.reports.append(report)

    def request_stop(self) -> None:
        with self.lock:
            self.stop_requested = True

    def drain(self, spec: TrialSpec) -> Progress:
        with self.lock:
            reports, self.reports = self.reports, []
            logs, self.logs = self.logs, []
            if self.dropped_lines or self.dropped_reports:
                logs.append(
                    f"[themis: {self.dropped_lines} log lines and {self.dropped_reports} "
                    f"reports dropped since the last poll: over {BUFFERED_LINES} lines or "
                    f"{BUFFERED_REPORTS} reports in {POLL_NOTE}]"
                )
                self.dropped_lines = self.dropped_reports = 0
            return Progress(
                spec.app_id,
                spec.trial_id,
                spec.token,
                self.steps,
                self.checkpoint_step,
                tuple(reports),
                tuple(logs),
                self.started,
                self.start_step,
                self.refused,
            )


def _trial_dirs(spec: TrialSpec) -> list[str]:
    """The trial's checkpoint directories made real (``checkpoint.trial_dirs``); what
    was in the way, or why they could not be made (the trial then runs without
    resuming: its restore finds nothing it can read)."""
    try:
        return checkpoint.trial_dirs(spec.checkpoint_path)
    except OSError as exc:
        return [f"cannot be made ({exc}): running without resuming"]


# -- the API training code sees ---------------------------------------------------------


class Trial:
    """One trial as its training function sees it."""

    def __init__(self, spec: TrialSpec, control: LeaseControl) -> None:
        self._spec = spec
        self._control = control
        self._restored: tuple[int, Any] | None = _restore(spec, control)
        start = self._restored[0] if self._restored is not None else 0
        control.start_step = control.steps = control.checkpoint_step = start
        self._leased = False
        self._in_step = False  # inside the body of a lease step

    @property
    def app_id(self) -> str:
        return self._spec.app_id

    @property
    def trial_id(self) -> str:
        return self._spec.trial_id

    @property
    def config(self) -> dict[str, Any]:
        """This trial's hyperparameters (drawn from the app's search space)."""
        return dict(self._spec.config)

    @property
    def budget(self) -> int:
        return self._spec.budget

    @property
    def steps(self) -> int:
        """Steps completed so far (the current one excluded while inside the lease loop)."""
        with self._control.lock:
            return self._control.steps

    @property
    def start_step(self) -> int:
        """Steps already done when this lease began (0 on a fresh start)."""
        return self._control.start_step

    @property
    def gpus(self) -> list[str]:
        """The GPUs of this lease on this node, as Ray set ``CUDA_VISIBLE_DEVICES``."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        return [d for d in visible.split(",") if d]

    @property
    def gang(self) -> tuple[tuple[str, int], ...]:
        """(node id, GPU count) of each node of the gang; rank 0's first."""
        return self._spec.gang

    @property
    def local_rank(self) -> int:
        """This process's rank among the gang's processes on its node (``LOCAL_RANK``)."""
        return self._spec.local_rank

    @property
    def local_world_size(self) -> int:
        """The gang's processes on this node (``LOCAL_WORLD_SIZE``)."""
        return self._spec.local_world_size

    @property
    def rank(self) -> int:
        """This process's rank in the gang (``RANK``); rank 0 alone reports and saves."""
        return self._spec.rank

    @property
    def world_size(self) -> int:
        return self._spec.world_size

    def restore(self) -> Any | None:
        """The state saved by the last checkpoint, or None on a fresh start."""
        return None if self._restored is None else self._restored[1]

    def report(self, **metrics: float) -> None:
        """Record metrics as of the end of the current step (inside the lease loop) or of
        the steps completed so far (outside it); successive halving reads them."""
        values = {}
        for name, value in metrics.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"metric {name} is {value}")
            values[name] = value
        with self._control.lock:
            steps = self._control.steps + (1 if self._in_step else 0)
            self._control.add_report((steps, values))

    def log(self, message: str) -> None:
        """A line for ``themis logs``."""
        with self._control.lock:
            self._control.add_line(str(message))

    @property
    def lease_ended(self) -> bool:
        """True once the arbiter has ended this lease (not renewed, preempted, the app
        cancelled): the function should return soon; its steps count from its last
        checkpoint."""
        with self._control.lock:
            return self._control.stop_requested

    def prune(self, why: str) -> None:
        """End this trial for good, before its budget: its own tuner's pruner decided.
        The function should return right after; the arbiter records the trial as
        ``pruned`` with ``why``, and its app no longer bids for its remaining steps."""
        with self._control.lock:
            self._control.pruned = True
            self._control.end_note = str(why)[:NOTE_CHARS]

    def completed(self, why: str) -> None:
        """Say how this trial ended when its function returns before its budget (a
        tuner's objective returned its value): the arbiter records it as finished,
        with ``why`` as the reason."""
        with self._control.lock:
            self._control.end_note = str(why)[:NOTE_CHARS]

    def mark(self, text: str) -> str:
        """A MAC of ``text`` under the app's checkpoint key, which only this app's jobs
        hold: a tag written to a shared store (a tuner's study) that no other app can
        forge."""
        key = bytes.fromhex(self._spec.checkpoint_key) if self._spec.checkpoint_key else b""
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:32]

    def set_steps(self, steps: int) -> None:
        """Count ``steps`` steps done (at most the budget, never backwards), for a
        function that runs its own loop rather than :func:`lease` (a tuner's objective
        counts its reports). Not checkpointed: a resumed run starts from its last
        checkpoint."""
        with self._control.lock:
            self._control.steps = max(self._control.steps, min(int(steps), self._spec.budget))

    def should_continue(self) -> bool:
        """False once the lease has ended, the budget is spent or the trial must pause at
        a successive-halving rung."""
        with self._control.lock:
            return not self._control.stop_requested and self._control.steps < self._spec.stop

    def checkpoint(self, state: Any) -> None:
        """Save ``state`` as of the steps completed so far (rank 0 only: the ranks of a
        data-parallel gang hold the same state)."""
        step = self._control.steps
        spec = self._spec
        if spec.rank == 0:
            write_checkpoint(
                spec.checkpoint_path, step, state, spec.checkpoint_key, spec.app_id, spec.trial_id
            )
        with self._control.lock:
            self._control.checkpoint_step = step


def lease(
    trial: Trial, save: Callable[[], Any], agree: Callable[[bool], bool] | None = None
) -> Iterator[int]:
    """Yield step numbers (0-based, from the last checkpoint) while the lease lasts.

    Step ``k`` counts as completed when the loop asks for the next one. ``save()`` returns
    the state to checkpoint: it is called every ``checkpoint_every`` steps and once at the
    end, so the last checkpoint always holds every completed step.

    In a gang of several ranks, each rank sees the stop at its own moment; ``agree`` turns
    this rank's "go on?" into the gang's (e.g. an all-reduce MIN over the ranks), so that
    every rank stops after the same step and no collective is left waiting.
    """
    if trial._leased:
        raise RuntimeError("lease() can be iterated once per trial run")
    trial._leased = True
    control = trial._control
    every = trial._spec.checkpoint_every
    while agree(trial.should_continue()) if agree is not None else trial.should_continue():
        trial._in_step = True
        yield control.steps
        trial._in_step = False
        with control.lock:
            control.steps += 1
        if control.steps % every == 0 and control.steps < trial._spec.stop:
            trial.checkpoint(save())
    if control.steps > control.checkpoint_step or control.steps == 0:
        trial.checkpoint(save())


# -- running one lease ------------------------------------------------------------------


def load_entrypoint(entrypoint: str, workdir: str) -> Callable[[Trial], Any]:
    module_name, _, function = entrypoint.partition(":")
    if workdir not in sys.path:
        sys.path.insert(0, workdir)
    module = importlib.import_module(module_name)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AttributeError(f"{module_name} has no function {function}")
    return fn


def _tuned(spec: TrialSpec) -> Callable[[Trial], Any]:
    """A tuner app's entrypoint (an Optuna objective, a Ray Tune function) wrapped in
    the code that drives its study or search in this job."""
    assert spec.tuner is not None
    if spec.tuner["kind"] == "ray-tune":
        from themis.runtime.workers import tune_trial

        tune_trial.prepare()  # before the user's module binds ray.tune.report
        trainable = load_entrypoint(spec.entrypoint, spec.workdir)
        return tune_trial.driven_by_search(trainable, spec.tuner)
    from themis.runtime.workers import optuna_trial

    objective = load_entrypoint(spec.entrypoint, spec.workdir)
    return optuna_trial.driven_by_study(objective, spec.tuner)


def run_trial(spec: TrialSpec, control: LeaseControl, port: int = 0) -> Outcome:
    """Run one lease of a trial in this process: resume, train, checkpoint, report.
    ``port`` is the gang's ``MASTER_PORT`` (opened on rank 0's node)."""
    os.environ.update(rendezvous_env(spec, port))
    try:
        control.dir_notes = _trial_dirs(spec)
        trial = Trial(spec, control)
        if control.steps >= spec.stop:
            return _outcome(spec, control, "done")
        if control.stop_requested:  # the lease ended before the job even started
            return _outcome(spec, control, "paused")
        if spec.tuner is not None:  # an objective or Tune function; our code drives it
            fn = _tuned(spec)
        else:
            fn = load_entrypoint(spec.entrypoint, spec.workdir)
        with control.lock:
            control.started = True
        fn(trial)
    except Exception:
        error = traceback.format_exc(limit=8)
        with control.lock:
            control.logs.append(error[:BUFFERED_LINE_CHARS])  # always: it is why it failed
        return _outcome(spec, control, "error", error.strip().splitlines()[-1])
    with control.lock:
        stopped = control.stop_requested and control.steps < spec.stop
        pruned, said = control.pruned, bool(control.end_note)
    if pruned:
        return _outcome(spec, control, "pruned")
    return _outcome(spec, control, "paused" if stopped and not said else "done")


def _outcome(
    spec: TrialSpec, control: LeaseControl, status: str, error: str | None = None
) -> Outcome:
    last = control.drain(spec)
    return Outcome(
        spec.app_id,
        spec.trial_id,
        spec.token,
        status,
        last.steps,
        last.checkpoint_step,
        last,
        error,
        control.end_note,
    )
