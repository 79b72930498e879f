"""What a scheduler may know about a job's length (DESIGN §9, "Knowledge").

A real scheduler never knows how long a trial will run. It knows what the user declared
(an iteration budget) and the progress it has observed. So the apps a policy reads carry
*declared* specs: each job's ``work`` is its true work times a per-job factor drawn from
``[1 - E, 1 + E]`` (uniform, seeded by the run's seed, the app and the job), and the
simulator keeps the true work to itself for progress, job ends and the report. Every
size-aware policy then reads estimates through the same calls as before
(``JobState.remaining_at``, ``AppState.remaining_by_gang``, ``AppState.t_cluster``), with no
way back to the truth.

A live job that has run past its declared work is believed to have ``OVERRUN_SHARE`` of
its declared work left, for as long as it runs on: the scheduler learns from progress
that the declaration was short, and does not take "nothing left" for an answer (a policy
that did would starve the job: nothing to gain from GPUs it does not seem to need). No
job overruns with ``E == 0``.

With ``E == 0`` a declared spec *is* the true spec (the same object), so every schedule is
the one an all-knowing scheduler made before estimates existed, bit for bit.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from themis.errors import ThemisError
from themis.model.workload import AppSpec

#: What a job that has overrun its declared work is believed to have left, as a share of
#: that declaration: the error bound a user is typically within (docs/knowledge.md).
OVERRUN_SHARE = 0.1


def check_estimate_error(error: float) -> None:
    if not (math.isfinite(error) and 0.0 <= error < 1.0):
        raise ThemisError(f"must be in [0, 1), got {error}", field="--estimate-error")


def error_factor(error: float, seed: int, app_id: str, job_id: str) -> float:
    """The multiplicative error on one job's declared work: uniform in ``[1 - E, 1 + E]``,
    a function of (seed, app, job) alone, so that it does not depend on the policy, the
    order of events or the other jobs."""
    if error == 0.0:
        return 1.0
    rng = random.Random(f"estimate-error:{seed}:{app_id}:{job_id}")
    return 1.0 + rng.uniform(-error, error)


def declared(spec: AppSpec, error: float, seed: int, lie: float = 1.0) -> AppSpec:
    """The app as its user declared it: each job's work perturbed by its error factor,
    then multiplied by ``lie`` (an app that misreports on purpose, e.g. 2 for twice its
    work). With no error and no lie, ``spec`` itself."""
    if error == 0.0 and lie == 1.0:
        return spec
    jobs = tuple(
        replace(j, work=j.work * error_factor(error, seed, spec.app_id, j.job_id) * lie)
        for j in spec.jobs
    )
    return replace(spec, jobs=jobs)
