"""Would one typed model (msgspec) replace the hand-written checks of the own format
(``workload/native_check.py``) without losing speed or messages?

Measures, on a generated workload of ``--jobs`` jobs (default 100,000):

- ``load``: ``load_workload`` end to end (streaming read, checks, models, arrivals);
- per-app checks over the same parsed apps, alone: the hand-written ``check_app``, a
  msgspec ``Struct`` model (``msgspec.convert``) plus the two rules it cannot state
  (exactly one of ``iterations``/``duration``; finite numbers), and the JSON Schema with
  ``jsonschema``;
- the message each gives for one bad value.

msgspec is not a dependency of themis: ``pip install msgspec`` to run this. Results and
the decision: docs/traces.md ("Why the checks are hand-written").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import msgspec

from themis.model.profiles import load_profiles
from themis.workload import load_workload
from themis.workload.generator import GeneratorSpec, generate
from themis.workload.native import schema
from themis.workload.native_check import Problem, check_app
from themis.workload.writer import write_workload

Ident = Annotated[str, msgspec.Meta(min_length=1)] | int
NonNegative = Annotated[float, msgspec.Meta(ge=0)]


class Job(msgspec.Struct, forbid_unknown_fields=True):
    id: Ident
    gpus: Annotated[int, msgspec.Meta(ge=1)]
    iterations: NonNegative | None = None
    duration: NonNegative | None = None


class App(msgspec.Struct, forbid_unknown_fields=True):
    id: Ident
    arrival: NonNegative
    jobs: Annotated[list[Job], msgspec.Meta(min_length=1)]
    model: Annotated[str, msgspec.Meta(min_length=1)] | None = None


def msgspec_check(app: Any) -> App:
    """The model, plus what it cannot say (so the comparison is like for like)."""
    parsed = msgspec.convert(app, App)
    if not math.isfinite(parsed.arrival):
        raise ValueError("arrival: must be a finite number")
    for k, job in enumerate(parsed.jobs):
        if (job.iterations is None) == (job.duration is None):
            raise ValueError(f"jobs[{k}]: give exactly one of 'iterations' or 'duration'")
        work = job.iterations if job.iterations is not None else job.duration
        if work is not None and not math.isfinite(work):
            raise ValueError(f"jobs[{k}]: must be a finite number")
    return parsed


def best_of(runs: int, fn: Any) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    workload = generate(GeneratorSpec(jobs=args.jobs, seed=1), load_profiles())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.json"
        with path.open("w") as handle:
            write_workload(workload, handle, "json", {})
        apps = json.loads(path.read_text())["apps"]
        load = best_of(args.runs, lambda: load_workload(str(path)))
    from jsonschema import Draft202012Validator

    full = schema()
    validator = Draft202012Validator({**full["$defs"]["app"], "$defs": full["$defs"]})
    hand = best_of(args.runs, lambda: [check_app(a) for a in apps])
    typed = best_of(args.runs, lambda: [msgspec_check(a) for a in apps])
    js = best_of(1, lambda: [validator.validate(a) for a in apps])
    jobs = sum(len(a["jobs"]) for a in apps)
    print(f"{len(apps):,} apps, {jobs:,} jobs (median of {args.runs} runs)")
    print(f"load_workload end to end          {load:7.3f} s")
    for label, seconds in (
        ("hand-written check_app", hand),
        ("msgspec model + 2 rules", typed),
        ("jsonschema (1 run)", js),
    ):
        print(f"{label:34s}{seconds:7.3f} s  {1e6 * seconds / jobs:6.2f} us/job")
    bad = json.loads(json.dumps(apps[0]))
    bad["jobs"][0]["gpus"] = 0
    try:
        check_app(bad)
    except Problem as problem:
        print(f"hand-written: field '{problem.path}': {problem.message}")
    try:
        msgspec_check(bad)
    except msgspec.ValidationError as error:
        print(f"msgspec:      {error}")


if __name__ == "__main__":
    main()
