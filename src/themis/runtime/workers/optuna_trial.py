"""An Optuna objective run as one Themis trial, in the trial's own process.

The app file declares the study as data (``state/tuner.py``); every trial of the app is
one Optuna trial, and the job that runs it is one of the study's workers, as in Optuna's
own distributed optimisation (workers sharing an RDB storage):

1. the study is loaded from its storage (created by the first trial to start);
2. the trial asks it for an Optuna trial, tagged with a mark only this app's jobs can
   make, or finds the one it asked before (a lease that ended, a restarted arbiter);
3. the user's objective runs unchanged with that trial; each ``report(value, step)``
   goes to the study (so the pruner sees it), counts ``step + 1`` steps for the arbiter
   and is where the lease is checked: once the arbiter ends the lease, the objective is
   unwound (``LeaseEnded``, which ``except Exception`` does not catch) and the Optuna
   trial stays running, to be run again from step 0 with the same parameters;
4. ``TrialPruned`` is told to the study as pruned and to the arbiter as ``pruned``; a
   value is told as complete; an exception as failed (and the Themis trial fails).

Why here and not in the arbiter: the sampler, the pruner, the storage driver and the
objective are the tenant's choice and run its code paths, so they run under the trial's
lease, limits and grace like any training code, and the arbiter never waits on them.
Nothing here is imported by the arbiter, and Optuna is imported only in the job.
"""

from __future__ import annotations

import math
import time
import warnings
import zlib
from collections.abc import Callable
from typing import Any

from themis.runtime.workers.tuner_trial import Trial

#: The Optuna user attribute that ties an Optuna trial to its Themis trial.
TAG = "themis_trial"
#: Attempts to open the study: the first trials of an app start together and race to
#: create its tables in a fresh SQLite file.
OPEN_ATTEMPTS = 6


class LeaseEnded(BaseException):
    """Raised from ``report`` once the lease has ended: a ``BaseException`` so that an
    objective's ``except Exception`` does not swallow it."""


def driven_by_study(
    objective: Callable[[Any], Any], tuner: dict[str, Any]
) -> Callable[[Trial], None]:
    """The training function that runs ``objective`` as one trial of the declared study."""

    def run(trial: Trial) -> None:
        import optuna

        study = open_study(optuna, tuner, trial.trial_id)
        tag = app_mark(trial)
        asked = _attach(optuna, study, tag, trial)
        if asked is None:
            return
        leased = LeasedTrial(asked, trial, tuner.get("metric", "value"))
        try:
            value = objective(leased)
        except LeaseEnded:
            trial.log(
                f"lease ended at step {leased.last_step + 1}: optuna trial {asked.number} "
                "stays running and starts again from step 0 at the next lease"
            )
            return
        except optuna.TrialPruned:
            study.tell(asked, state=optuna.trial.TrialState.PRUNED)
            where = "before any report" if leased.last_step < 0 else f"at step {leased.last_step}"
            trial.prune(f"pruned by {tuner['pruner']} {where} (optuna trial {asked.number})")
            return
        except Exception:
            try:  # the study hears of the failure; the objective's error is the news
                study.tell(asked, state=optuna.trial.TrialState.FAIL)
            except Exception as told:
                trial.log(f"the study could not be told of the failure: {told!r}")
            raise
        study.tell(asked, value)
        trial.log(f"optuna trial {asked.number} completed: value {_text(value)}, {asked.params}")
        trial.completed(f"completed: optuna trial {asked.number}, value {_text(value)}")

    return run


class LeasedTrial:
    """The ``optuna.trial.Trial`` an objective sees: every attribute is the real
    trial's, and ``report`` also counts steps and checks the lease."""

    def __init__(self, trial: Any, lease: Trial, metric: str) -> None:
        self._trial = trial
        self._lease = lease
        self._metric = metric
        self.last_step = -1

    def report(self, value: float, step: int) -> None:
        with warnings.catch_warnings():
            # A trial run again after its lease ended reports its first steps again;
            # the study keeps the first values (Optuna's rule) and says so every time.
            warnings.filterwarnings("ignore", message="The reported value is ignored")
            self._trial.report(value, step)
        self.last_step = max(self.last_step, int(step))
        self._lease.set_steps(self.last_step + 1)
        if isinstance(value, (int, float)) and math.isfinite(value):
            self._lease.report(**{self._metric: float(value)})
        if self._lease.lease_ended:
            raise LeaseEnded()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trial, name)


def open_study(optuna: Any, tuner: dict[str, Any], trial_id: str) -> Any:
    """The declared study, loaded or created. Samplers are seeded per trial (the seed
    given plus a number of the trial): every job builds its own sampler, and one seed
    in every job would draw the same first configuration in all of them."""
    sampler_args = dict(tuner.get("sampler_args") or {})
    if sampler_args.get("seed") is not None:
        sampler_args["seed"] = (int(sampler_args["seed"]) + zlib.crc32(trial_id.encode())) % 2**32
    url = tuner["storage"]
    engine: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        # Several jobs write the same file: wait for its lock rather than fail at once.
        engine = {"connect_args": {"timeout": 60}}
    for attempt in range(OPEN_ATTEMPTS):
        try:
            storage = optuna.storages.RDBStorage(url, engine_kwargs=engine)
            return optuna.create_study(
                storage=storage,
                study_name=tuner["study_name"],
                direction=tuner["direction"],
                sampler=getattr(optuna.samplers, tuner["sampler"])(**sampler_args),
                pruner=getattr(optuna.pruners, tuner["pruner"])(**(tuner.get("pruner_args") or {})),
                load_if_exists=True,
            )
        except (TypeError, ValueError):
            raise  # a wrong keyword of the sampler or pruner: no retry mends it
        except Exception:
            if attempt == OPEN_ATTEMPTS - 1:
                raise
            time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def app_mark(trial: Trial) -> str:
    """This trial's tag in the study: its name with a MAC under the app's checkpoint key,
    which only the app's jobs hold, so that a storage planted with forged trials cannot
    pass them off as this app's."""
    name = f"{trial.app_id}/{trial.trial_id}"
    return f"{name}#{trial.mark(name)}"


def _attach(optuna: Any, study: Any, tag: str, trial: Trial) -> Any | None:
    """The Optuna trial of this Themis trial: the one asked before under ``tag`` if it
    is still running, else a new one asked now. None when the study already knows how it
    ended (the arbiter was told nothing: a restart between the study's tell and the
    arbiter's record), after saying so to the arbiter."""
    states = optuna.trial.TrialState
    for frozen in study.get_trials(deepcopy=False):
        if frozen.user_attrs.get(TAG) != tag:
            continue
        if frozen.state == states.RUNNING:
            trial.log(f"resuming optuna trial {frozen.number} from step 0 (same parameters)")
            # optuna.trial.Trial(study, id) is how Study.optimize builds its trials; the
            # id is only on the frozen trial.
            return optuna.trial.Trial(study, frozen._trial_id)
        if frozen.state == states.COMPLETE:
            trial.completed(f"completed: optuna trial {frozen.number}, value {_text(frozen.value)}")
        elif frozen.state == states.PRUNED:
            trial.prune(f"pruned (optuna trial {frozen.number}, recorded before a restart)")
        else:
            raise RuntimeError(f"optuna trial {frozen.number} ended {frozen.state.name}")
        return None
    asked = study.ask()
    asked.set_user_attr(TAG, tag)
    trial.log(f"asked the study for a trial: optuna trial {asked.number}")
    return asked


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)[:100]
