"""An app file as the scheduler's model: the same ``AppSpec`` / ``ModelProfile`` /
``AppState`` the simulator uses, so the runtime drives the simulator's policy code.

A trial is a job of ``steps`` iterations on a rigid gang of ``gpus_per_trial`` GPUs. The
profile's ``time_per_iteration`` is ``step_time * gang``: a model job makes
``gang * factor / time_per_iteration`` iterations per second, i.e. one step every
``step_time / factor`` seconds, which is what the app file says a step takes.
"""

from __future__ import annotations

from themis.model.profiles import ModelProfile
from themis.model.workload import AppSpec, JobSpec
from themis.runtime.state.appfile import AppFile
from themis.runtime.state.store import trial_id_of


def app_profile(app: AppFile) -> ModelProfile:
    return ModelProfile(
        app.name, app.step_time * app.gpus_per_trial, app.cross_machine, app.cross_rack
    )


def app_spec(app: AppFile, arrival: float) -> AppSpec:
    jobs = tuple(
        JobSpec(trial_id_of(i), app.gpus_per_trial, float(app.steps)) for i in range(app.trials)
    )
    return AppSpec(app.name, arrival, app.name, jobs, progress_weight=app.progress_weight)
