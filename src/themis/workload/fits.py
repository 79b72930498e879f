"""Whether a workload can run on a cluster at all, asked before any run: the check names
the trace format's own field for a gang's GPU count (``formats.gang_field``), so it lives
with the formats, and the simulator and the command line both call it."""

from __future__ import annotations

from themis.errors import ThemisError
from themis.model.cluster import Cluster
from themis.model.gpu_types import with_type_times
from themis.model.workload import Workload
from themis.workload.formats import gang_field


def check_fits(workload: Workload, cluster: Cluster) -> None:
    """Refuse, before any run, a job whose gang is larger than the cluster; the error
    names the trace format's own field for the GPU count."""
    fmt = workload.notes.get("format")
    gang_name = gang_field(fmt if isinstance(fmt, str) else None)
    with_type_times(workload, cluster)  # every model has a speed on every GPU type
    # A gang never mixes GPU types: it must fit in the largest type's GPUs.
    largest = max((part.count for _, part in cluster.shape.parts), default=cluster.size)
    for app in workload.apps:
        if app.model not in workload.profiles:
            raise ThemisError(f"unknown model '{app.model}'", source=workload.source, field="model")
        for job in app.jobs:
            if job.gang > largest:
                where = (
                    f"the cluster has {cluster.size}"
                    if not cluster.typed
                    else f"a gang never mixes GPU types and the largest type has {largest}"
                )
                raise ThemisError(
                    f"job {job.job_id} needs {job.gang} GPUs but {where}",
                    source=workload.source,
                    line=job.line,
                    field=gang_name,
                )
