"""The real runtime: Themis scheduling real training jobs on a Ray cluster.

``appfile`` (what an app asks for), ``store`` (durable state in SQLite), ``tokens``,
``lease`` (the API training code runs under; no Ray import), ``cluster`` (GPU inventory
from Ray nodes), ``jobs`` (job actors), ``halving`` (successive halving), ``model`` (an
app as the scheduler's model), ``arbiter_service`` (the real-time mechanism), ``client``
(what the CLI does), ``ray_cluster`` (start or join Ray). Only ``jobs``,
``arbiter_service`` and ``ray_cluster`` import Ray.
"""
