"""The real runtime: Themis scheduling real training jobs on a Ray cluster.

One arbiter process (``server``) owns a state directory (``store``, ``statelock``) and
serves an HTTP API (``api``, ``auth``, ``tokens``) that the CLI reaches with
``http_client``; its scheduling loop (``arbiter_service`` and its ``service_*`` parts,
``job_control``, ``lease_book``, ``commands``, ``rungs``, ``halving``, ``outcomes``,
``metrics``) drives job actors (``jobs``) running the app's code under ``lease`` (no Ray
import). ``appfile`` reads what an app asks for, ``cluster`` maps Ray nodes to GPUs,
``model`` maps an app to the scheduler's model, ``live`` rebuilds apps from the store,
``ray_cluster`` starts or joins Ray. Ray is imported by ``jobs`` and ``ray_cluster``
only, FastAPI/uvicorn by ``api`` and ``server`` only; the CLI imports them inside
``themis serve``.
"""
