"""Readers stream: loading a generated 100,000-job trace stays under 500 MB of memory.

Each load runs in a fresh Python process that reports its own peak resident set size
(``VmHWM`` in ``/proc/self/status``), so nothing the test process holds is counted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from themis.workload.generator import GeneratorSpec, generate
from themis.workload.writer import write_workload

from .conftest import PROFILES

LIMIT_MB = 500
JOBS = 100_000

# The peak is the process's own (VmHWM of its address space), not ``ru_maxrss``: Linux
# carries the parent's high-water mark into a child across fork and exec, so a child of
# a large pytest process would report the parent's peak.
_PROBE = """
import sys, time
start = time.perf_counter()
from themis.workload import load_workload
w = load_workload(sys.argv[1], format=sys.argv[2])
with open("/proc/self/status") as status:
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(w.job_count, peak_kb, time.perf_counter() - start)
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("big")
    workload = generate(GeneratorSpec(jobs=JOBS, seed=1), PROFILES)
    files = {}
    for encoding in ("json", "yaml"):
        path = folder / f"gen.{encoding}"
        with path.open("w") as handle:
            write_workload(workload, handle, encoding, workload.notes)
        files[encoding] = path
    # The same jobs as a Philly cluster_job_log: one user per app, one attempt per job.
    philly = folder / "cluster_job_log"
    with philly.open("w") as handle:
        handle.write("[\n")
        first = True
        for app in workload.apps:
            for job in app.jobs:
                seconds = job.work * PROFILES[app.model].time_per_iteration / job.gang
                element = {
                    "status": "Pass",
                    "vc": "vc",
                    "jobid": job.job_id,
                    "user": app.app_id,
                    "submitted_time": "2017-10-07 01:00:00",
                    "attempts": [
                        {
                            "start_time": "2017-10-07 01:00:00",
                            "end_time": "2017-10-07 01:00:00"
                            if seconds < 1
                            else "2017-10-08 01:00:00",
                            "detail": [{"ip": "m1", "gpus": [f"gpu{g}" for g in range(job.gang)]}],
                        }
                    ],
                }
                handle.write(("" if first else ",\n") + json.dumps(element))
                first = False
        handle.write("\n]\n")
    files["philly"] = philly
    return files


@pytest.mark.parametrize(
    ("kind", "fmt"), [("json", "themis"), ("yaml", "themis"), ("philly", "philly")]
)
def test_loading_100k_jobs_stays_under_500_mb(
    generated, tmp_path: Path, kind: str, fmt: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(generated[kind]), fmt],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    jobs, peak_kb, seconds = done.stdout.split()
    assert int(jobs) == JOBS
    peak_mb = int(peak_kb) / 1024
    print(f"{kind}: {JOBS:,} jobs in {float(seconds):.1f} s, peak RSS {peak_mb:.0f} MB")
    assert peak_mb < LIMIT_MB
