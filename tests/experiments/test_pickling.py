"""What a process pool or Ray carries to a worker pickles, interpreted or compiled.

Pickle's default rebuilds an object bare and sets its attributes one by one, which a
compiled frozen dataclass refuses (docs/compiled.md); against the compiled install
(CI's second run) these tests fail unless the classes pickle by their constructor
(``themis.model.frozen.by_fields``), as ``themis compare -j 2`` needs.
"""

from __future__ import annotations

import pickle

from themis.experiments.request import RunRequest
from themis.model.profiles import load_profiles
from themis.model.workload import AppSpec, JobSpec, LossCurve, Search, Workload
from themis.simulator.engine import Conditions
from themis.workload import load_workload


def test_a_run_request_with_the_bundled_workload_round_trips() -> None:
    request = RunRequest(
        label="themis",
        policy="themis",
        workload=load_workload(),
        cluster="2x4x8",
        conditions=Conditions(estimate_error=0.2, restart_cost=30.0, misreport=(("a", 2.0),)),
    )
    again = pickle.loads(pickle.dumps(request))
    assert again == request
    assert again.workload.apps == request.workload.apps
    assert again.workload.profiles == request.workload.profiles


def test_every_workload_class_round_trips_with_its_optional_fields() -> None:
    curve = LossCurve(final=0.1, scale=2.0, decay=0.5)
    app = AppSpec(
        app_id="a",
        arrival=5.0,
        model="resnet50",
        jobs=(JobSpec("a-0", 2, 100.0, line=7), JobSpec("a-1", 1, 50.0)),
        search=Search(eta=3, min_work=10.0, mode="max"),
        owner="alice",
        progress_weight=0.5,
    )
    workload = Workload(
        apps=(app,),
        profiles=load_profiles(),
        source="memory",
        notes={"interval": 3.0},
        curves={("a", "a-0"): curve},
    )
    assert pickle.loads(pickle.dumps(workload)) == workload
    assert pickle.loads(pickle.dumps(curve)).at(0.5) == curve.at(0.5)
