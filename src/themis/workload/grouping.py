"""How a trace's jobs become apps (docs/traces.md, "Apps").

Themis schedules apps, usually hyperparameter sweeps: groups of trials submitted
together by one user. Traces record them in three ways:

- ``key``: the trace names the app (HyperDrive's ``experiment-id``).
- ``session``: the trace names only the user (Philly, Helios: user and virtual cluster;
  PAI: user). A user's jobs, in submission order, form one app until a gap of more than
  ``app_gap`` seconds between two consecutive submissions starts the next: a sweep is
  submitted as a burst. The app is called ``<user>/<n>`` (its n-th session).
- ``single``: the trace has no user (Gavel, Tiresias): every job is its own app, named
  after the job.
"""

from __future__ import annotations

from themis.workload.records import Grouping, TraceJob

#: Seconds of submission silence that end a user's app in ``session`` grouping. Trials of
#: a sweep are submitted within minutes of each other; an hour apart is a new experiment.
DEFAULT_APP_GAP = 3600.0

__all__ = ["DEFAULT_APP_GAP", "Grouping", "group_jobs"]


def group_jobs(
    jobs: list[TraceJob], grouping: Grouping, app_gap: float
) -> list[tuple[str, list[TraceJob]]]:
    """Apps as (app id, jobs), ordered by first submission, ties by first appearance in
    the file. Jobs keep file order (``key``, ``single``) or submission order (``session``)."""
    apps: dict[str, list[TraceJob]] = {}
    first_index: dict[str, int] = {}
    if grouping is Grouping.KEY:
        for index, job in enumerate(jobs):
            key = job.group if job.group is not None else job.job_id
            if key not in apps:
                apps[key] = []
                first_index[key] = index
            apps[key].append(job)
    elif grouping is Grouping.SINGLE:
        for index, job in enumerate(jobs):
            apps[job.job_id] = [job]
            first_index[job.job_id] = index
    else:
        by_user: dict[str, list[tuple[int, TraceJob]]] = {}
        for index, job in enumerate(jobs):
            by_user.setdefault(job.user or "", []).append((index, job))
        for user, entries in by_user.items():
            entries.sort(key=lambda e: (e[1].submit, e[0]))
            session = 0
            last: float | None = None
            for index, job in entries:
                if last is None or job.submit - last > app_gap:
                    session += 1
                    key = f"{user}/{session}"
                    apps[key] = []
                    first_index[key] = index
                apps[key].append(job)
                last = job.submit
    order = sorted(apps, key=lambda k: (min(j.submit for j in apps[k]), first_index[k]))
    return [(key, apps[key]) for key in order]
