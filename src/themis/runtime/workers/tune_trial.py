"""A Ray Tune function trainable run as one Themis trial, driven by a Tune searcher (and
ASHA) in the trial's own process.

A Tune ``Searcher`` keeps its state in memory, in the one process ``Tuner.fit`` runs.
Here every trial is its own job, so the searcher's state (and the scheduler's) lives in
files beside the app's checkpoints, and each job takes it under a lock, calls the
searcher's public methods and puts it back:

1. ``suggest(trial_id)`` draws the trial's configuration (kept in the trial's own
   checkpoint, data only, so a trial that runs again keeps it);
2. the user's function runs unchanged with that configuration; ``ray.tune.report`` is
   pointed at this module while it runs: each report counts one
   ``training_iteration`` (a step for the arbiter), checks the lease, and goes to the
   scheduler's ``on_trial_result``, whose ``STOP`` ends the trial as ``pruned``;
3. the last result goes to the searcher's ``on_trial_complete`` (and the scheduler's).

The state files are Tune's own ``save``/``restore`` pickles. A pickle runs code when
read, so each is sealed with a MAC under the app's checkpoint key (``Trial.mark``,
which only the app's jobs can make) and read only if the seal holds: another tenant
cannot plant one; a file that fails it is moved aside and the search starts afresh.
Nothing here runs in the arbiter: it sees steps and how the trial ended.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from themis.runtime.workers.tuner_trial import Trial


class LeaseEnded(BaseException):
    """Raised from ``tune.report`` once the lease has ended (not an ``Exception``: the
    function's own handlers do not catch it)."""


class Stopped(BaseException):
    """Raised from ``tune.report`` when the scheduler says STOP."""


#: The report hook of the trial running in this process (one trial per job process).
_running: Callable[[dict[str, Any]], None] | None = None
#: How long a trial waits for a searcher that has no configuration yet (a concurrency
#: limit, or a searcher still warming up), asking again with backoff.
SUGGEST_WAIT = 60.0


def prepare() -> None:
    """Point ``ray.tune.report`` at this module, before the user's module is imported
    (so that ``from ray.tune import report`` binds ours too)."""
    import ray.tune
    import ray.tune.trainable.trainable_fn_utils as fn_utils

    def report(metrics: dict[str, Any], *, checkpoint: Any = None) -> None:
        if _running is None:
            raise RuntimeError("ray.tune.report called outside a Themis trial")
        _running(dict(metrics))

    ray.tune.report = report
    fn_utils.report = report
    ray.tune.get_checkpoint = lambda: None  # no Tune checkpoints: a rerun starts afresh


def driven_by_search(
    trainable: Callable[..., Any], tuner: dict[str, Any]
) -> Callable[[Trial], None]:
    """The training function that runs ``trainable(config)`` as one trial of the
    declared search."""

    def run(trial: Trial) -> None:
        global _running
        state = SearchState(Path(tuner["state_dir"]), tuner, trial)
        saved = trial.restore()
        if isinstance(saved, dict) and "ended" in saved:
            _say_ended(trial, saved["ended"], saved["note"])
            return
        if isinstance(saved, dict) and "config" in saved:
            config = saved["config"]
            trial.log(f"running again from iteration 0 with the same configuration {config}")
        else:
            config = state.suggest()
            trial.checkpoint({"config": config})  # data only: the trial keeps its draw
            trial.log(f"suggested by {tuner['sampler']}: {config}")
        iteration = 0
        last: dict[str, Any] = {}

        def on_report(metrics: dict[str, Any]) -> None:
            nonlocal iteration, last
            iteration += 1
            metrics.setdefault("training_iteration", iteration)
            last = metrics
            trial.set_steps(iteration)
            value = metrics.get(tuner["metric"])
            if isinstance(value, (int, float)) and value == value:
                trial.report(**{tuner["metric"]: float(value)})
            if state.on_result(metrics) == "STOP":
                raise Stopped()
            if trial.lease_ended:
                raise LeaseEnded()

        _running = on_report
        try:
            trainable(dict(config))
        except LeaseEnded:
            trial.log(f"lease ended at iteration {iteration}: runs again from iteration 0")
            return
        except Stopped:
            state.complete(last)
            if iteration >= trial.budget:  # ASHA stops every trial at max_t: its end
                note = f"completed after {iteration} iterations (the scheduler's max_t)"
                trial.checkpoint({"config": config, "ended": "completed", "note": note})
                trial.completed(note)
                return
            note = f"stopped by {tuner['pruner']} at iteration {iteration}"
            trial.checkpoint({"config": config, "ended": "pruned", "note": note})
            trial.prune(note)
            return
        except Exception:
            try:  # the searcher hears of the failure; the function's error is the news
                state.complete(last, error=True)
            except Exception as told:
                trial.log(f"{tuner['sampler']} could not be told of the failure: {told!r}")
            raise
        finally:
            _running = None
        state.complete(last)
        value = last.get(tuner["metric"])
        note = f"completed after {iteration} iterations, {tuner['metric']} {value}"
        trial.checkpoint({"config": config, "ended": "completed", "note": note})
        trial.completed(note)

    return run


def _say_ended(trial: Trial, ended: str, note: str) -> None:
    """A trial whose end its checkpoint holds (the arbiter restarted before it heard)."""
    if ended == "pruned":
        trial.prune(note)
    else:
        trial.completed(note)


class SearchState:
    """The app's searcher and scheduler, in sealed files under a lock."""

    def __init__(self, root: Path, tuner: dict[str, Any], trial: Trial) -> None:
        self.root = root
        self.tuner = tuner
        self.trial = trial
        root.mkdir(parents=True, exist_ok=True, mode=0o700)

    @contextmanager
    def locked(self) -> Iterator[None]:
        with open(self.root / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def suggest(self) -> dict[str, Any]:
        deadline = time.monotonic() + SUGGEST_WAIT
        pause = 0.1
        while True:
            with self.locked():
                searcher = self._load("searcher", self._new_searcher)
                config = searcher.suggest(self.trial.trial_id)
                if config is not None:
                    self._save("searcher", searcher)
                    scheduler = self._load("scheduler", self._new_scheduler)
                    scheduler.on_trial_add(None, _TuneTrial(self.trial.trial_id))
                    self._save("scheduler", scheduler)
            if config is not None and config != "FINISHED":
                return dict(config)
            if config == "FINISHED" or time.monotonic() > deadline:
                raise RuntimeError(f"{self.tuner['sampler']} gave no configuration ({config})")
            time.sleep(pause)
            pause = min(2.0, pause * 2)

    def on_result(self, result: dict[str, Any]) -> str:
        with self.locked():
            scheduler = self._load("scheduler", self._new_scheduler)
            who = _TuneTrial(self.trial.trial_id)
            if self.trial.trial_id not in _added(scheduler):
                scheduler.on_trial_add(None, who)
            decision = str(scheduler.on_trial_result(None, who, result))
            self._save("scheduler", scheduler)
        return decision

    def complete(self, result: dict[str, Any], error: bool = False) -> None:
        with self.locked():
            searcher = self._load("searcher", self._new_searcher)
            searcher.on_trial_complete(self.trial.trial_id, result or None, error=error)
            self._save("searcher", searcher)
            if result and not error:
                scheduler = self._load("scheduler", self._new_scheduler)
                if self.trial.trial_id in _added(scheduler):
                    scheduler.on_trial_complete(None, _TuneTrial(self.trial.trial_id), result)
                    self._save("scheduler", scheduler)

    def _new_searcher(self) -> Any:
        import ray.tune.search as search

        cls = getattr(search, self.tuner["sampler"], None)
        if cls is None:  # the searchers that need a package of their own
            module = {
                "OptunaSearch": "optuna",
                "HyperOptSearch": "hyperopt",
                "BayesOptSearch": "bayesopt",
                "HEBOSearch": "hebo",
                "AxSearch": "ax",
            }[self.tuner["sampler"]]
            cls = getattr(
                __import__(f"ray.tune.search.{module}", fromlist=["_"]), self.tuner["sampler"]
            )
        searcher = cls(**(self.tuner.get("sampler_args") or {}))
        # What Tuner.fit does with its param_space, metric and mode (the searcher's
        # public set_search_properties), so that the space is converted the same way.
        mode = "min" if self.tuner["direction"] == "minimize" else "max"
        if not searcher.set_search_properties(
            self.tuner["metric"], mode, tune_space(self.tuner["space"])
        ):
            raise RuntimeError(f"{self.tuner['sampler']} refused the search space")
        return searcher

    def _new_scheduler(self) -> Any:
        from ray.tune import schedulers

        name = self.tuner["pruner"]
        if name == "FIFOScheduler":
            return _NoScheduler()
        return getattr(schedulers, name)(
            metric=self.tuner["metric"],
            mode="min" if self.tuner["direction"] == "minimize" else "max",
            **(self.tuner.get("pruner_args") or {}),
        )

    def _load(self, name: str, new: Callable[[], Any]) -> Any:
        """The object last saved under ``name`` if its seal holds, else a new one (a
        file that fails its seal is moved aside: never read)."""
        obj = new()
        path = self.root / f"{name}.pkl"
        try:
            data = path.read_bytes()
            mac = (self.root / f"{name}.mac").read_text().strip()
        except FileNotFoundError:
            return obj
        if mac != self.trial.mark(hashlib.sha256(data).hexdigest()):
            aside = path.with_name(f"{path.name}.refused-{int(time.time())}")
            os.replace(path, aside)
            self.trial.log(f"{name} state fails its seal: moved to {aside.name}; a new one")
            return obj
        obj.restore(str(path))
        return obj

    def _save(self, name: str, obj: Any) -> None:
        path = self.root / f"{name}.pkl"
        temp = path.with_name(path.name + ".tmp")
        obj.save(str(temp))
        mac = self.trial.mark(hashlib.sha256(temp.read_bytes()).hexdigest())
        (self.root / f"{name}.mac.tmp").write_text(mac)
        os.replace(temp, path)
        os.replace(self.root / f"{name}.mac.tmp", self.root / f"{name}.mac")


def tune_space(space: dict[str, Any]) -> dict[str, Any]:
    """The app file's search space as Ray Tune's domains."""
    from ray import tune

    out = {}
    for name, draw in space.items():
        kind, args = next(iter(draw.items()))
        out[name] = tune.choice(args) if kind == "choice" else getattr(tune, kind)(*args)
    return out


def _added(scheduler: Any) -> set[str]:
    """The trials a scheduler has been told of (ASHA keeps them by id)."""
    return set(getattr(scheduler, "_trial_info", {}) or {})


class _TuneTrial:
    """What ASHA reads of Tune's ``Trial``: its id (``on_trial_add``/``on_trial_result``
    use nothing else)."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id


class _NoScheduler:
    """FIFO: every trial runs to its end; nothing to save."""

    _trial_info: dict[str, Any] = {}

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        pass

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        return "CONTINUE"

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        pass

    def save(self, path: str) -> None:
        Path(path).write_text(json.dumps({}))

    def restore(self, path: str) -> None:
        pass
